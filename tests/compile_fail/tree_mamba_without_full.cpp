// expect: unikv: Swa and Mamba components attach to FULL pages
// A tree with Mamba but no Full must not compile (the reference core checks the same rule).
#include <unikv/tree/reference_tree.hpp>

int main() {
#ifdef UNIKV_COMPILE_FAIL_CONTROL
    unikv::ReferenceTree<unikv::Full, unikv::Mamba> tree{unikv::TreeConfig{}};
#else
    unikv::ReferenceTree<unikv::Mamba> tree{unikv::TreeConfig{}};
#endif
}

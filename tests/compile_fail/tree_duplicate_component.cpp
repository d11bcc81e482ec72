// expect: unikv: a tree component is listed twice
// A component listed twice must not compile.
#include <unikv/tree/radix_tree.hpp>

int main() {
#ifdef UNIKV_COMPILE_FAIL_CONTROL
    unikv::RadixTree<unikv::Full, unikv::Mamba> tree{unikv::TreeConfig{}};
#else
    unikv::RadixTree<unikv::Full, unikv::Mamba, unikv::Mamba> tree{unikv::TreeConfig{}};
#endif
}

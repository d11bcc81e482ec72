// expect: unikv: Swa and Mamba components attach to FULL pages
// A tree with Swa but no Full must not compile.
#include <unikv/tree/radix_tree.hpp>

int main() {
#ifdef UNIKV_COMPILE_FAIL_CONTROL
    unikv::RadixTree<unikv::Full, unikv::Swa> tree{unikv::TreeConfig{.swa_window = 4}};
#else
    unikv::RadixTree<unikv::Swa> tree{unikv::TreeConfig{.swa_window = 4}};
#endif
}

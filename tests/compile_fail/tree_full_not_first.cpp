// expect: unikv: Full must be the first tree component
// Full listed after another component must not compile.
#include <unikv/tree/radix_tree.hpp>

int main() {
#ifdef UNIKV_COMPILE_FAIL_CONTROL
    unikv::RadixTree<unikv::Full, unikv::Swa> tree{unikv::TreeConfig{.swa_window = 4}};
#else
    unikv::RadixTree<unikv::Swa, unikv::Full> tree{unikv::TreeConfig{.swa_window = 4}};
#endif
}

// expect: unikv: tree components must be Full, Swa or Mamba
// A type that is not a tree component must not compile.
#include <unikv/tree/radix_tree.hpp>

int main() {
#ifdef UNIKV_COMPILE_FAIL_CONTROL
    unikv::RadixTree<unikv::Full> tree{unikv::TreeConfig{}};
#else
    unikv::RadixTree<unikv::Full, int> tree{unikv::TreeConfig{}};
#endif
}

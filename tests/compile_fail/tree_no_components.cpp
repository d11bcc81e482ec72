// expect: unikv: a tree needs components and Full is mandatory
// A tree without components must not compile.
#include <unikv/tree/radix_tree.hpp>

int main() {
#ifdef UNIKV_COMPILE_FAIL_CONTROL
    unikv::RadixTree<unikv::Full> tree{unikv::TreeConfig{}};
#else
    unikv::RadixTree<> tree{unikv::TreeConfig{}};
#endif
}

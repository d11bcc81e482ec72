// expect: unikv: a tree-core policy tag's impl<Full> is not a tree core; make impl<Cs\.\.\.> name a type that models TreeCoreModel
// A tag whose impl names something that is not a tree core is rejected by the tag check, not deep inside a cache.
#include <unikv/tree/radix_tree.hpp>

#include <vector>

#ifdef UNIKV_COMPILE_FAIL_CONTROL
struct MyCore {
    template <class... Cs>
    using impl = unikv::RadixTree<Cs...>;
};
#else
// The tag names a container, not a tree.
struct MyCore {
    template <class... Cs>
    using impl = std::vector<int>;
};
#endif
static_assert(unikv::check_tree_core_policy<MyCore>());
int main() {}

// expect: unikv: a tree-core policy tag names its tree through a nested `template <class\.\.\. Cs> using impl = \.\.\.`
// A composed type names its tree by a core tag; a tag with no nested impl cannot give one.
#include <unikv/tree/radix_tree.hpp>

#ifdef UNIKV_COMPILE_FAIL_CONTROL
struct MyCore {
    template <class... Cs>
    using impl = unikv::RadixTree<Cs...>;
};
#else
// Names the tree directly instead of through `impl`.
struct MyCore {
    using tree = unikv::RadixTree<unikv::Full>;
};
#endif
using Tree = unikv::tree_core_t<MyCore, unikv::ComponentMask::of(unikv::Component::full)>;
static_assert(sizeof(Tree) > 0);
int main() {}

// expect: unikv: a tree-core policy tag's impl<Cs\.\.\.> must hold exactly the components it is given
// The tree a composed type derives from its layout must have the layout's components: a tag that ignores the
// components it is given would give a Full+Swa layout a Full-only tree.
#include <unikv/tree/radix_tree.hpp>

#ifdef UNIKV_COMPILE_FAIL_CONTROL
struct MyCore {
    template <class... Cs>
    using impl = unikv::RadixTree<Cs...>;
};
#else
// Always a FULL-only tree, whatever the layout holds.
struct MyCore {
    template <class... Cs>
    using impl = unikv::RadixTree<unikv::Full>;
};
#endif
using Tree = unikv::tree_core_t<MyCore, unikv::ComponentMask::of(unikv::Component::full).with(unikv::Component::swa)>;
static_assert(sizeof(Tree) > 0);
int main() {}

// expect: unikv: Swa and Mamba components attach to FULL pages, so the tree needs Full
// A tree derived from a component mask without Full (a layout with no FULL pool) is the component-set rule's
// error, reported once.
#include <unikv/tree/radix_tree.hpp>

#ifdef UNIKV_COMPILE_FAIL_CONTROL
constexpr auto mask = unikv::ComponentMask::of(unikv::Component::full).with(unikv::Component::swa);
#else
constexpr auto mask = unikv::ComponentMask::of(unikv::Component::swa);
#endif
using Tree = unikv::tree_core_t<unikv::RadixTreeCore, mask>;
static_assert(sizeof(Tree) > 0);
int main() {}

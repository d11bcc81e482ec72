// expect: unikv: tree core needs `PrefixPeek peek_prefix\(TokenKey\) const`
// A tree core a router cannot ask without changing it (no const prefix query) is named by the peek requirement.
#include <unikv/tree/reference_tree.hpp>

#ifdef UNIKV_COMPILE_FAIL_CONTROL
static_assert(unikv::check_tree_core<unikv::ReferenceTree<unikv::Full, unikv::Mamba>>());
#else
// Everything a tree core needs except the const prefix query.
struct NoPeek : unikv::ReferenceTree<unikv::Full, unikv::Mamba> {
    using ReferenceTree::ReferenceTree;
    unikv::PrefixPeek peek_prefix(unikv::TokenKey) const = delete;  // hides the base member
};
static_assert(unikv::check_tree_core<NoPeek>());
#endif
int main() {}

// expect: unikv: a tree core is an owner: nothrow-movable and not copyable
// A tree core owns its nodes and hands out receipts that name them: a copy would let two owners release one lock.
#include <unikv/tree/reference_tree.hpp>

#ifdef UNIKV_COMPILE_FAIL_CONTROL
static_assert(unikv::check_tree_core<unikv::ReferenceTree<unikv::Full>>());
#else
// A wrapper that adds a copy constructor to an otherwise complete core.
struct CopyableCore : unikv::ReferenceTree<unikv::Full> {
    using ReferenceTree::ReferenceTree;
    CopyableCore(CopyableCore&&) noexcept = default;
    CopyableCore(const CopyableCore& other) : ReferenceTree(other.config()) {}
};
static_assert(unikv::check_tree_core<CopyableCore>());
#endif
int main() {}

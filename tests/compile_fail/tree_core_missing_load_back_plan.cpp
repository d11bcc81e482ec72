// expect: unikv: tree core needs `std::span<const LoadBackStep> load_back_plan\(NodeRef\)`
// A tree core that lacks one requirement is named by the static_assert for that requirement.
#include <unikv/tree/radix_tree.hpp>

#ifdef UNIKV_COMPILE_FAIL_CONTROL
static_assert(unikv::check_tree_core<unikv::RadixTree<unikv::Full, unikv::Swa>>());
#else
// Everything a tree core needs except the load-back plan.
struct NoLoadBackPlan : unikv::RadixTree<unikv::Full, unikv::Swa> {
    using RadixTree::RadixTree;
    void load_back_plan(unikv::NodeRef) = delete;
};
static_assert(unikv::check_tree_core<NoLoadBackPlan>());
#endif
int main() {}

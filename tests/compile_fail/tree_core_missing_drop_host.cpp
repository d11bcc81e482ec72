// expect: unikv: tree core needs .*`EvictResult drop_host\(NodeRef, Component, HostDrop\)`
// A tree core without drop_host (a failed write-through's undo, a stored copy let go) is named by the host-values
// requirement.
#include <unikv/tree/radix_tree.hpp>

#ifdef UNIKV_COMPILE_FAIL_CONTROL
static_assert(unikv::check_tree_core<unikv::RadixTree<unikv::Full, unikv::Swa>>());
#else
// Everything a tree core needs except drop_host.
struct NoDropHost : unikv::RadixTree<unikv::Full, unikv::Swa> {
    using RadixTree::RadixTree;
    unikv::EvictResult drop_host(unikv::NodeRef, unikv::Component, unikv::HostDrop) = delete;
};
static_assert(unikv::check_tree_core<NoDropHost>());
#endif
int main() {}

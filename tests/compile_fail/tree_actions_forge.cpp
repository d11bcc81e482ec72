// expect: ActionsBuilder\(unikv::TreeActions&\).*is private within this context
// Only the tree cores append to an action list: the list a cache executes is exactly what the tree decided.
#include <unikv/tree/radix_tree.hpp>

int main() {
    unikv::RadixTree<unikv::Full> tree{unikv::TreeConfig{}};
    auto result = tree.evict(unikv::Component::full, 1);
#ifndef UNIKV_COMPILE_FAIL_CONTROL
    unikv::detail::ActionsBuilder forged{result.actions};
    forged.free_pages({});
#endif
    result.actions.mark_executed();
}

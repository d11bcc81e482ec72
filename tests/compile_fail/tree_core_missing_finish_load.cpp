// expect: unikv: tree core needs `begin_load\(NodeRef, uint64_t, const LoadedValue&\)`, `LoadLeftovers finish_load\(uint64_t, bool, MoveSwa&&\)` and `loads_in_flight\(\)`
// A tree core that cannot finish the loads it records is named by the load-records requirement.
#include <unikv/tree/radix_tree.hpp>

#ifdef UNIKV_COMPILE_FAIL_CONTROL
static_assert(unikv::check_tree_core<unikv::RadixTree<unikv::Full, unikv::Swa>>());
#else
// Everything a tree core needs except finishing a recorded load.
struct NoFinishLoad : unikv::RadixTree<unikv::Full, unikv::Swa> {
    using RadixTree::RadixTree;
    void finish_load(std::uint64_t, bool) = delete;  // hides the base template
};
static_assert(unikv::check_tree_core<NoFinishLoad>());
#endif
int main() {}

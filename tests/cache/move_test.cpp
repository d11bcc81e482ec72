// The allocator, the tree and the executor moved as a whole into a new object while copies are still queued on
// the manual backend (not run), then used: the run continues through the moved-to objects, the queued copies
// land where the moved-to allocator expects them, and every row checks out (see executor_driver.hpp).

#include "executor_driver.hpp"

using namespace cache_test;

TEST_CASE_TEMPLATE("a stack moved with copies in flight keeps working and its rows check out", L, SwaFullLayout,
                   TriPoolLayout, EagerMambaFullLayout) {
    Driver<L> d(77, 128, 5);  // 5% of the operations move the stack
    d.run(3000);
    CHECK(d.moves_in_flight() > 0);  // some moves really had copies queued
    CHECK(d.executed(ActionKind::free_pages) > 0);
}

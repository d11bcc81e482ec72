// Dropped results are detected: an action list destroyed unexecuted, a receipt destroyed while holding locks.
// A counting handler replaces the default (which aborts in debug builds) so the test process survives.

#include <doctest/doctest.h>

#include "drop_counter.hpp"
#include "tree_test_support.hpp"

using namespace unikv;
using namespace unikv::test;

TEST_CASE_TEMPLATE("an unexecuted action list is reported when it is destroyed", Core, RadixTreeCore,
                   ReferenceTreeCore) {
    const DropCounter drops;
    typename Core::template impl<Full> tree({.page_size = {1}});
    auto a = tree.insert({run(1, 4)}, {.pages = vpages(1, 4)});
    const std::uint64_t before = dropped_count();
    { auto dup = tree.insert({run(1, 4)}, {.pages = vpages(9, 4)}); }  // duplicates never freed
    CHECK(drops[Dropped::actions] == 1);
    CHECK(dropped_count() == before + 1);
    {
        auto ev = tree.evict(Component::full, 4);
        TreeActions moved = std::move(ev.actions);  // moving hands the duty over, it does not report
        CHECK(drops[Dropped::actions] == 1);
        moved.mark_executed();
    }
    CHECK(drops[Dropped::actions] == 1);
    { auto nothing = tree.evict(Component::full, 4); }  // empty lists need no marking
    CHECK(drops[Dropped::actions] == 1);
}

TEST_CASE_TEMPLATE("a receipt destroyed while holding locks is reported", Core, RadixTreeCore, ReferenceTreeCore) {
    const DropCounter drops;
    typename Core::template impl<Full> tree({.page_size = {1}});
    auto a = tree.insert({run(1, 4)}, {.pages = vpages(1, 4)});
    { LockReceipt r = tree.lock(a.node); }
    CHECK(drops[Dropped::receipt] == 1);
    LockReceipt kept = tree.lock(a.node);
    LockReceipt other = tree.lock(a.node);
    other = std::move(kept);  // overwriting a receipt that holds locks drops them
    CHECK(drops[Dropped::receipt] == 2);
    tree.unlock(std::move(other));
    CHECK(drops[Dropped::receipt] == 2);
}

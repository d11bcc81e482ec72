// Dropped results are detected: an action list destroyed undrained, a receipt destroyed while holding locks.
// A counting handler replaces the default (which aborts in debug builds) so the test process survives.

#include <doctest/doctest.h>

#include <atomic>

#include "tree_test_support.hpp"

using namespace unikv;
using namespace unikv::test;

namespace {
std::atomic<int> dropped_actions{0};
std::atomic<int> dropped_receipts{0};

void count_drop(Dropped what) noexcept { (what == Dropped::actions ? dropped_actions : dropped_receipts)++; }

struct CountingHandler {
    DroppedHandler previous = set_dropped_handler(&count_drop);
    CountingHandler() {
        dropped_actions = 0;
        dropped_receipts = 0;
    }
    ~CountingHandler() { set_dropped_handler(previous); }
};
}  // namespace

TEST_CASE_TEMPLATE("an undrained action list is reported when it is destroyed", Core, RadixTreeCore,
                   ReferenceTreeCore) {
    CountingHandler handler;
    typename Core::template impl<Full> tree({.page_size = {1}});
    auto a = tree.insert({run(1, 4)}, {.pages = vpages(1, 4)});
    const std::uint64_t before = dropped_count();
    { auto dup = tree.insert({run(1, 4)}, {.pages = vpages(9, 4)}); }  // duplicates never freed
    CHECK(dropped_actions == 1);
    CHECK(dropped_count() == before + 1);
    {
        auto ev = tree.evict(Component::full, 4);
        TreeActions moved = std::move(ev.actions);  // moving hands the duty over, it does not report
        CHECK(dropped_actions == 1);
        moved.mark_drained();
    }
    CHECK(dropped_actions == 1);
    { auto nothing = tree.evict(Component::full, 4); }  // empty lists need no draining
    CHECK(dropped_actions == 1);
}

TEST_CASE_TEMPLATE("a receipt destroyed while holding locks is reported", Core, RadixTreeCore, ReferenceTreeCore) {
    CountingHandler handler;
    typename Core::template impl<Full> tree({.page_size = {1}});
    auto a = tree.insert({run(1, 4)}, {.pages = vpages(1, 4)});
    { LockReceipt r = tree.lock(a.node); }
    CHECK(dropped_receipts == 1);
    LockReceipt kept = tree.lock(a.node);
    LockReceipt other = tree.lock(a.node);
    other = std::move(kept);  // overwriting a receipt that holds locks drops them
    CHECK(dropped_receipts == 2);
    tree.unlock(std::move(other));
    CHECK(dropped_receipts == 2);
}

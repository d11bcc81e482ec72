// Composition that survives a move: the allocator holds its backend by `backend_ref`, and move gates are holds
// on a heap state, so moving the allocator, or whoever installed a gate, with copies still queued leaves every
// gate, copy and row where it was.

#include "alloc_support.hpp"

#include <memory>
#include <type_traits>
#include <utility>

using namespace alloc_test;

namespace {

using L = SwaFullLayout;
using A = UnifiedAllocator<L, HostBackend>;

// Stands for the coming transfer controller: it closes the host-transfer gate while it has work in flight.
struct Installer {
    MoveGateHold gate;
    int in_flight = 0;
};

}  // namespace

static_assert(std::is_trivially_copyable_v<backend_ref<HostBackend>>);
static_assert(std::is_nothrow_move_constructible_v<A> && std::is_nothrow_move_assignable_v<A>);
static_assert(!std::is_copy_constructible_v<MoveGateHold> && std::is_nothrow_move_constructible_v<MoveGateHold>);

TEST_CASE("moving the allocator and the gate holder with compaction copies queued keeps gates and rows") {
    Fixture<L> f(small_config(64 * 128));
    auto pages = f.alloc_kv(12);
    f.alloc.free(slice(pages, 0, 4));  // holes at the bottom of both pools
    const FlushResult first = f.alloc.flush(FlushMode::urgent);
    REQUIRE(first.pages_moved > 0);
    REQUIRE(f.backend.queued(f.stream) > 0);  // manual mode: the compaction copies wait for the test
    const std::vector<VirtualPage> kept = slice(pages, 4, 8);

    Installer installer;
    installer.gate = f.alloc.install_move_gate(MoveGateSlot::host_transfer);
    installer.in_flight = 1;
    REQUIRE(f.alloc.moves_blocked());

    A moved(std::move(f.alloc));               // the allocator moves, copies still queued
    Installer holder(std::move(installer));    // and so does the gate's installer
    CHECK_FALSE(installer.gate.holding());
    CHECK(holder.gate.holding());
    CHECK(moved.moves_blocked());
    CHECK(moved.moves_blocked(Component::swa));
    moved.free(slice(kept, 0, 2));  // something to compact, which the gate must keep in place
    const BackendCounters before = f.backend.counters();
    const FlushResult gated = moved.flush(FlushMode::urgent);
    CHECK(gated.pages_moved == 0);
    CHECK(gated.blocked);
    CHECK(same_counters(before, f.backend.counters()));

    f.alloc = std::move(moved);  // a second move, by assignment, back into the fixture
    CHECK(f.alloc.moves_blocked());
    REQUIRE(f.drain());  // the copies queued before both moves run now, into the same arena
    const std::vector<VirtualPage> live = slice(kept, 2, 6);
    CHECK(f.kv_holds(live));

    holder.gate.release();  // released through the moved-to holder
    holder.in_flight = 0;
    CHECK_FALSE(f.alloc.moves_blocked());
    CHECK(f.alloc.flush(FlushMode::urgent).pages_moved > 0);
    REQUIRE(f.drain());
    CHECK(f.kv_holds(live));
    CHECK(f.broken().empty());
}

TEST_CASE("holds of one slot compose, and each slot is independent") {
    Fixture<L> f(small_config(64 * 128));
    MoveGateHold a = f.alloc.install_move_gate(MoveGateSlot::host_transfer);
    MoveGateHold b = f.alloc.install_move_gate(MoveGateSlot::host_transfer);
    MoveGateHold pd = f.alloc.install_move_gate(MoveGateSlot::disagg);
    CHECK(pd.slot() == MoveGateSlot::disagg);
    a.release();
    CHECK(f.alloc.moves_blocked());  // b and pd still hold
    pd = MoveGateHold{};             // assigning over a hold releases it
    CHECK(f.alloc.moves_blocked());
    b = std::move(a);  // a holds nothing: b's hold is released and b takes nothing
    CHECK_FALSE(b.holding());
    CHECK_FALSE(f.alloc.moves_blocked());
    a.release();  // releasing an empty hold is a no-op
    CHECK_FALSE(f.alloc.moves_blocked());
}

TEST_CASE("a hold outliving a moved-from allocator, or the allocator itself, is harmless") {
    Fixture<L> f(small_config(64 * 128));
    auto pages = f.alloc_kv(6);
    MoveGateHold hold = f.alloc.install_move_gate(MoveGateSlot::disagg);
    {
        auto first = std::make_unique<A>(std::move(f.alloc));
        f.alloc = std::move(*first);
        first.reset();  // the moved-from allocator is gone; the hold's state lives with f.alloc
        CHECK(f.alloc.moves_blocked());
    }
    f.alloc.free(slice(pages, 0, 2));
    CHECK(f.alloc.flush(FlushMode::urgent).pages_moved == 0);
    hold.release();
    CHECK_FALSE(f.alloc.moves_blocked());
    CHECK(f.alloc.flush(FlushMode::urgent).pages_moved > 0);
    REQUIRE(f.drain());
    CHECK(f.kv_holds(slice(pages, 2, 4)));
    CHECK(f.broken().empty());

    // The allocator goes first: the outstanding holds keep the gate state until the last one lets go.
    auto gone = std::make_unique<A>(f.backend, small_config(64 * 128), f.stream);
    MoveGateHold late_a = gone->install_move_gate(MoveGateSlot::host_transfer);
    MoveGateHold late_b = gone->install_move_gate(MoveGateSlot::disagg);
    gone.reset();
    late_a.release();
    MoveGateHold moved_late = std::move(late_b);
    CHECK(moved_late.holding());
}  // moved_late frees the orphaned state (the sanitizer build checks it is freed once, and read only while alive)

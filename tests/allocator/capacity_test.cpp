// Capacity: available and schedulable sizes, their memo (keyed on the chain epoch and on which neighbours may
// move), and the agreement between can_reserve and what ensure_capacity achieves.

#include "alloc_support.hpp"

#include <functional>

using namespace alloc_test;

TEST_CASE("schedulable size credits a movable lazy neighbour's holes, and a gate flip changes it without a write") {
    Fixture<SwaFullLayout> f(small_config(64 * 128));
    auto pages = f.alloc_kv(10);
    f.alloc.free_swa(std::span(pages).first(4));  // four flushable SWA holes below the SWA survivors
    const std::int64_t available = f.alloc.available_size(Component::full);
    const std::int64_t schedulable = f.alloc.schedulable_available_size(Component::full);
    CHECK(schedulable == available + 4);
    CHECK(f.alloc.schedulable_available_size(Component::swa) == f.alloc.available_size(Component::swa));
    const std::uint64_t epoch = f.alloc.epoch();
    MoveGateHold closed = f.alloc.install_move_gate(MoveGateSlot::host_transfer);
    CHECK(f.alloc.schedulable_available_size(Component::full) == available);
    CHECK(f.alloc.epoch() == epoch);
    CHECK(f.broken().empty());  // the memo stays coherent across the flip
    closed.release();
    CHECK(f.alloc.schedulable_available_size(Component::full) == schedulable);
    // A pending SWA reservation blocks SWA moves: no credit either.
    ReserveResult r = f.alloc.alloc_physical(Component::swa, 1);
    REQUIRE(r);
    CHECK(f.alloc.schedulable_available_size(Component::full) == f.alloc.available_size(Component::full));
    f.alloc.cancel(std::move(r.reservation));
    // The joint size is what a composite alloc can take; ensure_capacity realizes the schedulable one.
    const std::int64_t joint = f.alloc.available_size();
    const std::int64_t joint_sched = f.alloc.schedulable_available_size();
    CHECK(joint_sched >= joint);
    CHECK(f.alloc.can_reserve({.full = joint_sched, .swa = joint_sched}));
    CHECK_FALSE(f.alloc.can_reserve({.full = joint_sched + 1, .swa = joint_sched + 1}));
    REQUIRE(f.alloc.ensure_capacity({.full = joint_sched, .swa = joint_sched}));
    CHECK(f.alloc.available_size() == joint_sched);
    REQUIRE(f.drain());
    CHECK(f.kv_holds(std::span(pages).subspan(4)));
    CHECK(f.broken().empty());
}

TEST_CASE("capacity queries are memoized on the epoch: a hit does no work, a change recomputes") {
    Fixture<TriPoolLayout> f(small_config(64 * 128));
    auto pages = f.alloc_kv(6);
    const std::int64_t a = f.alloc.available_size();
    const std::uint64_t e = f.alloc.epoch();
    CHECK(f.alloc.available_size() == a);
    CHECK(f.alloc.epoch() == e);
    CHECK(f.broken().empty());
    std::vector<VirtualPage> one(1);
    REQUIRE(f.alloc.alloc(one));
    CHECK(f.alloc.epoch() > e);
    CHECK(f.alloc.available_size() == a - 1);
    // The float's schedulable size credits both ends' flushable holes; the ends are not credited by the float.
    auto states = f.alloc_states(6);
    f.alloc.free_state(std::span(states).first(4));
    CHECK(f.alloc.schedulable_available_size(Component::swa) >= f.alloc.available_size(Component::swa));
    CHECK(f.alloc.schedulable_available_size(Component::mamba) == f.alloc.available_size(Component::mamba));
    CHECK(f.broken().empty());
}

namespace {

// Builds the same fragmented state again and again, so each demand is checked on a fresh allocator.
template <class L>
void build_fragmented(Fixture<L>& f) {
    auto pages = f.alloc_kv(12);
    std::vector<VirtualPage> some;
    for (std::size_t i = 0; i < pages.size(); i += 3) some.push_back(pages[i]);
    f.alloc.free(some);
    if constexpr (Fixture<L>::Alloc::has_swa) {
        std::vector<VirtualPage> tomb;
        for (std::size_t i = 1; i < pages.size(); i += 3) tomb.push_back(pages[i]);
        f.alloc.free_swa(tomb);
    }
    if constexpr (Fixture<L>::Alloc::has_mamba) {
        auto states = f.alloc_states(10);
        std::vector<StateId> odd;
        for (std::size_t i = 0; i < states.size(); i += 2) odd.push_back(states[i]);
        f.alloc.free_state(odd);
    }
}

}  // namespace

TEST_CASE_TEMPLATE("can_reserve says yes exactly when ensure_capacity makes the demand fit", L, FullLayout,
                   SwaFullLayout, MambaFullLayout, TriPoolLayout) {
    constexpr bool has_swa = Fixture<L>::Alloc::has_swa;
    constexpr bool has_mamba = Fixture<L>::Alloc::has_mamba;
    int agreed = 0;
    int refused = 0;
    for (std::int64_t full = 0; full <= 40; full += 4) {
        for (std::int64_t other = 0; other <= 40; other += 5) {
            Fixture<L> f(small_config(48 * 128));
            build_fragmented(f);
            CapacityDemand d{.full = full, .swa = has_swa ? other : 0, .mamba = has_mamba ? other : 0};
            const bool promised = f.alloc.can_reserve(d);
            const AllocResult r = f.alloc.ensure_capacity(d);
            CAPTURE(full);
            CAPTURE(other);
            CHECK(promised == static_cast<bool>(r));
            if (r) {
                if (d.full > 0 || d.swa > 0) {
                    std::vector<VirtualPage> pages(static_cast<std::size_t>(std::max(d.full, d.swa)));
                    if constexpr (has_swa) {
                        if (d.full == d.swa) CHECK(f.alloc.alloc(pages));
                    }
                }
                ++agreed;
            } else {
                ++refused;
            }
            REQUIRE(f.drain());
            CHECK(f.broken().empty());
        }
    }
    CHECK(agreed > 0);
    CHECK(refused > 0);
}

TEST_CASE("a FULL-only layout grows down to the sink floor, and its sizes count every usable page") {
    Fixture<FullLayout> f(small_config(64 * 128));
    const SubPoolSpec& full = f.alloc.spec()[Component::full];
    const std::int64_t usable = full.usable_pages();
    REQUIRE(usable > 8);
    CHECK(f.alloc.available_size() == usable);
    CHECK(f.alloc.available_size(Component::full) == usable);
    CHECK(f.alloc.schedulable_available_size() == usable);  // no neighbour to drain
    CHECK(f.alloc.can_reserve({.full = usable}));
    CHECK_FALSE(f.alloc.can_reserve({.full = usable + 1}));
    auto pages = f.alloc_kv(static_cast<std::int32_t>(usable));
    CHECK(f.alloc.byte_span(Component::full) == std::pair{f.alloc.spec().sink_floor_bytes, f.alloc.region().size});
    CHECK(f.alloc.available_size() == 0);
    std::vector<VirtualPage> one(1);
    CHECK_FALSE(f.alloc.alloc(one));
    CHECK(f.broken().empty());
    // Every third page freed: the holes are the room, and an urgent flush packs the survivors to the top.
    std::vector<VirtualPage> freed;
    std::vector<VirtualPage> kept;
    for (std::size_t i = 0; i < pages.size(); ++i) (i % 3 == 0 ? freed : kept).push_back(pages[i]);
    f.alloc.free(freed);
    CHECK(f.alloc.available_size() == static_cast<std::int64_t>(freed.size()));
    CHECK(f.alloc.schedulable_available_size() == static_cast<std::int64_t>(freed.size()));
    CHECK(f.alloc.flush(FlushMode::urgent).pages_moved > 0);
    REQUIRE(f.drain());
    CHECK(f.kv_holds(kept));
    CHECK(f.alloc.hole_pages(Component::full) == 0);
    CHECK(f.alloc.byte_span(Component::full).first ==
          f.alloc.region().size - kept.size() * full.page_bytes);
    REQUIRE(f.alloc.ensure_capacity({.full = static_cast<std::int64_t>(freed.size())}));
    auto again = f.alloc_kv(static_cast<std::int32_t>(freed.size()), 1);
    CHECK(f.kv_holds(kept));
    CHECK(f.kv_holds(again, 1));
    CHECK(f.broken().empty());
    f.alloc.free(kept);
    f.alloc.free(again);
    (void)f.alloc.flush(FlushMode::urgent);
    CHECK(f.alloc.available_size() == usable);
    CHECK(f.alloc.byte_span(Component::full).first == f.alloc.region().size);
    CHECK(f.broken().empty());
}

// A demand is written with named fields and read per component.
static_assert(CapacityDemand{.full = 3, .mamba = 2}[Component::mamba] == 2);
static_assert(CapacityDemand::single(Component::swa, 4)[Component::swa] == 4 &&
              CapacityDemand::single(Component::swa, 4)[Component::full] == 0);

TEST_CASE("a demand that is negative or names a pool the layout lacks is refused, naming the call and the pool") {
    Fixture<MambaFullLayout> f(small_config(64 * 128));
    const auto what = [](auto&& call) -> std::string {
        try {
            call();
        } catch (const unikv::logic_error& e) {
            return e.what();
        }
        return "no logic_error";
    };
    const std::uint64_t epoch = f.alloc.epoch();
    CHECK(what([&] { (void)f.alloc.can_reserve({.swa = 1}); }) ==
          "unikv: can_reserve: demand {full 0, swa 1, mamba 0}: 1 pages of a pool the layout lacks: swa");
    CHECK(what([&] { (void)f.alloc.ensure_capacity({.full = 2, .mamba = -1}); }) ==
          "unikv: ensure_capacity: demand {full 2, swa 0, mamba -1}: -1 pages is negative for mamba");
    CHECK(f.alloc.epoch() == epoch);
    CHECK(f.alloc.can_reserve({.full = 2, .mamba = 1}));
    CHECK(f.broken().empty());
}

TEST_CASE("page bounds cap a pool whatever the arena has free; a shortfall past one names the pool's excess") {
    Fixture<TriPoolLayout> f(small_config(64 * 128));
    CHECK_THROWS_AS(f.alloc.bound_pages({.full = -1}), logic_error);
    auto pages = f.alloc_kv(6);
    CHECK_THROWS_AS(f.alloc.bound_pages({.full = 5}), logic_error);  // below the 6 it holds
    CHECK_THROWS_AS(f.alloc.bound_pages({.full = 8, .swa = 64}), logic_error);  // more than the arena together
    f.alloc.bound_pages({.full = 8, .swa = 0, .mamba = 2});            // SWA unbounded
    CHECK(f.alloc.available_size(Component::full) == 2);
    CHECK(f.alloc.available_size(Component::mamba) == 2);
    CHECK(f.alloc.available_size(Component::swa) > 8);
    CHECK(f.alloc.can_reserve({.full = 2}));
    CHECK_FALSE(f.alloc.can_reserve({.full = 3}));
    std::vector<VirtualPage> three(3);
    const AllocResult r = f.alloc.alloc(three);
    CHECK(r.shortfall == Shortfall::partition);
    CHECK(r.missing.component == Component::full);
    CHECK(r.missing.count == 1);
    CHECK(f.alloc.live_pages(Component::full) == 6);  // nothing allocated on failure
    auto states = f.alloc_states(2);
    std::vector<StateId> one(1);
    const AllocResult s = f.alloc.alloc_state(one);
    CHECK(s.shortfall == Shortfall::partition);
    CHECK(s.missing.component == Component::mamba);
    f.alloc.free_state(std::span(states).first(1));
    REQUIRE(f.alloc.alloc_state(one));  // a free under the bound gives the room back
    f.alloc.bound_pages({});            // unbounded again
    CHECK(f.alloc.can_reserve({.full = 3}));
    REQUIRE(f.drain());
    CHECK(f.kv_holds(pages));
    CHECK(f.broken().empty());
}

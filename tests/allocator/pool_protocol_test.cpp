// The pool protocol is the real contract: a policy written outside the library, whose impl offers exactly
// what `check_pool_impl` asks for, runs in a layout next to the shipped ones, with rows that follow their
// virtual ids through frees, the shortfall ladder and flushes. Its own answer to the capacity query
// (`project`) is what the allocator's capacity answers and allocations follow.

#include "alloc_support.hpp"

using namespace alloc_test;

namespace {

// Free pages the custom pool keeps beyond its frontier.
constexpr std::int64_t guard_pages = 2;

// An end pool that packs only in an urgent flush (opportunistic flushes do nothing) and keeps a guard of free
// pages beyond its frontier. Built on the shared end span (`detail::end_pool`), it adds what the protocol
// needs beyond that: releases, flushes, idle, flushable and its own capacity answer.
template <Grow G>
struct UrgentOnlyEndPool {
    static constexpr Placement placement = Placement::end;
    static constexpr Compaction compaction = Compaction::lazy;
    static constexpr Grow grow = G;

    template <class B>
    class impl : public detail::end_pool<G, B> {
        using base = detail::end_pool<G, B>;

    public:
        using base::base;
        void release_page(std::int32_t p) { this->core_.add_hole(p); }
        void after_release(detail::move_context<B>&) noexcept {}
        [[nodiscard]] std::int32_t flushable() const noexcept {
            return this->core_.reserved_pages() == 0 ? this->core_.hole_pages() : 0;
        }
        [[nodiscard]] bool idle() const noexcept { return this->core_.hole_pages() == 0; }
        // It claims the guard as if it were pages, so no neighbour grows into it.
        [[nodiscard]] std::optional<ByteBand> project(ByteBand room, std::int64_t pages, Projection how) const noexcept {
            return base::project(room, pages + guard_pages, how);
        }
        FlushResult flush(detail::move_context<B>& ctx, FlushMode mode, bool blocked, std::size_t) {
            FlushResult result;
            if (mode != FlushMode::urgent || idle()) return result;
            result.blocked = blocked;
            if (blocked) return result;
            const std::size_t pages = ctx.pages_moved;
            const std::size_t bytes = ctx.bytes_moved;
            bool stopped = false;
            // Urgent: the forward is settled first, so every moved source is reusable at once.
            (void)this->pack(ctx, true, 0, stopped, [](std::int32_t) { UNIKV_ASSERT(false); });
            result.pages_moved = ctx.pages_moved - pages;
            result.bytes_moved = ctx.bytes_moved - bytes;
            return result;
        }
    };
};

static_assert(is_pool_policy_v<UrgentOnlyEndPool<Grow::up>, HostBackend>);
static_assert(detail::check_pool_impl<UrgentOnlyEndPool<Grow::up>, HostBackend>());
static_assert(detail::check_pool_impl<UrgentOnlyEndPool<Grow::down>, HostBackend>());

using UrgentSwaFull = TwoEnd<Pool<Component::swa, UrgentOnlyEndPool<Grow::up>, PhysicalReservations>,
                             Pool<Component::full, LazyEndPool<Grow::down>>>;
using UrgentFull = FullOnly<Pool<Component::full, UrgentOnlyEndPool<Grow::down>>>;

}  // namespace

TEST_CASE_TEMPLATE("a pool policy written outside the library runs in a layout and keeps its rows", L, UrgentSwaFull,
                   UrgentFull) {
    using A = typename Fixture<L>::Alloc;
    constexpr Component custom = A::has_swa ? Component::swa : Component::full;
    Fixture<L> f(small_config(32 * 128));
    auto pages = f.alloc_kv(static_cast<std::int32_t>(f.alloc.available_size()));
    CHECK(f.alloc.available_size() == 0);
    // Filled as far as the guard lets it: the free bytes between the ends (or above the sink floor) hold the
    // guard, and less than one more composite page beside it; one more page fails for room, rows intact.
    const std::size_t page_bytes = f.alloc.spec()[custom].page_bytes;
    const std::size_t below = A::has_swa ? f.alloc.byte_span(Component::swa).second : f.alloc.spec().sink_floor_bytes;
    const std::size_t gap = f.alloc.byte_span(Component::full).first - below;
    CHECK(gap >= guard_pages * page_bytes);
    CHECK(gap < guard_pages * page_bytes + (A::has_swa ? 2 : 1) * page_bytes);
    std::vector<VirtualPage> one(1);
    const AllocResult refused = f.alloc.alloc(one);
    CHECK(refused.shortfall == Shortfall::room);
    CHECK_FALSE(f.alloc.can_reserve({.full = 1, .swa = A::has_swa ? 1 : 0}));
    CHECK(f.kv_holds(pages));
    std::vector<VirtualPage> freed;
    std::vector<VirtualPage> kept;
    for (std::size_t i = 0; i < pages.size(); ++i) (i % 2 == 0 ? freed : kept).push_back(pages[i]);
    std::size_t more = freed.size();
    if constexpr (A::has_swa) {
        // Tombstones leave holes in the custom up end only: FULL grows into them once an urgent flush of the
        // custom pool packs its survivors, and each new page needs an SWA page too.
        f.alloc.free_swa(freed);
        more = freed.size() / 2;
    } else {
        f.alloc.free(freed);
    }
    CHECK(f.alloc.flush(FlushMode::opportunistic).pages_moved == 0);  // the policy ignores these
    CHECK(f.alloc.hole_pages(custom) == static_cast<std::int32_t>(freed.size()));
    CHECK(f.broken().empty());
    REQUIRE(f.alloc.can_reserve({.full = static_cast<std::int64_t>(more), .swa = A::has_swa ? static_cast<std::int64_t>(more) : 0}));
    auto again = f.alloc_kv(static_cast<std::int32_t>(more), 1);
    REQUIRE(f.drain());
    CHECK(f.kv_holds(kept));
    CHECK(f.kv_holds(again, 1));
    if constexpr (A::has_swa) CHECK(f.pages_hold(Component::full, freed));
    // Interleaved frees, then an urgent flush: the custom pool packs, and the survivors keep their rows.
    std::vector<VirtualPage> dropped;
    std::vector<VirtualPage> survivors;
    for (std::size_t i = 0; i < kept.size(); ++i) (i % 2 == 0 ? dropped : survivors).push_back(kept[i]);
    f.alloc.free(dropped);
    CHECK(f.alloc.flush(FlushMode::urgent).pages_moved > 0);
    REQUIRE(f.drain());
    CHECK(f.alloc.hole_pages(custom) == 0);
    CHECK(f.kv_holds(survivors));
    CHECK(f.kv_holds(again, 1));
    CHECK(f.broken().empty());
}

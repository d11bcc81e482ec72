// The allocator calls that executing the tree's actions needs: `alloc_full` (the destination of a FULL
// load-back), `transfer_swa` (the tree's `recover_swa_locked_full`) and shortfalls that say how many pages of
// which pool are missing. Rows are written through translation before each call and read back after it.

#include "alloc_support.hpp"

using namespace alloc_test;

namespace {

/// The physical SWA page under virtual page `v` (0, the sink, for a tombstone).
template <class F>
std::int32_t swa_page_of(const F& f, VirtualPage v) {
    return f.physical_pages(Component::swa, std::span(&v, 1))[0].value();
}

/// True when the SWA rows of `kept[i]` read the markers written under `written[i]` at `version`.
template <class F>
bool swa_rows_moved(const F& f, std::span<const VirtualPage> kept, std::span<const VirtualPage> written,
                    std::uint32_t version) {
    for (std::size_t i = 0; i < kept.size(); ++i) {
        for (std::int32_t r = 0; r < f.page_size(); ++r) {
            const std::int32_t row = f.physical_row(Component::swa, kept[i].value() * f.page_size() + r);
            if (row == 0 || f.read_physical_row(Component::swa, row) != marker(Component::swa, written[i].value(), r, version)) {
                return false;
            }
        }
    }
    return true;
}

/// Publishes the tables, runs the upload, and compares the SWA mirror with the host table.
template <class F>
bool mirror_follows(F& f) {
    const DeviceTables d = f.alloc.device_tables();
    return f.drain() && mirror_matches(d.swa, f.alloc.page_table(Component::swa));
}

}  // namespace

TEST_CASE_TEMPLATE("alloc_full hands out FULL pages whose SWA entries are tombstones", L, FullLayout, SwaFullLayout,
                   MambaFullLayout, TriPoolLayout, EagerSwaFullLayout, EagerMambaFullLayout) {
    using F = Fixture<L>;
    F f(small_config(arena_bytes));
    auto before = f.alloc_kv(3);
    std::vector<VirtualPage> dst(3);
    REQUIRE(f.alloc.alloc_full(dst));
    REQUIRE(f.drain());
    f.write_pages(Component::full, dst, 2);
    CHECK(f.pages_hold(Component::full, dst, 2));
    CHECK(f.kv_holds(before));
    CHECK(f.alloc.live_pages(Component::full) == 6);
    if constexpr (F::Alloc::has_swa) {
        CHECK(f.alloc.live_pages(Component::swa) == 3);
        for (VirtualPage v : dst) {
            CHECK(swa_page_of(f, v) == 0);
            for (std::int32_t r = 0; r < f.page_size(); ++r) CHECK(f.physical_row(Component::swa, v.value() * f.page_size() + r) == 0);
        }
        CHECK_THROWS_AS(f.alloc.free_swa(std::span(dst).first(1)), logic_error);  // never free a tombstone
    }
    f.alloc.free_full(dst);
    CHECK(f.alloc.live_pages(Component::full) == 3);
    CHECK(f.kv_holds(before));
    CHECK(f.broken().empty());
}

TEST_CASE_TEMPLATE("a FULL load-back lands in alloc_full pages and its SWA rows bind under the same ids", L, SwaFullLayout,
                   TriPoolLayout) {
    using F = Fixture<L>;
    F f(small_config(arena_bytes));
    Transfers t(f.backend, 16 * 128);
    auto resident = f.alloc_kv(4);
    std::vector<VirtualPage> dst(3);
    REQUIRE(f.alloc.alloc_full(dst));
    REQUIRE(f.drain());
    f.write_pages(Component::full, dst, 3);  // the FULL rows a load-back writes
    ReserveResult r = f.alloc.alloc_physical(Component::swa, 3);
    REQUIRE(r);
    f.alloc.bind_swa(dst, r.reservation);
    HostBackend::Event loaded = t.load(f.alloc.region(), r.reservation.pages(), 128, 32, f.loaded_rows(dst));
    f.alloc.set_transfer_done_event(load_key, loaded);
    t.run();
    REQUIRE(f.drain());
    CHECK(f.pages_hold(Component::swa, dst, 7));
    CHECK(f.pages_hold(Component::full, dst, 3));
    CHECK(f.kv_holds(resident));
    f.alloc.free(resident);  // holes below and above: a flush moves the loaded pages, rows follow the ids
    (void)f.alloc.flush(FlushMode::urgent);
    if constexpr (F::Alloc::has_float) (void)f.alloc.compact_holes(Side::high);
    REQUIRE(f.drain());
    CHECK(f.pages_hold(Component::swa, dst, 7));
    CHECK(f.pages_hold(Component::full, dst, 3));
    CHECK(f.broken().empty());
}

TEST_CASE_TEMPLATE("transfer_swa rebinds the incoming SWA pages under the kept ids, through flushes and float moves", L,
                   SwaFullLayout, TriPoolLayout, EagerSwaFullLayout) {
    using F = Fixture<L>;
    F f(small_config(arena_bytes));
    auto gap = f.alloc_kv(3);       // lowest SWA pages: freeing them later makes the survivors move
    auto kept = f.alloc_kv(3, 1);   // the tree's pages: FULL stays, SWA tombstoned
    auto incoming = f.alloc_kv(3);  // the request's pages: their SWA rows are the recovered ones
    f.write_pages(Component::swa, incoming, 5);
    f.alloc.free_swa(kept);
    REQUIRE(f.drain());
    std::vector<std::int32_t> moved_pages;
    for (VirtualPage v : incoming) moved_pages.push_back(swa_page_of(f, v));

    f.alloc.transfer_swa(kept, incoming);
    for (std::size_t i = 0; i < kept.size(); ++i) {
        CHECK(swa_page_of(f, kept[i]) == moved_pages[i]);  // no copy: the same physical page
        CHECK(swa_page_of(f, incoming[i]) == 0);           // a tombstone, as the action says
    }
    CHECK(swa_rows_moved(f, kept, incoming, 5));
    CHECK(f.pages_hold(Component::full, kept, 1));
    CHECK(f.alloc.live_pages(Component::swa) == 6);
    CHECK(f.broken().empty());
    CHECK(mirror_follows(f));

    f.alloc.free(incoming);  // the action's later free_pages: FULL only, the SWA entry is a tombstone
    f.alloc.free(gap);
    (void)f.alloc.flush(FlushMode::urgent);
    if constexpr (F::Alloc::has_float) {
        (void)f.alloc.compact_holes(Side::low);
        (void)f.alloc.make_room(Side::high, 4 * 128);
    }
    REQUIRE(f.drain());
    CHECK(swa_rows_moved(f, kept, incoming, 5));
    CHECK(f.pages_hold(Component::full, kept, 1));
    CHECK(f.alloc.live_pages(Component::swa) == 3);
    CHECK(f.alloc.live_pages(Component::full) == 3);
    CHECK(mirror_follows(f));
    if constexpr (!F::Alloc::has_float) CHECK(swa_page_of(f, kept[0]) != moved_pages[0]);  // it did move
    CHECK(f.broken().empty());
}

TEST_CASE_TEMPLATE("every transfer_swa precondition throws and leaves the allocator unchanged", L, SwaFullLayout,
                   TriPoolLayout, EagerSwaFullLayout) {
    using F = Fixture<L>;
    F f(small_config(arena_bytes));
    auto kept = f.alloc_kv(2, 1);
    auto incoming = f.alloc_kv(2, 2);
    auto live = f.alloc_kv(1, 3);
    f.alloc.free_swa(kept);
    REQUIRE(f.drain());
    const auto swa_v2p = std::vector<std::int32_t>(f.alloc.page_table(Component::swa).v2p().begin(),
                                                   f.alloc.page_table(Component::swa).v2p().end());
    const std::uint64_t epoch = f.alloc.epoch();
    const auto unchanged = [&] {
        CHECK(f.broken().empty());
        CHECK(f.alloc.epoch() == epoch);
        CHECK(std::equal(swa_v2p.begin(), swa_v2p.end(), f.alloc.page_table(Component::swa).v2p().begin()));
        CHECK(f.pages_hold(Component::full, kept, 1));
        CHECK(f.kv_holds(incoming, 2));
        CHECK(f.kv_holds(live, 3));
    };
    const VirtualPage unallocated{60};
    const std::vector<VirtualPage> kept_twice{kept[0], kept[0]};
    const std::vector<VirtualPage> incoming_twice{incoming[1], incoming[1]};
    const std::vector<VirtualPage> kept_and_live{kept[0], live[0]};
    const std::vector<VirtualPage> incoming_and_kept{incoming[0], kept[1]};
    const std::vector<VirtualPage> with_unallocated{incoming[0], unallocated};
    CHECK_THROWS_AS(f.alloc.transfer_swa(kept, std::span(incoming).first(1)), logic_error);  // sizes differ
    unchanged();
    CHECK_THROWS_AS(f.alloc.transfer_swa(kept_and_live, incoming), logic_error);  // a kept page has SWA bound
    unchanged();
    CHECK_THROWS_AS(f.alloc.transfer_swa(kept, incoming_and_kept), logic_error);  // an incoming tombstone
    unchanged();
    CHECK_THROWS_AS(f.alloc.transfer_swa(kept, with_unallocated), logic_error);  // an incoming page not allocated
    unchanged();
    CHECK_THROWS_AS(f.alloc.transfer_swa(kept_twice, incoming), logic_error);  // a kept id twice
    unchanged();
    CHECK_THROWS_AS(f.alloc.transfer_swa(kept, incoming_twice), logic_error);  // an incoming id twice
    unchanged();
    try {
        f.alloc.transfer_swa(kept, with_unallocated);
    } catch (const logic_error& e) {
        CHECK(std::string(e.what()).find("virtual page 60") != std::string::npos);
    }
    if constexpr (F::Alloc::has_reservations) {
        // An incoming page bound to a pending reservation: its load has not run, so its rows are not the request's.
        auto loading = f.alloc_kv(1, 4);
        f.alloc.free_swa(loading);
        ReserveResult r = f.alloc.alloc_physical(Component::swa, 1);
        REQUIRE(r);
        f.alloc.bind_swa(loading, r.reservation);
        const std::vector<VirtualPage> one_kept{kept[0]};
        const std::uint64_t e = f.alloc.epoch();
        CHECK_THROWS_AS(f.alloc.transfer_swa(one_kept, loading), logic_error);
        CHECK(f.alloc.epoch() == e);
        CHECK(f.broken().empty());
        f.alloc.cancel(std::move(r.reservation));
    }
    f.alloc.transfer_swa(kept, incoming);  // the valid call still works after every rejected one
    CHECK(swa_rows_moved(f, kept, incoming, 2));
    CHECK(f.broken().empty());
}

TEST_CASE("shortfalls say how many pages of which pool are missing") {
    using F = Fixture<SwaFullLayout>;
    F f(small_config(arena_bytes));
    auto live = f.alloc_kv(10);  // 20 envelopes in use
    const std::int64_t free_full = f.alloc.available_size(Component::full);
    REQUIRE(f.alloc.available_size(Component::swa) == free_full);  // one free band between the two ends

    SUBCASE("a FULL-only demand is short by what exceeds the free band") {
        std::vector<VirtualPage> out(static_cast<std::size_t>(free_full + 3));
        const AllocResult r = f.alloc.alloc_full(out);
        CHECK(r.shortfall == Shortfall::room);
        CHECK(r.missing.component == Component::full);
        CHECK(r.missing.count == 3);
    }
    SUBCASE("a composite demand is short in FULL, with SWA's demand as asked") {
        const std::int64_t n = f.alloc.available_size() + 2;
        std::vector<VirtualPage> out(static_cast<std::size_t>(n));
        const AllocResult r = f.alloc.alloc(out);
        CHECK(r.shortfall == Shortfall::room);
        CHECK(r.missing.component == Component::full);
        CHECK(r.missing.count == n - (free_full - n));  // SWA takes n of the band, FULL gets the rest
    }
    SUBCASE("a reservation is short by what exceeds SWA's room") {
        ReserveResult r = f.alloc.alloc_physical(Component::swa, static_cast<std::int32_t>(free_full + 4));
        CHECK(r.shortfall == Shortfall::room);
        CHECK(r.missing.component == Component::swa);
        CHECK(r.missing.count == 4);
    }
    SUBCASE("blocked moves: short by what fits without moving a page") {
        f.alloc.free_swa(std::span(live).first(6));  // SWA holes low in the arena that a flush would drain
        f.alloc.free_swa(std::span(live).subspan(9, 1));
        auto tail = std::vector<VirtualPage>{live[9]};
        ReserveResult pending = f.alloc.alloc_physical(Component::swa, 1);  // takes a hole and blocks moves
        REQUIRE(pending);
        f.alloc.bind_swa(tail, pending.reservation);
        const std::int64_t now = f.alloc.available_size(Component::full);
        std::vector<VirtualPage> out(static_cast<std::size_t>(now + 2));
        const AllocResult r = f.alloc.alloc_full(out);
        CHECK(r.shortfall == Shortfall::moves_blocked);
        CHECK(r.missing.component == Component::full);
        CHECK(r.missing.count == 2);
        f.alloc.cancel(std::move(pending.reservation));
        CHECK(f.alloc.alloc_full(out));  // with moves allowed, the flush drains the SWA holes
    }
    CHECK(f.broken().empty());
}

// Contract tests run for every shipped layout and policy: allocation and frees keep row contents, hot paths
// never touch the backend, paged extend/decode semantics, misuse leaves the allocator exactly as it was.

#include "alloc_support.hpp"

#include <string>

#include "drop_counter.hpp"

using namespace alloc_test;

namespace {

// Everything a misuse must leave unchanged.
template <class L>
struct Snapshot {
    explicit Snapshot(const Fixture<L>& f)
        : bytes(snapshot(f.alloc.region())), epoch(f.alloc.epoch()), counters(f.backend.counters()) {
        for (Component c : {Component::full, Component::swa, Component::mamba}) {
            if (!layout_components_v<L>.has(c)) continue;
            const PageTable& t = f.alloc.page_table(c);
            tables.emplace_back(t.v2p().begin(), t.v2p().end());
            tables.emplace_back(t.p2v().begin(), t.p2v().end());
        }
    }
    bool operator==(const Snapshot&) const = default;
    std::vector<std::byte> bytes;
    std::uint64_t epoch;
    BackendCounters counters;
    std::vector<std::vector<std::int32_t>> tables;
};
inline bool operator==(const BackendCounters& a, const BackendCounters& b) { return same_counters(a, b); }

// Runs `call`, expects a logic_error naming `call_name` and `fragment`, and an allocator left as it was.
template <class L, class Call>
void expect_misuse(Fixture<L>& f, const char* call_name, const std::string& fragment, Call call) {
    const Snapshot<L> before(f);
    try {
        call();
        FAIL("expected a logic_error from ", call_name);
    } catch (const unikv::logic_error& e) {
        const std::string what = e.what();
        INFO(what);
        CHECK(what.find(std::string("unikv: ") + call_name) != std::string::npos);
        CHECK(what.find(fragment) != std::string::npos);
    }
    CHECK(Snapshot<L>(f) == before);
    CHECK(f.broken().empty());
}

}  // namespace

TEST_CASE_TEMPLATE("data follows the virtual id through frees, flushes and reuse", L, FullLayout, SwaFullLayout,
                   MambaFullLayout, TriPoolLayout, EagerFullLayout, EagerSwaFullLayout, EagerMambaFullLayout) {
    Fixture<L> f(small_config(arena_bytes));
    std::vector<std::vector<VirtualPage>> groups;
    for (int i = 0; i < 6; ++i) groups.push_back(f.alloc_kv(2 + i % 3, static_cast<std::uint32_t>(i)));
    CHECK(f.broken().empty());
    f.alloc.free(groups[0]);
    f.alloc.free(groups[2]);
    f.alloc.free(groups[4]);
    CHECK(f.broken().empty());
    (void)f.alloc.flush(FlushMode::urgent);
    CHECK(f.broken().empty());
    REQUIRE(f.drain());
    for (int i : {1, 3, 5}) CHECK(f.kv_holds(groups[static_cast<std::size_t>(i)], static_cast<std::uint32_t>(i)));
    auto fresh = f.alloc_kv(5, 9);
    for (int i : {1, 3, 5}) CHECK(f.kv_holds(groups[static_cast<std::size_t>(i)], static_cast<std::uint32_t>(i)));
    CHECK(f.kv_holds(fresh, 9));
    if constexpr (Fixture<L>::Alloc::has_mamba) {
        auto states = f.alloc_states(4);
        f.alloc.free_state(std::span(states).first(2));
        (void)f.alloc.flush(FlushMode::urgent);
        REQUIRE(f.drain());
        CHECK(f.states_hold(std::span(states).subspan(2)));
    }
    CHECK(f.broken().empty());
}

TEST_CASE_TEMPLATE("alloc, free, tombstone, translate, reserve, bind and cancel never touch the backend", L,
                   FullLayout, SwaFullLayout, MambaFullLayout, TriPoolLayout) {
    Fixture<L> f(small_config(arena_bytes));
    auto a = f.alloc_kv(4);
    auto b = f.alloc_kv(4);
    const BackendCounters before = f.backend.counters();
    run_hot_paths(f, a, b);
    CHECK(same_counters(before, f.backend.counters()));
    CHECK(f.broken().empty());
}

TEST_CASE_TEMPLATE("eager frees compact at once and never block the host", L, EagerFullLayout, EagerSwaFullLayout,
                   EagerMambaFullLayout) {
    Fixture<L> f(small_config(arena_bytes));
    auto head = f.alloc_kv(3);
    auto tail = f.alloc_kv(3, 1);
    const BackendCounters before = f.backend.counters();
    f.alloc.free(head);
    CHECK(f.backend.counters().host_synchronizations == before.host_synchronizations);
    CHECK(f.backend.counters().copies_queued > before.copies_queued);
    CHECK(f.alloc.hole_pages(Component::full) == 0);
    CHECK(f.broken().empty());
    REQUIRE(f.drain());
    CHECK(f.kv_holds(tail, 1));
    CHECK(f.alloc.flush(FlushMode::urgent).pages_moved == 0);
}

TEST_CASE_TEMPLATE("alloc_extend fills the prefix's last page, then whole new pages; alloc_decode adds one token", L,
                   FullLayout, SwaFullLayout, MambaFullLayout, TriPoolLayout) {
    Fixture<L> f(small_config(arena_bytes));
    const std::vector<std::int32_t> prefix{0, 0};
    const std::vector<std::int32_t> seq{6, 3};
    const std::vector<VirtualToken> none(2);
    std::vector<VirtualToken> first(9);
    REQUIRE(f.alloc.alloc_extend({.prefix_lens = prefix, .seq_lens = seq, .last_locs = none}, first));
    // Request 0: tokens 0..5 on two pages; request 1: tokens 0..2 on one page.
    CHECK(first[1].value() == first[0].value() + 1);
    CHECK(first[3].value() == first[0].value() + 3);
    CHECK(first[4].value() % 4 == 0);
    CHECK(first[6].value() % 4 == 0);
    const std::vector<std::int32_t> prefix2{6, 3};
    const std::vector<std::int32_t> seq2{11, 4};
    const std::vector<VirtualToken> last2{first[5], first[8]};
    std::vector<VirtualToken> second(6);
    REQUIRE(f.alloc.alloc_extend({.prefix_lens = prefix2, .seq_lens = seq2, .last_locs = last2}, second));
    CHECK(second[0].value() == first[5].value() + 1);  // fills tokens 6, 7 of request 0's page
    CHECK(second[1].value() == first[5].value() + 2);
    CHECK(second[2].value() % 4 == 0);                 // token 8 starts a new page
    CHECK(second[5].value() == first[8].value() + 1);  // request 1's token 3 stays on its page
    const std::vector<std::int32_t> seq3{12, 5};
    const std::vector<VirtualToken> last3{second[4], second[5]};
    std::vector<VirtualToken> third(2);
    REQUIRE(f.alloc.alloc_decode({.seq_lens = seq3, .last_locs = last3}, third));
    CHECK(third[0].value() == second[4].value() + 1);
    CHECK(third[1].value() % 4 == 0);  // token 4 of request 1 opens a page
    // Every token translates to a distinct physical FULL row.
    std::vector<VirtualToken> all(first);
    all.insert(all.end(), second.begin(), second.end());
    all.insert(all.end(), third.begin(), third.end());
    std::vector<PhysicalToken> rows(all.size());
    f.alloc.translate_full(all, rows);
    std::sort(rows.begin(), rows.end());
    CHECK(std::adjacent_find(rows.begin(), rows.end()) == rows.end());
    CHECK(rows.front().value() > 0);
    CHECK(f.broken().empty());
    // Inconsistent inputs are refused.
    const std::vector<VirtualToken> wrong{VirtualToken{second[4].value() + 1}, second[5]};
    CHECK_THROWS_AS((void)f.alloc.alloc_decode({.seq_lens = seq3, .last_locs = wrong}, third), unikv::logic_error);
    std::vector<VirtualToken> short_out(1);
    CHECK_THROWS_AS((void)f.alloc.alloc_extend({.prefix_lens = prefix, .seq_lens = seq, .last_locs = none}, short_out),
                    unikv::logic_error);
    CHECK(f.broken().empty());
}

TEST_CASE_TEMPLATE("misuse throws a logic_error naming the call and the id and changes nothing", L, FullLayout,
                   SwaFullLayout, TriPoolLayout, MambaFullLayout) {
    using A = typename Fixture<L>::Alloc;
    Fixture<L> f(small_config(arena_bytes));
    auto live = f.alloc_kv(4);
    auto freed = f.alloc_kv(2);
    f.alloc.free(std::span(freed).first(1));
    const std::vector<VirtualPage> twice{live[1], live[2], live[1]};
    expect_misuse(f, "free", "virtual page " + std::to_string(freed[0].value()) + " is not allocated",
                  [&] { f.alloc.free(std::span(freed).first(1)); });
    expect_misuse(f, "free", "is listed twice", [&] { f.alloc.free(twice); });
    expect_misuse(f, "free", "virtual page 0 is not allocated", [&] {
        const std::vector<VirtualPage> sink{VirtualPage{0}};
        f.alloc.free(sink);
    });
    expect_misuse(f, "free", "virtual page 100000 is not allocated", [&] {
        const std::vector<VirtualPage> far{VirtualPage{100000}};
        f.alloc.free(far);
    });
    expect_misuse(f, "alloc_physical", "mamba", [&] { (void)f.alloc.alloc_physical(Component::mamba, 1); });
    expect_misuse(f, "available_size", "no", [&] { (void)f.alloc.available_size(static_cast<Component>(7)); });
    if constexpr (A::has_swa) {
        f.alloc.free_swa(std::span(live).first(1));
        expect_misuse(f, "free_swa", "virtual page " + std::to_string(live[0].value()) + " is already a tombstone",
                      [&] { f.alloc.free_swa(std::span(live).first(1)); });
        expect_misuse(f, "free_full", "still has SWA page", [&] { f.alloc.free_full(std::span(live).subspan(1, 1)); });
        ReserveResult r = f.alloc.alloc_physical(Component::swa, 2);
        REQUIRE(r);
        f.alloc.bind_swa(std::span(live).first(1), r.reservation);
        f.alloc.free_swa(std::span(live).subspan(3, 1));
        expect_misuse(f, "bind_swa", "is already bound", [&] { f.alloc.bind_swa(std::span(live).subspan(3, 1), r.reservation); });
        expect_misuse(f, "bind_swa", "tombstone it with free_swa first",
                      [&] { f.alloc.bind_swa(std::span(live).subspan(2, 1), r.reservation, 1); });
        expect_misuse(f, "bind_swa", "binding 2 pages from index 1",
                      [&] { f.alloc.bind_swa(std::span(live).first(2), r.reservation, 1); });
        expect_misuse(f, "free", "cancel the reservation first", [&] { f.alloc.free(std::span(live).first(1)); });
        expect_misuse(f, "free_physical", "cancel it instead", [&] { f.alloc.free_physical(Component::swa, r.reservation.pages()); });
        f.alloc.set_transfer_done_event({.owner = 2, .direction = TransferDirection::load}, f.backend.make_event());
        expect_misuse(f, "cancel", "was submitted with its load", [&] { f.alloc.cancel(std::move(r.reservation)); });
        CHECK_FALSE(r.reservation.empty());
        const PhysicalPage held = r.reservation.pages()[1];
        const std::vector<PhysicalPage> dup{held, held};
        expect_misuse(f, "free_physical", "is listed twice", [&] { f.alloc.free_physical(Component::swa, dup); });
        f.alloc.free_physical(Component::swa, std::span(&held, 1));
        expect_misuse(f, "free_physical", "is neither reserved nor bound",
                      [&] { f.alloc.free_physical(Component::swa, std::span(&held, 1)); });
        expect_misuse(f, "free_physical", "full pool takes no reservations",
                      [&] { f.alloc.free_physical(Component::full, std::span(&held, 1)); });
    }
    if constexpr (A::has_mamba) {
        auto states = f.alloc_states(2);
        f.alloc.free_state(std::span(states).first(1));
        expect_misuse(f, "free_state", "state slot " + std::to_string(states[0].value()) + " is not allocated",
                      [&] { f.alloc.free_state(std::span(states).first(1)); });
        expect_misuse(f, "alloc_physical", "mamba", [&] { (void)f.alloc.alloc_physical(Component::mamba, 1); });
    } else {
        expect_misuse(f, "live_pages", "no mamba pool", [&] { (void)f.alloc.live_pages(Component::mamba); });
    }
    CHECK(f.kv_holds(std::span(live).subspan(1, 1)));
}

TEST_CASE_TEMPLATE("a dropped reservation is detected, reported and cancelled", L, SwaFullLayout, TriPoolLayout) {
    Fixture<L> f(small_config(arena_bytes));
    auto target = f.alloc_kv(2);
    f.alloc.free_swa(target);
    const unikv::test::DropCounter drops;
    {
        ReserveResult r = f.alloc.alloc_physical(Component::swa, 2);
        REQUIRE(r);
        f.alloc.bind_swa(target, r.reservation);
        CHECK(f.alloc.moves_blocked());
    }  // dropped without being submitted or cancelled
    CHECK(f.alloc.unconsumed_reservations() == 1);
    CHECK(drops[Dropped::reservation] == 1);
    CHECK(drops.total() == 1);
    CHECK_FALSE(f.alloc.moves_blocked());
    CHECK(f.physical_row(Component::swa, target[0].value() * 4) == 0);  // the tombstone is back
    CHECK(f.broken().empty());
    {
        ReserveResult r = f.alloc.alloc_physical(Component::swa, 1);
        REQUIRE(r);
        f.alloc.set_transfer_done_event({.owner = 1, .direction = TransferDirection::load}, f.backend.make_event());
        f.alloc.free_physical(Component::swa, r.reservation.pages());
    }  // submitted: consumed, nothing reported
    CHECK(f.alloc.unconsumed_reservations() == 1);
    CHECK(drops.total() == 1);
    CHECK(f.broken().empty());
}

TEST_CASE("an allocator moves with its reservations, and handed-out pages can be zeroed") {
    HostBackend backend({.mode = ExecutionMode::manual});
    auto stream = backend.make_stream();
    UnifiedAllocator<SwaFullLayout, HostBackend> a(backend, small_config(arena_bytes), stream,
                                                   {.handout_fill = HandoutFill::zero});
    std::memset(a.region().data, 0x5a, a.region().size);
    const std::uint64_t built = backend.counters().copies_queued;  // the device page tables' uploads
    std::vector<VirtualPage> pages(2);
    REQUIRE(a.alloc(pages));
    CHECK(backend.counters().copies_queued == built + 2);  // one fill per pool
    backend.run_all();
    std::vector<PhysicalToken> rows(1);
    const std::vector<VirtualToken> t{VirtualToken{pages[1].value() * 4 + 3}};
    a.translate_swa(t, rows);
    CHECK(a.region().data[static_cast<std::size_t>(rows[0].value()) * 32] == std::byte{0});
    a.free_swa(pages);
    ReserveResult r = a.alloc_physical(Component::swa, 2);
    REQUIRE(r);
    UnifiedAllocator<SwaFullLayout, HostBackend> moved(std::move(a));
    moved.bind_swa(pages, r.reservation);
    CHECK(moved.moves_blocked());
    moved.cancel(std::move(r.reservation));
    CHECK_FALSE(moved.moves_blocked());
    {
        const unikv::test::DropCounter drops;
        { ReserveResult dropped = moved.alloc_physical(Component::swa, 1); }
        CHECK(drops[Dropped::reservation] == 1);
    }
    CHECK(moved.unconsumed_reservations() == 1);
    CHECK(moved.verify().empty());
}

TEST_CASE_TEMPLATE("a freed row comes back in its order: rows of consecutive ids stay ascending", L, FullLayout,
                   SwaFullLayout, TriPoolLayout, EagerMambaFullLayout) {
    Fixture<L> f(small_config(64 * 128));
    auto head = f.alloc_kv(3);
    auto row = f.alloc_kv(6);
    for (std::size_t i = 1; i < row.size(); ++i) REQUIRE(row[i].value() == row[0].value() + static_cast<std::int32_t>(i));
    f.alloc.free(row);
    auto again = f.alloc_kv(6);
    CHECK(again == row);
    if constexpr (Fixture<L>::Alloc::has_mamba) {
        auto states = f.alloc_states(4);
        f.alloc.free_state(states);
        CHECK(f.alloc_states(4) == states);
    }
    CHECK(f.kv_holds(head));
    CHECK(f.broken().empty());
}

// Budgets and admission (reference §6, §9 scenarios 5, 6, 26, 27, 28) on a Cache over a manual HostBackend:
// what each budget charges and refuses (with the refusal's breakdown), the shared budget's reclaim before a
// load is queued (so the step's allocations need no page move while the load blocks them), the host match
// pinned across reclaim, every pin released on success, refusal and an exception, and the FULL load-back spec
// built only by the budgets that read it. Rows are checked through translation wherever data moves.

#include <stdexcept>
#include <vector>

#include <unikv/cache/admission.hpp>
#include <unikv/budget/base_budget.hpp>
#include <unikv/budget/partitioned_swa_budget.hpp>
#include <unikv/budget/shared_hybrid_budget.hpp>
#include <unikv/budget/shared_swa_budget.hpp>

#include "hicache/hicache_support.hpp"

using namespace hicache_test;

namespace {

// What the tree saw: load-back plans built, matches made, locks taken, and the host locks of one watched node at
// every `evict_host`.
struct Probe {
    static inline int plans = 0;
    static inline int matches = 0;
    static inline int locks = 0;
    static inline bool watching = false;
    static inline NodeRef watched{};
    static inline std::vector<per_component<std::uint32_t>> host_pins_at_evict_host;
    static void reset() {
        plans = 0;
        matches = 0;
        locks = 0;
        watching = false;
        host_pins_at_evict_host.clear();
    }
};

// The fast tree, counting its plans and watching its host evictions.
template <class... Cs>
class ProbedTree : public RadixTree<Cs...> {
public:
    using RadixTree<Cs...>::RadixTree;
    MatchResult match_prefix(TokenKey key, MatchOptions options = {}) {
        ++Probe::matches;
        return RadixTree<Cs...>::match_prefix(key, options);
    }
    [[nodiscard]] LockReceipt lock(NodeRef node, LockOptions options = {}) {
        ++Probe::locks;
        return RadixTree<Cs...>::lock(node, options);
    }
    std::span<const LoadBackStep> load_back_plan(NodeRef node) {
        ++Probe::plans;
        return RadixTree<Cs...>::load_back_plan(node);
    }
    EvictResult evict_host(Component c, std::int64_t amount) {
        if (Probe::watching) Probe::host_pins_at_evict_host.push_back(this->node_info(Probe::watched).host_locks);
        return RadixTree<Cs...>::evict_host(c, amount);
    }
};
struct ProbedTreeCore {
    template <class... Cs>
    using impl = ProbedTree<Cs...>;
};

template <class L>
struct Probed : Policies<L> {
    using tree_core = ProbedTreeCore;
};
using SwaProbed = Probed<SwaFullLayout>;
using TriProbed = Probed<TriPoolLayout>;

// A test-only budget: `Inner`'s, recording every load-back ask, and throwing where told.
enum class Fault : std::uint8_t { none, selection, load_back };
template <class Inner>
struct Faulty {
    template <class L>
    static constexpr budget_layout_rule layout_rule = budget_layout_rule_of_v<Inner, L>;
    template <class L>
    class impl : public Inner::template impl<L> {
        using base = typename Inner::template impl<L>;

    public:
        explicit impl(const BudgetConfig& c = {}) : base(c) {}
        Fault fault = Fault::none;
        std::vector<LoadBackAsk> asks;
        mutable std::vector<std::int64_t> protected_at_selection;  // FULL tokens locked while selecting
        Selection check_prefill(const CapacityView& v, const PrefillAsk& ask) const {
            protected_at_selection.push_back(v[Component::full].locked() * v.page_tokens());
            if (fault == Fault::selection) throw std::runtime_error("injected during selection");
            return base::check_prefill(v, ask);
        }
        Reclaim prepare_load_back(const CapacityView& v, const LoadBackAsk& ask) {
            asks.push_back(ask);
            if (fault == Fault::load_back) throw std::runtime_error("injected while preparing the load-back");
            return base::prepare_load_back(v, ask);
        }
    };
};

template <class P>
using Cache = typename Rig<P>::Cache;
template <class B, class P>
using BudgetOf = budget_t<B, typename P::layout>;

// `tokens` followed by `extra`.
std::vector<TokenId> joined(std::vector<TokenId> tokens, const std::vector<TokenId>& extra) {
    tokens.insert(tokens.end(), extra.begin(), extra.end());
    return tokens;
}

// `key` cached and written back: a host-only node.
template <class P>
NodeRef hosted(Rig<P>& r, const std::vector<TokenId>& key) {
    const NodeRef node = r.insert(key);
    REQUIRE(r.cache.evict({Component::full, static_cast<std::int64_t>(key.size()) / page_size}).dropped == 0);
    REQUIRE_FALSE(r.cache.tree().node_info(node).device[Component::full]);
    return node;
}

// `key` (4 pages) cached with FULL resident and SWA on host only: the FULL-locked leaf gives up its SWA, whose
// last window is written back. The node is split at one window: the upper part is a plain tombstone.
template <class P>
NodeRef swa_hosted(Rig<P>& r, const std::vector<TokenId>& key) {
    const NodeRef node = r.insert(key);
    LockReceipt full_only = r.cache.lock(node, {.components = ComponentMask::of(Component::full)});
    REQUIRE(r.cache.evict({Component::swa, static_cast<std::int64_t>(key.size()) / page_size}).backed_up == 1);
    r.cache.unlock(std::move(full_only));
    const NodeInfo info = r.cache.tree().node_info(node);
    REQUIRE(info.device[Component::full]);
    REQUIRE_FALSE(info.device[Component::swa]);
    REQUIRE(r.host_holds(node, Component::swa, key));
    return node;
}

// Every node from `node` up holds the markers of `tokens` on device (FULL, and SWA where present).
template <class P>
bool path_holds(const Rig<P>& r, NodeRef node, const std::vector<TokenId>& tokens) {
    for (NodeRef n = node; !n.is_root(); n = r.cache.tree().node_info(n).parent) {
        if (!r.device_holds(n, tokens)) return false;
    }
    return true;
}

// Device and host lock counts of `node`, per component.
struct Locks {
    per_component<std::uint32_t> device{};
    per_component<std::uint32_t> host{};
    friend bool operator==(const Locks&, const Locks&) = default;
};
template <class P>
Locks locks_of(const Rig<P>& r, NodeRef node) {
    const NodeInfo info = r.cache.tree().node_info(node);
    return {info.device_locks, info.host_locks};
}

// Queues the load and acknowledges it; true when committed.
template <class P>
bool ack_load(Rig<P>& r, std::uint64_t id) {
    CHECK(r.cache.start_loading() == 1);
    (void)r.run_transfers();
    const std::span<const LoadDone> done = r.cache.loading_check();
    REQUIRE(done.size() == 1);
    CHECK(done[0].id == id);
    return done[0].committed;
}

}  // namespace

// ---- budgets -----------------------------------------------------------------------------------------------

// The view a budget reads is the allocator and the tree in pages of each pool (Mamba: states), converted once:
// cached data is evictable, a lock moves it to locked, and nothing else of the cache reaches a budget.
TEST_CASE("the capacity view counts every pool in pages: free, evictable, locked") {
    Rig<TriProbed> r(96, 16);
    const auto key = Rig<TriProbed>::key(300, 3);
    const CapacityView empty = r.cache.capacity();
    CHECK(empty.page_tokens() == page_size);
    CHECK(empty.swa_window() == window);
    for (const Component c : all_components) {
        CAPTURE(c);
        CHECK(empty[c].present());
        CHECK(empty[c].page_tokens() == r.cache.page_size(c));
        CHECK(empty[c].page_bytes() == r.cache.allocator().spec()[c].page_bytes);
        CHECK(empty[c].free() == r.cache.allocator().available_size(c));
        CHECK(empty[c].evictable() == 0);
        CHECK(empty[c].locked() == 0);
        CHECK(empty[c].in_flight() == 0);
    }
    const NodeRef node = r.insert(key);  // 3 FULL pages, 3 live SWA pages, one state
    const CapacityView cached = r.cache.capacity();
    CHECK(cached[Component::full].evictable() == 3);
    CHECK(cached[Component::swa].evictable() == 3);
    CHECK(cached[Component::mamba].evictable() == 1);
    CHECK(cached[Component::full].free() == r.cache.allocator().available_size(Component::full));
    CHECK(cached[Component::mamba].free() == r.cache.allocator().available_size(Component::mamba));
    LockReceipt lock = r.cache.lock(node);
    const CapacityView locked = r.cache.capacity();
    CHECK(locked[Component::full].evictable() == 0);
    CHECK(locked[Component::full].locked() == 3);
    CHECK(locked[Component::mamba].locked() == 1);
    CHECK(locked[Component::full].locked() * page_size == r.cache.tree().protected_size(Component::full));
    r.cache.unlock(std::move(lock));
    CHECK(r.cache.capacity()[Component::full].evictable() == 3);
}

TEST_CASE("the base budget is available + evictable - offsets: pending decode tokens are charged first") {
    Rig<SwaProbed> r(40, 16);
    const auto cached = Rig<SwaProbed>::key(100, 4);
    (void)r.insert(cached);  // 4 evictable FULL pages
    const std::int64_t available = r.cache.allocator().available_size(Component::full);
    const std::int64_t left = available * page_size + 16;
    BudgetOf<BaseBudget, SwaProbed> budget;
    // An extension of e tokens with no decode charges ceil_page(e) + one page.
    const PrefillAsk fits{.extend = static_cast<std::int32_t>(left - page_size), .max_new = 0};
    budget.begin_step({});
    CHECK(budget.check_prefill(r.cache.capacity(), fits));
    budget.begin_step({.decode_tokens = 8});  // two pages pre-charged: the same ask is short by them
    const Selection s = budget.check_prefill(r.cache.capacity(), fits);
    REQUIRE_FALSE(s);
    CHECK(s.check.refusal == AdmissionRefusal{.cause = RefusalCause::no_room,
                                              .missing = {Component::full, 2},
                                              .pages_reclaimable = 4,
                                              .pages_in_flight = 0,
                                              .pages_locked = 0,
                                              .precharged = 8});
    CHECK(to_string(s.check.refusal) ==
          "no room: full short by 2 pages (reclaimable 4, in flight 0, locked 0); 8 tokens pre-charged this step");
    // Each admission charges its extension, a page and its decode.
    budget.begin_step({.decode_tokens = 8});
    budget.reserve(r.cache.capacity(), {.extend = 5, .max_new = 3});
    CHECK(budget.total_offset() == 8 + 8 + 4 + 3);
    // A step whose begin_step is skipped keeps what the last one charged, and the refusal names it.
    const Selection stale = budget.check_prefill(r.cache.capacity(), fits);
    REQUIRE_FALSE(stale);
    CHECK(stale.check.refusal.precharged == 8 + 8 + 4 + 3);
    budget.begin_step({});
    CHECK(budget.check_prefill(r.cache.capacity(), fits));
}

TEST_CASE("a request beyond the chunk budget is cut to whole pages of it, and an exhausted chunk refuses") {
    Rig<SwaProbed> r(40, 16);
    BudgetOf<SharedSWABudget, SwaProbed> budget;
    budget.begin_step({.chunk_tokens = 10});
    const Selection s = budget.check_prefill(r.cache.capacity(), {.extend = 20, .max_new = 4});
    REQUIRE(s);
    CHECK(s.ask.extend == 8);
    CHECK(s.ask.chunked);
    CHECK(s.ask.max_new == 0);  // no decode while chunked
    budget.reserve(r.cache.capacity(), s.ask);
    CHECK(budget.chunk_left() == 2);
    CHECK(budget.swa_offset() == 8 + page_size);  // the SWA estimate of the chunk: one window, one page
    const Selection none = budget.check_prefill(r.cache.capacity(), {.extend = 4, .max_new = 4});
    REQUIRE_FALSE(none);
    CHECK(none.check.refusal.cause == RefusalCause::chunk_exhausted);
    CHECK(budget.check_prefill(r.cache.capacity(), {.extend = 2, .max_new = 4}));  // what is left fits a short request
}

TEST_CASE("a static SWA partition refuses what the shared arena admits, naming the SWA pages it lacks") {
    Rig<SwaProbed> r(40, 16);
    BudgetOf<PartitionedSWABudget, SwaProbed> split({.full_partition_pages = 30, .swa_partition_pages = 4});
    r.cache.allocator().bound_pages(split.partitions());  // what `Cache` does with a partitioned budget
    BudgetOf<SharedSWABudget, SwaProbed> shared;
    split.begin_step({});
    shared.begin_step({});
    // SWA estimate of 16 + 4 tokens, window 8: 8 past the window, one window, one page = 5 pages.
    const PrefillAsk ask{.extend = 16, .max_new = 4};
    const Selection s = split.check_prefill(r.cache.capacity(), ask);
    REQUIRE_FALSE(s);
    CHECK(s.check.refusal == AdmissionRefusal{.cause = RefusalCause::no_room,
                                              .missing = {Component::swa, 1},
                                              .pages_reclaimable = 0,
                                              .pages_in_flight = 0,
                                              .pages_locked = 0});
    r.cache.allocator().bound_pages({});  // the shared arena: unbounded
    CHECK(shared.check_prefill(r.cache.capacity(), ask));
    using Split = BudgetOf<PartitionedSWABudget, SwaProbed>;
    CHECK_THROWS_AS(Split(BudgetConfig{}), logic_error);
}

TEST_CASE("the shared budget counts evictable pages of one pool for the other: compaction hands bytes over") {
    Rig<SwaProbed> r(24, 16);
    // A running request locks its FULL path only: its 5 SWA pages are evictable, its FULL pages are not.
    const auto prefix = Rig<SwaProbed>::key(100, 4);
    const auto running = joined(prefix, Rig<SwaProbed>::key(900, 1));
    (void)r.insert(prefix);
    LockReceipt run = r.cache.lock(r.insert(running), {.components = ComponentMask::of(Component::full)});
    REQUIRE(r.cache.tree().evictable_size(Component::swa) == 5 * page_size);
    REQUIRE(r.cache.tree().evictable_size(Component::full) == 0);
    // The most FULL pages that fit with every allowed compaction.
    std::int64_t most = 0;
    while (r.cache.allocator().can_reserve({.full = most + 1})) ++most;
    BudgetOf<SharedSWABudget, SwaProbed> budget;
    budget.begin_step({});
    // Extension 8 (SWA estimate 3 pages, 2 evictable SWA pages to spare), decode chosen so FULL asks one page
    // more than fits: the spare SWA bytes cover it.
    const PrefillAsk ask{.extend = 8, .max_new = static_cast<std::int32_t>((most - 2) * page_size)};
    CHECK(budget.check_prefill(r.cache.capacity(), ask));
    // Two more FULL pages than that exceed the spare bytes: refused, short by exactly those.
    const Selection s = budget.check_prefill(r.cache.capacity(), {.extend = 8, .max_new = ask.max_new + 2 * page_size});
    REQUIRE_FALSE(s);
    CHECK(s.check.refusal.missing.component == Component::full);
    CHECK(s.check.refusal.missing.count == 1);
    CHECK(s.check.refusal.pages_locked == 5);
    r.cache.unlock(std::move(run));
    CHECK(r.broken().empty());
}

// ---- admission -------------------------------------------------------------------------------------------

TEST_CASE("admission of a device hit pins nothing beyond the request's own lock and charges the budget") {
    Rig<SwaProbed> r(40, 16);
    const auto cached = Rig<SwaProbed>::key(100, 3);
    const NodeRef node = r.insert(cached);
    const auto prompt = joined(cached, Rig<SwaProbed>::key(900, 1));
    BudgetOf<SharedSWABudget, SwaProbed> budget;
    budget.begin_step({.decode_tokens = 4});
    Probe::reset();
    Admission a = try_admit(r.cache, budget, {.prompt = TokenKey{prompt}, .max_new_tokens = 4});
    REQUIRE(a);
    CHECK(Probe::matches == 1);
    CHECK(Probe::locks == 1);  // the selection pin becomes the request's lock
    CHECK(a.node == node);
    CHECK(a.prefix_length == 12);
    CHECK(a.extend_length == 4);
    CHECK(a.load_id == 0);
    CHECK(budget.total_offset() == 4 + 4 + 4 + 4);
    CHECK(locks_of(r, node).device[Component::full] == 1);  // the request's own, no pin left
    CHECK(r.cache.tree().protected_size(Component::full) == 12);
    r.cache.unlock(std::move(a.lock));
    CHECK(r.cache.tree().protected_size(Component::full) == 0);
}

TEST_CASE("a request that needs more FULL pages than the pool can ever hold is refused as never fitting") {
    Rig<SwaProbed> r(40, 16);
    BudgetOf<SharedSWABudget, SwaProbed> budget;
    budget.begin_step({});
    const std::int64_t most = r.cache.capacity()[Component::full].most();
    REQUIRE(most == r.cache.allocator().spec()[Component::full].usable_pages());  // no partition here
    // The budgets' FULL charge of a prompt is its pages, one more page, and its decode tokens: a prompt of
    // `most - 1` pages with one decode token needs `most + 1` pages.
    const auto prompt = Rig<SwaProbed>::key(100, static_cast<std::int32_t>(most - 1));
    Probe::reset();
    const Admission a = try_admit(r.cache, budget, {.prompt = TokenKey{prompt}, .max_new_tokens = 1});
    REQUIRE_FALSE(a);
    CHECK(a.refusal.cause == RefusalCause::never_fits);
    CHECK(a.refusal.missing == Pages{Component::full, 1});
    CHECK(to_string(a.refusal) == "never fits: full short by 1 pages even with the pool empty");
    CHECK(Probe::matches == 0);  // told before any work
    CHECK(budget.total_offset() == 0);
    // Without its decode token the charge is `most` pages: an empty arena could take it, so whatever the cache
    // holds now, it is not refused as never fitting.
    Admission b = try_admit(r.cache, budget, {.prompt = TokenKey{prompt}, .max_new_tokens = 0});
    CHECK(b.refusal.cause != RefusalCause::never_fits);
    if (b) r.cache.unlock(std::move(b.lock));
    // A static partition bounds what the pool can ever hold: nine pages, a page and a token need 11 of 10.
    r.cache.allocator().bound_pages({.full = 10});
    CHECK(r.cache.capacity()[Component::full].most() == 10);
    const Admission c =
        try_admit(r.cache, budget, {.prompt = TokenKey{Rig<SwaProbed>::key(300, 9)}, .max_new_tokens = 1});
    CHECK(c.refusal.cause == RefusalCause::never_fits);
    CHECK(c.refusal.missing == Pages{Component::full, 1});
    r.cache.allocator().bound_pages({});
    CHECK(r.broken().empty());
}

// Scenario 6: FULL resident and SWA on host (the load adds no FULL rows), a running 40-token request whose SWA
// beyond its window is the only thing eviction can take, and 24 decode tokens pending. The shared budget
// reclaims for the load and for the pending demand before the load is queued, so while the load blocks page
// moves the step's own allocations still fit. Dropping `total_offset` or `swa_offset` from the demand leaves
// the reclaim undone and the decode allocation short.
TEST_CASE("the shared budget reclaims for the load and the pending decode demand before the load is queued") {
    Rig<SwaProbed> r(40, 16);
    const auto target = Rig<SwaProbed>::key(100, 4);
    const NodeRef node = swa_hosted(r, target);
    const auto older = Rig<SwaProbed>::key(500, 8);
    const auto running = joined(older, Rig<SwaProbed>::key(900, 2));
    const NodeRef run_node = r.insert(running);
    REQUIRE(r.cache.match(TokenKey{older}).device_length == 32);  // splits the node: [0, 32) above [32, 40)
    LockReceipt run = r.cache.lock(run_node);  // its SWA lock covers one window: the lower node
    const std::int64_t swa_evictable = r.cache.tree().evictable_size(Component::swa);
    REQUIRE(swa_evictable == 32);

    BudgetOf<SharedSWABudget, SwaProbed> budget;
    budget.begin_step({.decode_tokens = 24});
    const auto prompt = joined(target, Rig<SwaProbed>::key(2000, 1));
    Admission a = try_admit(r.cache, budget, {.prompt = TokenKey{prompt}, .max_new_tokens = page_size});
    REQUIRE(a);
    CHECK(a.load_id != 0);
    CHECK(a.prefix_length == 16);
    CHECK(r.cache.loads_in_flight() == 1);
    CHECK(r.cache.tree().evictable_size(Component::swa) < swa_evictable);  // the running request's old SWA went
    CHECK(r.cache.allocator().moves_blocked());

    // The step's allocations while the load is queued: the extension's page and the 24 decode tokens.
    REQUIRE(drain(r.backend, r.stream));
    std::vector<VirtualPage> extension(1);
    std::vector<VirtualPage> decode(24 / page_size);
    CHECK(r.cache.allocator().alloc(extension));
    CHECK(r.cache.allocator().alloc(decode));
    CHECK(r.backend.queued(r.stream) == 0);  // no page moved
    CHECK(path_holds(r, run_node, running));   // the running request's FULL rows and window are intact

    CHECK(ack_load(r, a.load_id));
    CHECK(path_holds(r, node, target));  // the loaded window holds the original rows
    CHECK(r.cache.match(TokenKey{target}).device_length == 16);
    CHECK(path_holds(r, run_node, running));
    r.cache.allocator().free(extension);
    r.cache.allocator().free(decode);
    r.cache.unlock(std::move(a.lock));
    r.cache.unlock(std::move(run));
    CHECK(r.broken().empty());
}

// Scenario 5: write-back; a 16-token host-only match, the host filled by evicted fillers, a 40-token unbacked
// device victim. Reclaim evicts the victim, and under write-back makes host room first by evicting host
// leaves: the match, the oldest host leaf, survives only because it is host-pinned throughout.
// The pins of a host hit are handed to its load instead of being released and taken again: one match, four lock
// acquisitions (the selection pin on the device part of the match, the host match's host and device pins, which
// the load keeps until its ack, and the request's lock), and the rows load byte-exact.
TEST_CASE("a host-hit admission matches once and takes four locks, the load keeping the match's pins") {
    Rig<SwaProbed> r(40, 16);
    const auto key = Rig<SwaProbed>::key(100, 4);
    // The first half cached on device, the whole key below it evicted to host: the match of the key is a device
    // part above a host part.
    const std::vector<TokenId> half(key.begin(), key.begin() + 2 * page_size);
    (void)r.insert(half);
    const NodeRef lower = r.insert(key);
    REQUIRE(r.cache.evict({Component::full, 2}).backed_up >= 1);  // the leaf, written back
    REQUIRE_FALSE(r.cache.tree().node_info(lower).device[Component::full]);
    const MatchResult m = r.cache.match(TokenKey{key});
    REQUIRE(m.device_length == 2 * page_size);
    REQUIRE(m.best_length == 4 * page_size);

    BudgetOf<SharedSWABudget, SwaProbed> budget;
    budget.begin_step({});
    const auto prompt = joined(key, Rig<SwaProbed>::key(2000, 1));
    Probe::reset();
    Admission a = try_admit(r.cache, budget, {.prompt = TokenKey{prompt}, .max_new_tokens = page_size});
    REQUIRE(a);
    CHECK(a.node == lower);
    CHECK(a.load_id != 0);
    CHECK(Probe::matches == 1);
    CHECK(Probe::locks == 4);
    const Locks pinned = locks_of(r, lower);
    CHECK(pinned.host[Component::full] == 1);    // the load's, until its ack
    CHECK(pinned.device[Component::full] == 2);  // the load's and the request's
    std::vector<VirtualToken> rows(prompt.size());
    CHECK_THROWS_AS(r.cache.prefix_rows(a.node, rows), logic_error);  // not before the load's ack
    CHECK(ack_load(r, a.load_id));
    CHECK(path_holds(r, lower, key));
    // The engine reads the prefix's rows from the admission's node: no second match, and each row holds its
    // token's marker.
    r.cache.prefix_rows(a.node, rows);
    CHECK(Probe::matches == 1);
    for (std::size_t k = 0; k < key.size() / page_size; ++k) {
        const VirtualPage page = page_of(rows[k * page_size], PageSize{page_size});
        CHECK(rows[k * page_size + 1] == token_of(page, PageSize{page_size}, 1));
        CHECK(r.rows().page_holds(Component::full, page, key, static_cast<std::int32_t>(k) * page_size));
    }
    const Locks held = locks_of(r, lower);
    CHECK(held.host[Component::full] == 0);
    CHECK(held.device[Component::full] == 1);  // the request's own
    r.cache.unlock(std::move(a.lock));
    CHECK(r.broken().empty());
}

TEST_CASE("the host match stays pinned while reclaim evicts host leaves, and loads back byte-exact") {
    Rig<SwaProbed> r(30, 8);
    Probe::reset();
    const auto match = Rig<SwaProbed>::key(100, 4);
    const NodeRef node = hosted(r, match);
    for (TokenId t = 0; t < 4; ++t) (void)hosted(r, Rig<SwaProbed>::key(300 + 10 * t, 1));
    REQUIRE(r.cache.host_pools().available(Component::full) == 0);
    (void)r.insert(Rig<SwaProbed>::key(700, 10));  // the victim
    (void)r.cache.allocator().flush(FlushMode::urgent);
    REQUIRE(drain(r.backend, r.stream));

    BudgetOf<SharedSWABudget, SwaProbed> budget;
    budget.begin_step({});
    const auto prompt = joined(match, Rig<SwaProbed>::key(2000, 1));
    Probe::watching = true;
    Probe::watched = node;
    Probe::matches = 0;
    Probe::locks = 0;
    Admission a = try_admit(r.cache, budget, {.prompt = TokenKey{prompt}, .max_new_tokens = page_size});
    Probe::watching = false;
    REQUIRE(a);
    // One match; the host match's two pins (the load keeps them until its ack instead of releasing them and
    // taking its own) and the request's lock. No selection pin: nothing of the match is on device (the root needs
    // none); with a device part it is the fourth.
    CHECK(Probe::matches == 1);
    CHECK(Probe::locks == 3);
    REQUIRE_FALSE(Probe::host_pins_at_evict_host.empty());
    for (const per_component<std::uint32_t>& pins : Probe::host_pins_at_evict_host) {
        CHECK(pins[Component::full] > 0);
        CHECK(pins[Component::swa] > 0);
    }
    CHECK(ack_load(r, a.load_id));
    CHECK(path_holds(r, node, match));
    r.cache.unlock(std::move(a.lock));
    const Locks after = locks_of(r, node);
    CHECK(after.device[Component::full] == 0);
    CHECK(after.host[Component::full] == 0);
    CHECK(after.host[Component::swa] == 0);
    CHECK(r.broken().empty());
}

// Scenario 26: selection admits the request (its extension fits), but the shared budget cannot reclaim room
// for the load as well (everything else on device is locked): refused with the breakdown, no pin left, nothing
// queued or charged, the host hit still there.
TEST_CASE("pins are released when the load-back budget fails, and the refusal says why") {
    Rig<SwaProbed> r(30, 16);
    const auto match = Rig<SwaProbed>::key(100, 4);
    const NodeRef node = hosted(r, match);
    (void)r.cache.allocator().flush(FlushMode::urgent);
    LockReceipt run = r.cache.lock(r.insert(Rig<SwaProbed>::key(700, 10)));  // 20 of the 29 envelopes
    REQUIRE(drain(r.backend, r.stream));
    BudgetOf<Faulty<SharedSWABudget>, SwaProbed> budget;
    budget.begin_step({});
    const auto prompt = joined(match, Rig<SwaProbed>::key(2000, 1));
    const Admission a = try_admit(r.cache, budget, {.prompt = TokenKey{prompt}, .max_new_tokens = page_size});
    REQUIRE_FALSE(a);
    // Selection: FULL 4 + 4 + 4 tokens and SWA 12 tokens, 6 envelopes of the 9 free. The load adds 16 FULL
    // and 8 SWA tokens: FULL 7 pages and SWA 5, 3 envelopes more than are free, nothing evictable.
    CHECK(budget.asks.size() == 1);
    CHECK(a.refusal == AdmissionRefusal{.cause = RefusalCause::no_room,
                                        .missing = {Component::full, 3},
                                        .pages_reclaimable = 0,
                                        .pages_in_flight = 0,
                                        .pages_locked = 10});
    CHECK(a.lock.empty());
    CHECK(locks_of(r, node) == Locks{});
    CHECK(r.cache.loads_in_flight() == 0);
    CHECK(budget.total_offset() == 0);
    CHECK(r.cache.match(TokenKey{match}).host_hit_length == 16);
    r.cache.unlock(std::move(run));
    CHECK(r.broken().empty());
}

// The base budget prepares nothing: a load that its own relief cannot place is refused as
// `load_back_short`, naming the pool, with every pin released and nothing charged.
TEST_CASE("a load-back that stays short refuses as load_back_short and releases every pin") {
    Rig<SwaProbed> r(30, 16);
    const auto match = Rig<SwaProbed>::key(100, 4);
    const NodeRef node = hosted(r, match);
    (void)r.cache.allocator().flush(FlushMode::urgent);
    LockReceipt run = r.cache.lock(r.insert(Rig<SwaProbed>::key(700, 12)));  // 24 of the 29 envelopes
    REQUIRE(drain(r.backend, r.stream));
    BudgetOf<BaseBudget, SwaProbed> budget;
    budget.begin_step({});
    const auto prompt = joined(match, Rig<SwaProbed>::key(2000, 1));
    const Admission a = try_admit(r.cache, budget, {.prompt = TokenKey{prompt}, .max_new_tokens = page_size});
    REQUIRE_FALSE(a);
    // FULL's 4 pages fit the 5 free envelopes; the SWA window's 2 pages then do not.
    CHECK(a.refusal == AdmissionRefusal{.cause = RefusalCause::load_back_short,
                                        .missing = {Component::swa, 1},
                                        .pages_reclaimable = 0,
                                        .pages_in_flight = 0,
                                        .pages_locked = 12});
    CHECK(locks_of(r, node) == Locks{});
    CHECK(r.cache.loads_in_flight() == 0);
    CHECK(budget.total_offset() == 0);
    CHECK(r.cache.match(TokenKey{match}).host_hit_length == 16);
    r.cache.unlock(std::move(run));
    CHECK(r.broken().empty());
}

// Scenario 27: a throw in the middle of admission (during selection, with the device node pinned; while the
// load-back is prepared, with the host match pinned) propagates, and leaves no pin, no charge and nothing queued.
TEST_CASE("pins are released when admission throws, in selection and while preparing the load-back") {
    Fault fault = Fault::none;
    SUBCASE("during selection") { fault = Fault::selection; }
    SUBCASE("while preparing the load-back") { fault = Fault::load_back; }
    Rig<SwaProbed> r(40, 16);
    const auto parent = Rig<SwaProbed>::key(100, 2);
    const auto child = joined(parent, Rig<SwaProbed>::key(900, 2));
    const NodeRef top = r.insert(parent);
    const NodeRef leaf = r.insert(child);
    {
        LockReceipt keep = r.cache.lock(top);  // the parent stays on device, the child goes to host
        REQUIRE(r.cache.evict({Component::full, 2}).backed_up >= 1);
        r.cache.unlock(std::move(keep));
    }
    const MatchResult m = r.cache.match(TokenKey{child});
    REQUIRE(m.device_node == top);
    REQUIRE(m.best_node == leaf);
    const std::uint64_t dropped = dropped_count();
    const std::int64_t protected_full = r.cache.tree().protected_size(Component::full);
    BudgetOf<Faulty<SharedSWABudget>, SwaProbed> budget;
    budget.fault = fault;
    budget.begin_step({.decode_tokens = 4});
    const auto prompt = joined(child, Rig<SwaProbed>::key(2000, 1));
    CHECK_THROWS_AS((void)try_admit(r.cache, budget, {.prompt = TokenKey{prompt}, .max_new_tokens = 4}),
                    std::runtime_error);
    REQUIRE(budget.protected_at_selection.size() == 1);
    CHECK(budget.protected_at_selection[0] == protected_full + 8);  // the device prefix was pinned
    CHECK(budget.asks.size() == (fault == Fault::load_back ? 1u : 0u));
    CHECK(locks_of(r, top) == Locks{});
    CHECK(locks_of(r, leaf) == Locks{});
    CHECK(r.cache.tree().protected_size(Component::full) == protected_full);
    CHECK(dropped_count() == dropped);
    CHECK(budget.total_offset() == 4);
    CHECK(r.cache.loads_in_flight() == 0);
    CHECK(r.cache.match(TokenKey{child}).host_hit_length == 8);
    CHECK(r.broken().empty());
}

// Scenario 28 and the §6.2 FULL ask (page 4, max_new = page): a budget that reads the FULL rows a load adds
// builds the load-back plan once more than the load itself and asks for new_full + extend + page + page; the
// others never walk the tree for it and ask for host_hit + extend + page + page. Here the FULL rows are
// resident behind a host-only SWA window: new_full is 0 while the host hit is 16.
TEST_CASE_TEMPLATE("only budgets that read the FULL load-back rows build the plan for them", B, BaseBudget,
                   PartitionedSWABudget, SharedSWABudget) {
    Rig<SwaProbed> r(40, 16);
    const auto target = Rig<SwaProbed>::key(100, 4);
    const NodeRef node = swa_hosted(r, target);
    BudgetOf<Faulty<B>, SwaProbed> budget({.full_partition_pages = 19, .swa_partition_pages = 19});
    budget.begin_step({});
    const auto prompt = joined(target, Rig<SwaProbed>::key(2000, 1));
    Probe::reset();
    Admission a = try_admit(r.cache, budget, {.prompt = TokenKey{prompt}, .max_new_tokens = page_size});
    REQUIRE(a);
    constexpr bool reads = budget_t<B, SwaFullLayout>::load_back_needs_full_tokens;
    CHECK(reads == std::is_same_v<B, SharedSWABudget>);
    CHECK(Probe::plans == (reads ? 2 : 1));  // the load's own plan, and the budget's when it reads one
    REQUIRE(budget.asks.size() == 1);
    const std::int32_t extend = 4;
    CHECK(budget.asks[0].full_tokens == (reads ? 0 : 16) + extend + page_size + page_size);
    CHECK(budget.asks[0].swa_host_hit == 8);
    CHECK(ack_load(r, a.load_id));
    CHECK(path_holds(r, node, target));
    r.cache.unlock(std::move(a.lock));
    CHECK(r.broken().empty());
}

// The tri-pool: the hybrid budget charges the request's state slot and counts the load's checkpoint from the
// plan; after the load is queued (moves blocked) the request's slot and its extension still fit.
TEST_CASE("the hybrid budget charges a state per admission and the load's checkpoint, and loads byte-exact") {
    Rig<TriProbed> r(96, 16);
    const auto match = Rig<TriProbed>::key(100, 2);
    const NodeRef node = hosted(r, match);
    BudgetOf<Faulty<SharedHybridBudget>, TriProbed> budget;
    budget.begin_step({.decode_tokens = 4});
    const auto prompt = joined(match, Rig<TriProbed>::key(2000, 1));
    Admission a = try_admit(r.cache, budget, {.prompt = TokenKey{prompt}, .max_new_tokens = page_size});
    REQUIRE(a);
    REQUIRE(budget.asks.size() == 1);
    CHECK(budget.asks[0].load_states == 1);
    CHECK(budget.asks[0].full_tokens == 8 + 4 + page_size + page_size);
    CHECK(budget.state_offset() == 1);
    CHECK(r.cache.allocator().moves_blocked());
    StateId own{};
    std::vector<VirtualPage> extension(1);
    CHECK(r.cache.allocator().alloc_state(std::span(&own, 1)));
    CHECK(r.cache.allocator().alloc(extension));
    CHECK(ack_load(r, a.load_id));
    CHECK(r.device_holds(node, match));
    CHECK(r.cache.tree().node_info(node).device[Component::mamba]);
    r.cache.allocator().free_state(std::span<const StateId>(&own, 1));
    r.cache.allocator().free(extension);
    r.cache.unlock(std::move(a.lock));
    CHECK(r.broken().empty());
}

namespace {

// The tri-pool with its Mamba end full of running requests' states (but `free_slots`) and the float holding a
// live request's SWA rows (marked): another slot needs the float to move, which a queued load forbids. `match`
// is on host, with no checkpoint on device to evict. An envelope holds two slots, so a compaction for one slot
// makes two.
struct StateScene {
    Rig<TriProbed> r{96, 16};
    std::vector<TokenId> match = Rig<TriProbed>::key(100, 2);
    std::vector<TokenId> other = Rig<TriProbed>::key(700, 2);
    NodeRef node{};
    std::vector<VirtualPage> live = std::vector<VirtualPage>(2);
    std::vector<StateId> states;
    StateId own{};  // the admitted request's state

    explicit StateScene(std::int32_t free_slots) {
        auto& alloc = r.cache.allocator();
        node = hosted(r, match);
        REQUIRE(alloc.alloc(live));
        REQUIRE(drain(r.backend, r.stream));
        for (std::size_t k = 0; k < live.size(); ++k)
            r.rows().write_page(Component::swa, live[k], other, static_cast<std::int32_t>(k) * page_size);
        while (alloc.available_size(Component::mamba) > 0) {
            REQUIRE(alloc.alloc_state(std::span(&states.emplace_back(), 1)));
        }
        for (std::int32_t k = 0; k < free_slots; ++k) {
            alloc.free_state(std::span<const StateId>(&states.back(), 1));
            states.pop_back();
        }
        REQUIRE(alloc.available_size(Component::mamba) == free_slots);
    }
    template <class Budget>
    Admission admit(Budget& budget) {
        budget.begin_step({});
        const auto prompt = joined(match, Rig<TriProbed>::key(2000, 1));
        return try_admit(r.cache, budget, {.prompt = TokenKey{prompt}, .max_new_tokens = page_size});
    }
    [[nodiscard]] bool live_rows_hold() const {
        for (std::size_t k = 0; k < live.size(); ++k) {
            if (!r.rows().page_holds(Component::swa, live[k], other, static_cast<std::int32_t>(k) * page_size))
                return false;
        }
        return true;
    }
    void finish(Admission& a) {
        auto& alloc = r.cache.allocator();
        if (own.is_valid()) alloc.free_state(std::span<const StateId>(&own, 1));
        alloc.free_state(states);
        alloc.free(live);
        if (!a.lock.empty()) r.cache.unlock(std::move(a.lock));
        CHECK(r.broken().empty());
    }
};

}  // namespace

// The hybrid budget compacts for the load's checkpoint and the request's own state before the load is queued.
// `SharedSWABudget`, the same joint budget without states, does not: with no slot free its load finds none
// (refused); with one free the load takes it and the request's own state then finds none while the load is in
// flight (admitted, but over-admitted). With one free, a hybrid demand that left out the request's own state
// would fit without compacting and over-admit the same way.
TEST_CASE("the hybrid budget makes room for states before the load; a budget that ignores them fails or over-admits") {
    std::int32_t free_slots = 0;
    SUBCASE("no slot free") {}
    SUBCASE("one slot free") { free_slots = 1; }
    CAPTURE(free_slots);
    {
        StateScene s(free_slots);
        BudgetOf<SharedHybridBudget, TriProbed> budget;
        Admission a = s.admit(budget);
        REQUIRE(a);
        REQUIRE(a.load_id != 0);
        CHECK(s.r.cache.allocator().moves_blocked());
        std::vector<VirtualPage> extension(1);
        CHECK(s.r.cache.allocator().alloc_state(std::span(&s.own, 1)));  // no move needed: room was made
        CHECK(s.r.cache.allocator().alloc(extension));
        CHECK(ack_load(s.r, a.load_id));
        REQUIRE(drain(s.r.backend, s.r.stream));
        CHECK(s.r.device_holds(s.node, s.match));
        CHECK(s.r.cache.tree().node_info(s.node).device[Component::mamba]);
        CHECK(s.live_rows_hold());  // moved with the float
        s.r.cache.allocator().free(extension);
        s.finish(a);
    }
    {
        StateScene s(free_slots);
        BudgetOf<SharedSWABudget, TriProbed> budget;
        Admission a = s.admit(budget);
        if (free_slots == 0) {
            REQUIRE_FALSE(a);
            CHECK(a.refusal.cause == RefusalCause::load_back_short);
            CHECK(a.refusal.missing.component == Component::mamba);
            CHECK(s.r.cache.loads_in_flight() == 0);
            CHECK(s.r.cache.match(TokenKey{s.match}).device_length == 0);
            CHECK(s.r.host_holds(s.node, Component::mamba, s.match));
        } else {
            REQUIRE(a);
            CHECK(s.r.cache.allocator().moves_blocked());
            CHECK_FALSE(s.r.cache.allocator().alloc_state(std::span(&s.own, 1)));  // over-admitted
            s.own = StateId{};
            CHECK(ack_load(s.r, a.load_id));
            CHECK(s.r.device_holds(s.node, s.match));
        }
        CHECK(s.live_rows_hold());
        s.finish(a);
    }
}

// Write-through: the host hit's copy came from the write-through lifecycle, the device is full, and the only
// node eviction may take is a written-through one (dropped with no copy: its host copy stands); another node's
// write-through is queued, so it is device-locked. The reclaim takes the first and leaves the second, and the
// load shares the controller with the write. Everything is checked by rows after the acks.
TEST_CASE("try_admit reclaims and loads a host hit under write-through while another node's write is queued") {
    using P = Policies<SwaFullLayout, SeparateHostPools>;
    Rig<P> r(40, 32, write_through);
    auto& alloc = r.cache.allocator();
    const auto match = Rig<P>::key(100, 4);
    const auto spare = Rig<P>::key(300, 8);
    const NodeRef node = r.insert(match);
    const NodeRef spare_node = r.insert(spare);
    (void)r.cache.start_writing();
    (void)r.run_transfers();
    REQUIRE(r.cache.writing_check().size() == 4);
    const Eviction ev = r.cache.evict({Component::full, 4});  // the older node
    REQUIRE(ev.backed_up == 0);
    REQUIRE_FALSE(r.cache.tree().node_info(node).device[Component::full]);
    REQUIRE(r.cache.tree().node_info(spare_node).device[Component::full]);
    REQUIRE(r.host_holds(node, Component::full, match));
    const auto queued = Rig<P>::key(500, 3);
    const NodeRef writing = r.insert(queued);
    REQUIRE(r.inserted.writes == 2);
    (void)alloc.flush(FlushMode::urgent);
    REQUIRE(drain(r.backend, r.stream));
    std::vector<VirtualPage> filler;  // nothing free: the load's room comes from eviction
    for (VirtualPage v; alloc.alloc_full(std::span(&v, 1));) filler.push_back(v);

    BudgetOf<SharedSWABudget, P> budget;
    budget.begin_step({.decode_tokens = 4});
    const auto prompt = joined(match, Rig<P>::key(2000, 1));
    Admission a = try_admit(r.cache, budget, {.prompt = TokenKey{prompt}, .max_new_tokens = page_size});
    REQUIRE(a);
    CHECK(a.node == node);
    CHECK(a.prefix_length == 16);
    REQUIRE(a.load_id != 0);
    CHECK_FALSE(r.cache.tree().node_info(spare_node).device[Component::full]);  // reclaimed, no copy made
    CHECK(r.cache.writes_in_flight() == 2);
    CHECK(r.device_holds(writing, queued));

    CHECK(r.cache.start_writing() == 2);
    CHECK(ack_load(r, a.load_id));
    const std::span<const WriteDone> writes = r.cache.writing_check();
    REQUIRE(writes.size() == 2);
    CHECK(writes[0].committed);
    CHECK(writes[1].committed);
    CHECK(path_holds(r, node, match));
    CHECK(r.host_holds(spare_node, Component::full, spare));  // the copy the eviction relied on
    CHECK(r.host_holds(writing, Component::full, queued));
    CHECK(r.host_holds(writing, Component::swa, queued));
    r.cache.unlock(std::move(a.lock));
    CHECK(locks_of(r, node) == Locks{});
    CHECK(locks_of(r, writing) == Locks{});
    alloc.free(filler);
    CHECK(r.broken().empty());
}

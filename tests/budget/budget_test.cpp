// Budgets (reference §6.1) on HiCache over a manual HostBackend: what each budget charges and refuses, with the
// refusal's breakdown.

#include <stdexcept>
#include <vector>

#include <unikv/budget/base_budget.hpp>
#include <unikv/budget/partitioned_swa_budget.hpp>
#include <unikv/budget/shared_hybrid_budget.hpp>
#include <unikv/budget/shared_swa_budget.hpp>

#include "hicache/hicache_support.hpp"

using namespace hicache_test;

namespace {

// What the tree saw: load-back plans built, and the host locks of one watched node at every `evict_host`.
struct Probe {
    static inline int plans = 0;
    static inline bool watching = false;
    static inline NodeRef watched{};
    static inline std::vector<per_component<std::uint32_t>> host_pins_at_evict_host;
    static void reset() {
        plans = 0;
        watching = false;
        host_pins_at_evict_host.clear();
    }
};

// The fast tree, counting its plans and watching its host evictions.
template <class... Cs>
class ProbedTree : public RadixTree<Cs...> {
public:
    using RadixTree<Cs...>::RadixTree;
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
enum class Fault : std::uint8_t { none, selection, after_reclaim };
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
        template <class C>
        Selection check_prefill(const C& cache, const PrefillAsk& ask) const {
            protected_at_selection.push_back(cache.tree().protected_size(Component::full));
            if (fault == Fault::selection) throw std::runtime_error("injected during selection");
            return base::check_prefill(cache, ask);
        }
        template <class C>
        BudgetCheck prepare_load_back(C& cache, const LoadBackAsk& ask) {
            asks.push_back(ask);
            const BudgetCheck out = base::prepare_load_back(cache, ask);
            if (fault == Fault::after_reclaim) throw std::runtime_error("injected after reclaim");
            return out;
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
    REQUIRE(r.cache.evict(Component::full, static_cast<std::int64_t>(key.size())).dropped == 0);
    REQUIRE_FALSE(r.cache.tree().node_info(node).device[Component::full]);
    return node;
}

// `key` (4 pages) cached with FULL resident and SWA on host only: the FULL-locked leaf gives up its SWA, whose
// last window is written back. The node is split at one window: the upper part is a plain tombstone.
template <class P>
NodeRef swa_hosted(Rig<P>& r, const std::vector<TokenId>& key) {
    const NodeRef node = r.insert(key);
    LockReceipt full_only = r.cache.lock(node, {.components = ComponentMask::of(Component::full)});
    REQUIRE(r.cache.evict(Component::swa, static_cast<std::int64_t>(key.size())).backed_up == 1);
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
    CHECK(budget.check_prefill(r.cache, fits));
    budget.begin_step({.decode_tokens = 8});  // two pages pre-charged: the same ask is short by them
    const Selection s = budget.check_prefill(r.cache, fits);
    REQUIRE_FALSE(s);
    CHECK(s.check.refusal == AdmissionRefusal{.cause = RefusalCause::no_room,
                                              .component = Component::full,
                                              .pages_short = 2,
                                              .pages_reclaimable = 4,
                                              .pages_in_flight = 0,
                                              .pages_locked = 0});
    CHECK(to_string(s.check.refusal) ==
          "no room: full short by 2 pages (reclaimable 4, in flight 0, locked 0)");
    // Each admission charges its extension, a page and its decode.
    budget.begin_step({.decode_tokens = 8});
    budget.reserve(r.cache, {.extend = 5, .max_new = 3});
    CHECK(budget.total_offset() == 8 + 8 + 4 + 3);
}

TEST_CASE("a request beyond the chunk budget is cut to whole pages of it, and an exhausted chunk refuses") {
    Rig<SwaProbed> r(40, 16);
    BudgetOf<SharedSWABudget, SwaProbed> budget;
    budget.begin_step({.chunk_tokens = 10});
    const Selection s = budget.check_prefill(r.cache, {.extend = 20, .max_new = 4});
    REQUIRE(s);
    CHECK(s.ask.extend == 8);
    CHECK(s.ask.chunked);
    CHECK(s.ask.max_new == 0);  // no decode while chunked
    budget.reserve(r.cache, s.ask);
    CHECK(budget.chunk_left() == 2);
    CHECK(budget.swa_offset() == 8 + page_size);  // the SWA estimate of the chunk: one window, one page
    const Selection none = budget.check_prefill(r.cache, {.extend = 4, .max_new = 4});
    REQUIRE_FALSE(none);
    CHECK(none.check.refusal.cause == RefusalCause::chunk_exhausted);
    CHECK(budget.check_prefill(r.cache, {.extend = 2, .max_new = 4}));  // what is left fits a short request
}

TEST_CASE("a static SWA partition refuses what the shared arena admits, naming the SWA pages it lacks") {
    Rig<SwaProbed> r(40, 16);
    BudgetOf<PartitionedSWABudget, SwaProbed> split({.full_partition_pages = 30, .swa_partition_pages = 4});
    BudgetOf<SharedSWABudget, SwaProbed> shared;
    split.begin_step({});
    shared.begin_step({});
    // SWA estimate of 16 + 4 tokens, window 8: 8 past the window, one window, one page = 5 pages.
    const PrefillAsk ask{.extend = 16, .max_new = 4};
    const Selection s = split.check_prefill(r.cache, ask);
    REQUIRE_FALSE(s);
    CHECK(s.check.refusal == AdmissionRefusal{.cause = RefusalCause::no_room,
                                              .component = Component::swa,
                                              .pages_short = 1,
                                              .pages_reclaimable = 0,
                                              .pages_in_flight = 0,
                                              .pages_locked = 0});
    CHECK(shared.check_prefill(r.cache, ask));
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
    CHECK(budget.check_prefill(r.cache, ask));
    // Two more FULL pages than that exceed the spare bytes: refused, short by exactly those.
    const Selection s = budget.check_prefill(r.cache, {.extend = 8, .max_new = ask.max_new + 2 * page_size});
    REQUIRE_FALSE(s);
    CHECK(s.check.refusal.component == Component::full);
    CHECK(s.check.refusal.pages_short == 1);
    CHECK(s.check.refusal.pages_locked == 5);
    r.cache.unlock(std::move(run));
    CHECK(r.broken().empty());
}

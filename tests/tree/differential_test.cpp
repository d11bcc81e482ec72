// Randomized differential test: RadixTree against ReferenceTree, operation by operation.
//
// Both trees get the same random sequence of match / insert / lock / unlock / early SWA release / evict /
// host-evict / host copy / backup completion / load-back commit / retention calls, read-only peeks (before every
// match, which must then give the peek's lengths, and between backup completions), storage prefetch grafts
// (insert_host: host copies past a cached prefix, some from past it, some breaking a precondition), and, under a
// write-through threshold, the write-throughs inserts emit: committed (set_host), skipped, or dropped (drop_host)
// after a failed copy or as stored (no second write), possibly after splits of the node. After each call the results
// must be equal (lengths, pages, actions, freed units, thrown or not), and so must the sizes, node counts and KV
// events. Every action list is also checked against the locks held at the time: nothing locked is ever freed.
// Every few operations the whole structure is compared and RadixTree's own invariant check runs.
//
// A divergence is reported with the configuration, seed, operation index and reason. The test installs a
// counting dropped-result handler, so the action lists and receipts that a divergence leaves unexecuted while the
// failure unwinds are counted instead of aborting the process (the default handler aborts in debug builds).
//
// UNIKV_TREE_FUZZ_OPS sets the total operation count (default 35000, split over the configurations below: the
// 5000 per configuration that the coverage checks in `report` need; run 105000 or more off CI);
// UNIKV_TREE_FUZZ_SEED the seed (default fixed, so CI is reproducible).

#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "broken.hpp"
#include "fuzz_env.hpp"
#include "tree_test_support.hpp"

namespace {

using namespace unikv;
using unikv::test::canon;
using unikv::test::env_or;

struct Divergence : std::runtime_error {
    using std::runtime_error::runtime_error;
};

// Counts dropped results instead of aborting, for as long as it lives.
std::atomic<std::int64_t> drops{0};
void count_any_drop(Dropped) noexcept { ++drops; }
struct CountDrops {
    DroppedHandler previous = set_dropped_handler(&count_any_drop);
    CountDrops() { drops = 0; }
    ~CountDrops() { set_dropped_handler(previous); }
    CountDrops(const CountDrops&) = delete;
    CountDrops& operator=(const CountDrops&) = delete;
};

template <class... Cs>
class Differential {
public:
    using Fast = RadixTree<Cs...>;
    using Ref = ReferenceTree<Cs...>;
    using Set = tree_component_set<Cs...>;

    Differential(TreeConfig config, std::uint64_t seed)
        : config_(config), fast_(config), ref_(config), rng_(seed), seed_(seed) {}

    // What the run exercised (reported, and checked to be non-trivial).
    std::map<std::string, std::int64_t> stats;

    void run(std::int64_t ops) {
        for (op_ = 0; op_ < ops; ++op_) {
            try {
                step();
            } catch (const unikv::logic_error& e) {
                diverged(std::string("unexpected logic_error: ") + e.what());
            }
            compare_sizes();
            stats["max nodes"] = std::max<std::int64_t>(stats["max nodes"], static_cast<std::int64_t>(fast_.node_count()));
            if (op_ % 64 == 0) compare_structure();
        }
        release_everything();
        compare_structure();
    }

    [[nodiscard]] const TreeConfig& config() const noexcept { return config_; }

    void count(const TreeActions& actions) {
        static const char* names[] = {"action backup",     "action recover_swa_locked_full", "action free_pages",
                                      "action free_swa",   "action free_states",             "action free_host",
                                      "action write_through"};
        for (const TreeAction& a : actions.list()) ++stats[names[static_cast<int>(a.kind)]];
    }

private:
    // ---- random choices ----
    int pick(int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng_); }
    bool chance(int percent) { return pick(100) < percent; }
    int ps() const { return config_.page_size.tokens; }

    Component some_component() {
        std::vector<Component> in;
        for (Component c : {Component::full, Component::swa, Component::mamba})
            if (Set::mask.has(c)) in.push_back(c);
        return in[static_cast<std::size_t>(pick(static_cast<int>(in.size())))];
    }

    // A key: a prefix of an earlier key, extended by random pages over a tiny alphabet (lots of sharing).
    std::pair<std::vector<TokenId>, KeyNamespace> some_key() {
        std::vector<TokenId> key;
        KeyNamespace ns{static_cast<std::uint64_t>(pick(4) == 0 ? 1 : 0)};
        if (!history_.empty() && chance(75)) {
            const auto& [old, old_ns] = history_[static_cast<std::size_t>(pick(static_cast<int>(history_.size())))];
            const int pages = static_cast<int>(old.size()) / ps();
            key.assign(old.begin(), old.begin() + static_cast<std::ptrdiff_t>(pick(pages + 1) * ps()));
            ns = old_ns;
        }
        key_prefix_ = static_cast<std::int32_t>(key.size());
        const int extra = chance(30) ? 0 : 1 + pick(6);
        for (int i = 0; i < extra * ps(); ++i) key.push_back(pick(3));
        if (key.size() > static_cast<std::size_t>(24 * ps())) key.resize(static_cast<std::size_t>(24 * ps()));
        return {key, ns};
    }

    // ---- checks ----
    [[noreturn]] void diverged(const std::string& what) const {
        std::ostringstream s;
        s << "seed " << seed_ << ", op " << op_ << " (" << last_op_ << "): " << what;
        throw Divergence(s.str());
    }
    void expect(bool ok, const char* what) const {
        if (!ok) diverged(what);
    }

    void compare_sizes() {
        for (Component c : {Component::full, Component::swa, Component::mamba}) {
            expect(fast_.evictable_size(c) == ref_.evictable_size(c), "evictable size differs");
            expect(fast_.protected_size(c) == ref_.protected_size(c), "protected size differs");
            expect(fast_.host_size(c) == ref_.host_size(c), "host size differs");
            expect(fast_.evictable_size(c) >= 0 && fast_.protected_size(c) >= 0, "negative size");
        }
        expect(fast_.node_count() == ref_.node_count(), "node count differs");
        expect(fast_.take_events() == ref_.take_events(), "KV events differ");
        // Whether host copies form chains from the root (a write-policy switch's check); which node breaks them
        // first depends on each tree's node order.
        const bool broken = static_cast<bool>(fast_.host_chain_break());
        expect(broken == static_cast<bool>(ref_.host_chain_break()), "host chains differ");
        ++stats[broken ? "host chains broken" : "host chains whole"];
    }

    // Every node, keyed by namespace and full path tokens, with everything the contract exposes.
    template <class Tree>
    std::map<std::pair<std::uint64_t, std::vector<TokenId>>, std::string> snapshot(const Tree& t) const {
        std::map<std::pair<std::uint64_t, std::vector<TokenId>>, std::string> out;
        std::set<int> seen_pages;
        for (NodeRef n : t.nodes()) {
            const NodeInfo info = t.node_info(n);
            std::vector<TokenId> path = info.tokens;
            for (NodeRef p = info.parent; !p.is_root(); p = t.node_info(p).parent) {
                const auto up = t.node_info(p).tokens;
                path.insert(path.begin(), up.begin(), up.end());
            }
            std::ostringstream s;
            s << info.start << '+' << info.length << " ch" << info.children << " r" << int(info.retention) << " w"
              << int(info.window_class) << " st" << info.state.value() << " p[";
            for (auto p : info.pages) {
                s << p.value() << ',';
                expect(seen_pages.insert(p.value()).second, "a page is held by two nodes");
            }
            s << ']';
            for (Component c : all_components) {
                s << " c" << index_of(c) << (info.device[c] ? 'D' : '-') << (info.backup_pending[c] ? 'P' : '-')
                  << (info.write_through_pending[c] ? 'W' : '-') << (info.stored[c] ? 'S' : '-') << " l"
                  << info.device_locks[c] << '/' << info.host_locks[c] << " h[";
                for (auto h : info.host[c]) s << h.value() << ',';
                s << ']';
            }
            s << " hits" << info.hits;
            out[{info.ns.value, path}] = s.str();
        }
        return out;
    }

    void compare_structure() {
        expect(snapshot(fast_) == snapshot(ref_), "tree structure differs");
        if (const std::string bad = test_verify::broken(fast_); !bad.empty()) diverged("RadixTree: " + bad);
        if (const std::string bad = test_verify::broken(ref_); !bad.empty()) diverged("ReferenceTree: " + bad);
    }

    // Pages, states and host pages currently protected by locks (collected before an eviction).
    struct Protected {
        std::set<int> pages, swa_pages, states, host;
    };
    Protected protected_now() const {
        Protected p;
        for (NodeRef n : fast_.nodes()) {
            const NodeInfo info = fast_.node_info(n);
            // free_pages frees FULL rows and the SWA rows bound to them; free_swa only the SWA rows.
            for (auto page : info.pages) {
                if (info.device_locks[Component::full] > 0 || info.device_locks[Component::swa] > 0)
                    p.pages.insert(page.value());
                if (info.device_locks[Component::swa] > 0) p.swa_pages.insert(page.value());
            }
            if (info.device_locks[Component::mamba] > 0 && info.state.is_valid()) p.states.insert(info.state.value());
            for (Component c : all_components)
                if (info.host_locks[c] > 0)
                    for (auto h : info.host[c]) p.host.insert(h.value() + static_cast<int>(index_of(c)) * 1'000'000);
        }
        return p;
    }
    void expect_unprotected(const TreeActions& actions, const Protected& p) const {
        for (const TreeAction& a : actions.list()) {
            for (auto page : actions.pages(a)) {
                if (a.kind == ActionKind::free_pages) expect(!p.pages.count(page.value()), "freed a FULL-locked page");
                if (a.kind == ActionKind::free_swa) expect(!p.swa_pages.count(page.value()), "dropped locked SWA rows");
            }
            if (a.kind == ActionKind::free_states)
                for (auto s : actions.states(a)) expect(!p.states.count(s.value()), "freed a locked Mamba state");
            for (auto h : actions.host_pages(a))
                expect(!p.host.count(h.value() + static_cast<int>(a.component) * 1'000'000), "freed a host-locked copy");
        }
    }
    // No page the tree still holds may be returned for freeing.
    void expect_not_held(const TreeActions& actions) const {
        const auto& list = actions.list();
        if (std::none_of(list.begin(), list.end(), [](const TreeAction& a) { return a.kind == ActionKind::free_pages; }))
            return;
        std::set<int> held;
        for (NodeRef n : fast_.nodes())
            for (auto page : fast_.node_info(n).pages) held.insert(page.value());
        for (const TreeAction& a : actions.list())
            if (a.kind == ActionKind::free_pages)
                for (auto page : actions.pages(a)) expect(!held.count(page.value()), "freed a page the tree still holds");
    }

    template <class F>
    bool threw(F&& f) {
        try {
            f();
            return false;
        } catch (const unikv::logic_error&) {
            return true;
        }
    }

    template <class Tree>
    std::pair<std::int32_t, std::int32_t> span_of(const Tree& t, NodeRef n) const {
        if (n.is_root()) return {0, 0};
        const NodeInfo info = t.node_info(n);
        return {info.start, info.length};
    }

    // ---- operations ----
    void step() {
        if (!writes_.empty() && chance(15)) return do_write();
        const int dice = pick(100);
        if (dice < 24) return do_insert();
        if (dice < 38) return do_match();
        if (dice < 42) return do_insert_host();
        if (dice < 52) return receipts_.size() < 8 ? do_lock() : do_unlock();
        if (dice < 61) return do_unlock();
        if (dice < 74) return do_evict();
        if (dice < 81) return do_evict_host();
        if (dice < 90) return do_set_host();
        if (dice < 92) return do_load_back();
        if (dice < 95) return open_loads_.size() < 3 ? do_begin_load() : do_finish_load();
        if (dice < 96) return do_finish_load();
        if (dice < 97) return do_retention();
        if (dice < 99) return do_foreign_receipt();
        return do_match();
    }

    struct Matched {
        MatchResult fast, ref;
    };
    // The read-only query on both trees, which must agree (and, checked by the callers, give a match's lengths).
    PrefixPeek peek_both(TokenKey key) {
        const PrefixPeek a = std::as_const(fast_).peek_prefix(key);
        const PrefixPeek b = std::as_const(ref_).peek_prefix(key);
        expect(a == b, "peek lengths differ");
        expect(a.device_length <= a.best_length, "peek: device length beyond best length");
        return a;
    }

    Matched match_both(TokenKey key, MatchOptions options) {
        const PrefixPeek p = peek_both(key);  // first: a peek must change nothing the match then sees
        Matched m{fast_.match_prefix(key, options), ref_.match_prefix(key, options)};
        const auto& a = m.fast;
        const auto& b = m.ref;
        expect(p.device_length == a.device_length, "peek device length differs from the match's");
        if (options.host_hits == HostHits::include) {
            expect(p.best_length == a.best_length, "peek best length differs from the match's");
            ++stats["peek checked with host hits"];
        }
        expect(a.device_length == b.device_length && a.best_length == b.best_length &&
                   a.host_hit_length == b.host_hit_length && a.swa_host_hit_length == b.swa_host_hit_length &&
                   a.full_length == b.full_length && a.swa_branching_length == b.swa_branching_length &&
                   a.mamba_branching_length == b.mamba_branching_length,
               "match lengths differ");
        expect(std::equal(a.device_pages.begin(), a.device_pages.end(), b.device_pages.begin(), b.device_pages.end()),
               "match pages differ");
        expect(span_of(fast_, a.device_node) == span_of(ref_, b.device_node), "match device node differs");
        expect(span_of(fast_, a.best_node) == span_of(ref_, b.best_node), "match best node differs");
        expect(static_cast<std::int32_t>(a.device_pages.size()) * ps() == a.device_length, "page count != length");
        expect(std::distance(a.device_pages.begin(), a.device_pages.end()) ==
                   static_cast<std::ptrdiff_t>(a.device_pages.size()),
               "page runs iterate a different count than their size");
        expect(a.device_pages.runs().size() == b.device_pages.runs().size(), "page runs differ in count");
        if (a.device_length > 0) ++stats["match device hit"];
        if (a.host_hit_length > 0) ++stats["match host hit"];
        if (a.swa_host_hit_length > 0) ++stats["match swa host hit"];
        if (a.swa_branching_length > 0) ++stats["match swa branching"];
        if (a.mamba_branching_length > 0) ++stats["match mamba branching"];
        return m;
    }

    void do_match() {
        last_op_ = "match";
        auto [key, ns] = some_key();
        const bool host = chance(50);
        const auto m = match_both(TokenKey{key, ns}, MatchOptions{host ? HostHits::include : HostHits::exclude});
        if (host) compare_load_back_plans(m.fast.best_node, m.ref.best_node);
        // The device part's rows, read again from its node alone, are the match's pages on both trees.
        std::vector<VirtualPage> a(static_cast<std::size_t>(m.fast.device_length / ps())), b(a.size());
        const bool ta = threw([&] { a.resize(fast_.prefix_pages(m.fast.device_node, a)); });
        const bool tb = threw([&] { b.resize(ref_.prefix_pages(m.ref.device_node, b)); });
        expect(!ta && !tb, "prefix_pages refused a device match's node");
        expect(a == b && std::equal(a.begin(), a.end(), m.fast.device_pages.begin(), m.fast.device_pages.end()),
               "prefix_pages differs from the match's pages");
    }

    void do_insert() {
        last_op_ = "insert";
        auto [key, ns] = some_key();
        if (key.empty()) return;
        const TokenKey k{key, ns};
        std::vector<VirtualPage> pages;
        if (chance(80)) {  // a request that reused the cached prefix
            const auto m = match_both(k, {});
            pages.assign(m.fast.device_pages.begin(), m.fast.device_pages.end());
        }
        while (pages.size() * static_cast<std::size_t>(ps()) < key.size()) pages.emplace_back(next_page_++);
        InsertValues v;
        v.pages = pages;
        const auto len = static_cast<std::int32_t>(key.size());
        if constexpr (Set::has_swa) {
            const int mode = pick(10);
            const std::int32_t tail = std::max(0, len - config_.swa_window) / ps() * ps();
            v.swa_evicted = mode < 4 ? 0 : mode < 8 ? tail : pick(len / ps() + 1) * ps();
        }
        if (Set::has_mamba && chance(60)) v.state = StateId{next_state_++};
        v.retention = static_cast<std::uint8_t>(chance(85) ? 0 : 1 + pick(2));
        v.window_class = static_cast<std::uint8_t>(chance(50) ? 0 : 1 + pick(2));
        auto a = fast_.insert(k, v);
        auto b = ref_.insert(k, v);
        expect(a.prefix_length == b.prefix_length, "insert prefix length differs");
        expect(a.beside_host == b.beside_host, "insert beside_host differs");
        if (a.beside_host) ++stats["insert beside a host copy"];
        expect(canon(a.actions) == canon(b.actions), "insert actions differ");
        expect(span_of(fast_, a.node) == span_of(ref_, b.node), "insert end node differs");
        expect_not_held(a.actions);
        count(a.actions);
        for (std::size_t i = 0; i < a.actions.size(); ++i) {
            const TreeAction& w = a.actions.list()[i];
            if (w.kind != ActionKind::write_through) continue;
            const auto n = static_cast<int>(a.actions.pages(w).size() + a.actions.states(w).size());
            writes_.push_back({w.node, b.actions.list()[i].node, w.component, n, false});
            if (chance(50)) do_write(writes_.size() - 1);  // most are committed or skipped at once
        }
        a.actions.mark_executed();
        b.actions.mark_executed();
        history_.emplace_back(key, ns);
        if (history_.size() > 64) history_.erase(history_.begin());
    }

    // A storage prefetch: host copies of a key's pages from `from` on, with ids from the host page source the
    // backups use. `from` mostly lies within the part the key shares with an earlier key (usually cached), else
    // anywhere in it (often past the cached part: nothing may change). One call in 25 breaks a precondition.
    // Both trees must agree on the outcome, the pages handed back and the end node; every page given is either
    // handed back or held on the key's path; a graft is a host hit of the whole key, whose load-back plans agree
    // (and, sometimes, are executed).
    void do_insert_host() {
        last_op_ = "insert_host";
        auto [key, ns] = some_key();
        const auto len = static_cast<std::int32_t>(key.size());
        std::int32_t from = (chance(70) ? pick(key_prefix_ / ps() + 1) : pick(len / ps() + 1)) * ps();
        int full_count = (len - from) / ps();
        int swa_count = Set::has_swa ? std::min((config_.swa_window + ps() - 1) / ps(), len / ps()) : 0;
        bool has_state = Set::has_mamba;
        bool bad = len == 0;
        HostPage invalid_at{};  // a page to make invalid (none: all valid)
        if (chance(4)) {
            bad = true;
            switch (pick(5)) {
                case 0: ++full_count; break;
                case 1: ++swa_count; break;
                case 2: has_state = !has_state; break;
                case 3: from += len + ps(); break;
                default: invalid_at = HostPage{next_host_}; break;
            }
        }
        std::vector<HostPage> full, swa;
        for (int i = 0; i < full_count; ++i) full.emplace_back(next_host_ + i);
        for (int i = 0; i < swa_count; ++i) swa.emplace_back(next_host_ + full_count + i);
        const HostPage state = has_state ? HostPage{next_host_ + full_count + swa_count} : HostPage{};
        next_host_ += full_count + swa_count + 1 + 64;
        if (invalid_at.is_valid()) {
            for (auto* pages : {&full, &swa})
                for (HostPage& h : *pages) h = h == invalid_at ? HostPage{} : h;
            if (full.empty() && swa.empty()) bad = len == 0;  // nothing to spoil
        }
        const HostInsertValues v{.from = from, .full = full, .swa = swa, .state = state};
        const TokenKey k{key, ns};
        const std::size_t nodes_before = fast_.node_count();
        const per_component<std::int64_t> host_before{
            {fast_.host_size(Component::full), fast_.host_size(Component::swa), fast_.host_size(Component::mamba)}};
        HostInsertResult a, b;
        const bool ta = threw([&] { a = fast_.insert_host(k, v); });
        const bool tb = threw([&] { b = ref_.insert_host(k, v); });
        expect(ta == tb, "insert_host precondition differs");
        expect(ta == bad, bad ? "insert_host accepted a broken call" : "insert_host rejected a valid call");
        if (ta) {
            ++stats["insert_host rejected"];
            return;
        }
        expect(a.grafted == b.grafted, "insert_host outcome differs");
        expect(a.unused == b.unused, "insert_host handed back different pages");
        expect(span_of(fast_, a.node) == span_of(ref_, b.node), "insert_host node differs");
        const NodeInfo na = fast_.node_info(a.node);
        const NodeInfo nb = ref_.node_info(b.node);
        expect(na.host == nb.host && na.device == nb.device && na.pages == nb.pages && na.children == nb.children,
               "insert_host end node differs");
        // Every page given is handed back or held on the key's path, once.
        std::vector<NodeInfo> path;
        for (NodeRef x = a.node; !x.is_root(); x = path.back().parent) path.push_back(fast_.node_info(x));
        for (Component c : {Component::full, Component::swa, Component::mamba}) {
            std::vector<HostPage> given = c == Component::full ? full : swa;
            if (c == Component::mamba) given.assign(state.is_valid() ? 1 : 0, state);
            std::vector<HostPage> seen = a.unused[c];
            for (const NodeInfo& info : path)
                for (HostPage h : info.host[c])
                    if (std::find(given.begin(), given.end(), h) != given.end()) seen.push_back(h);
            std::sort(given.begin(), given.end());
            std::sort(seen.begin(), seen.end());
            expect(seen == given, "insert_host lost or duplicated a host page");
            if (a.unused[c].size() < given.size()) ++stats[c == Component::full ? "insert_host took FULL"
                                                             : c == Component::swa ? "insert_host took SWA"
                                                                                   : "insert_host took a state"];
        }
        if (!a.grafted) {
            expect(fast_.node_count() == nodes_before, "insert_host changed the tree without grafting");
            for (Component c : {Component::full, Component::swa, Component::mamba})
                expect(fast_.host_size(c) == host_before[c], "insert_host changed host sizes without grafting");
            ++stats["insert_host not grafted"];
            return;
        }
        ++stats["insert_host grafted"];
        if (fast_.node_count() > nodes_before) ++stats["insert_host added nodes"];
        history_.emplace_back(key, ns);
        if (history_.size() > 64) history_.erase(history_.begin());
        if (chance(50)) {
            const auto m = match_both(k, MatchOptions{HostHits::include});
            expect(m.fast.best_length == len, "a grafted key is not a host hit to its end");
            compare_load_back_plans(m.fast.best_node, m.ref.best_node);
            if (chance(30)) execute_plan(k, m.fast.best_node, len);
        }
    }

    void do_lock() {
        last_op_ = "lock";
        auto [key, ns] = some_key();
        const auto m = match_both(TokenKey{key, ns}, MatchOptions{chance(30) ? HostHits::include : HostHits::exclude});
        const bool best = chance(50);
        LockOptions o;
        o.tier = chance(25) ? Tier::host : Tier::device;
        if (o.tier == Tier::device && chance(4)) {  // a device lock without Full is a caller error on both
            o.components = ComponentMask::of(Component::swa).with(Component::mamba);
            const NodeRef x = best ? m.fast.best_node : m.fast.device_node;
            const NodeRef y = best ? m.ref.best_node : m.ref.device_node;
            expect(threw([&] { (void)fast_.lock(x, o); }) && threw([&] { (void)ref_.lock(y, o); }),
                   "a device lock without Full was accepted");
            ++stats["lock without Full rejected"];
            return;
        }
        if (chance(25)) {
            o.components = ComponentMask::of(Component::full);
            if (chance(50)) o.components = o.components.with(Component::swa);
            if (chance(50)) o.components = o.components.with(Component::mamba);
        }
        auto a = fast_.lock(best ? m.fast.best_node : m.fast.device_node, o);
        auto b = ref_.lock(best ? m.ref.best_node : m.ref.device_node, o);
        expect(a.swa_segment_start() == b.swa_segment_start(), "SWA segment start differs");
        receipts_.emplace_back(std::move(a), std::move(b));
        stats["max receipts"] = std::max<std::int64_t>(stats["max receipts"], static_cast<std::int64_t>(receipts_.size()));
    }

    void do_unlock() {
        last_op_ = "unlock";
        if (receipts_.empty()) return;
        const auto i = static_cast<std::size_t>(pick(static_cast<int>(receipts_.size())));
        auto& [a, b] = receipts_[i];
        if (a.holds(Component::swa) && chance(30)) {
            last_op_ = "release_swa";
            fast_.release_swa(a);
            ref_.release_swa(b);
            return;
        }
        fast_.unlock(std::move(a));
        ref_.unlock(std::move(b));
        receipts_.erase(receipts_.begin() + static_cast<std::ptrdiff_t>(i));
    }

    // A receipt replayed on the wrong tree is rejected and changes nothing.
    // One write-through in flight: a pending one is committed (70%) or skipped; a committed one is acknowledged
    // (60%) or dropped (drop_host: a failed copy, or one the store holds). A node split since is seen in the page
    // counts.
    struct Write {
        NodeRef fast, ref;
        Component c;
        int count;  // pages (1 for Mamba) of the action
        bool committed;
    };
    void do_write(std::size_t i) {
        last_op_ = "write_through";
        Write& w = writes_[i];
        const bool split = fast_.contains(w.fast) && w.c != Component::mamba &&
                           static_cast<int>(fast_.node_info(w.fast).pages.size()) != w.count;
        bool done = true;
        if (!w.committed && chance(70)) {
            const auto host = unikv::test::hpages(next_host_, w.count);
            next_host_ += w.count + 64;
            const bool ta = threw([&] { fast_.set_host(w.fast, w.c, host); });
            const bool tb = threw([&] { ref_.set_host(w.ref, w.c, host); });
            expect(ta == tb, "write-through commit precondition differs");
            ++stats[ta ? "write_through commit rejected" : split ? "write_through committed after a split"
                                                               : "write_through committed"];
            done = ta;
            w.committed = true;
        } else if (!w.committed) {
            const bool ta = threw([&] { fast_.skip_write_through(w.fast, w.c); });
            const bool tb = threw([&] { ref_.skip_write_through(w.ref, w.c); });
            expect(ta == tb, "skip_write_through precondition differs");
            ++stats[ta ? "write_through skip rejected" : "write_through skipped"];
        } else if (chance(40)) {
            EvictResult a, b;
            const HostDrop why = chance(50) ? HostDrop::stored : HostDrop::failed;
            const bool ta = threw([&] { a = fast_.drop_host(w.fast, w.c, why); });
            const bool tb = threw([&] { b = ref_.drop_host(w.ref, w.c, why); });
            expect(ta == tb, "drop_host precondition differs");
            expect(canon(a.actions) == canon(b.actions), "drop_host actions differ");
            expect(a.host_freed == b.host_freed, "drop_host freed units differ");
            ++stats[ta ? "drop_host rejected" : split ? "drop_host after a split" : "drop_host accepted"];
            if (!ta && why == HostDrop::stored) ++stats["drop_host of a stored copy"];
            count(a.actions);
            a.actions.mark_executed();
            b.actions.mark_executed();
        }
        if (done) writes_.erase(writes_.begin() + static_cast<std::ptrdiff_t>(i));
    }
    void do_write() { do_write(static_cast<std::size_t>(pick(static_cast<int>(writes_.size())))); }

    void do_foreign_receipt() {
        last_op_ = "foreign receipt";
        if (receipts_.empty()) return;
        auto& [a, b] = receipts_.back();
        expect(threw([&] { ref_.unlock(std::move(a)); }), "a foreign receipt was accepted");
        expect(threw([&] { fast_.unlock(std::move(b)); }), "a foreign receipt was accepted");
        expect(!a.empty() && !b.empty(), "a rejected receipt was consumed");
    }

    // Completes every backup of an eviction on both trees, in action order or (half the time) in a random order
    // (outcome: the first host page, 0 when the copy could not be made), and compares what each completion frees.
    void finish_backups(const TreeActions& fa, const TreeActions& ra, const std::vector<int>& outcome,
                        const Protected& before) {
        std::vector<std::pair<std::size_t, int>> order;  // (action index, outcome)
        for (std::size_t i = 0; i < fa.size(); ++i)
            if (fa.list()[i].kind == ActionKind::backup) order.emplace_back(i, outcome[order.size()]);
        if (order.size() > 1 && chance(50)) {
            std::shuffle(order.begin(), order.end(), rng_);
            ++stats["finish_backup out of order"];
        }
        for (const auto& [i, first_host] : order) {
            const TreeAction& x = fa.list()[i];
            const TreeAction& y = ra.list()[i];
            std::vector<HostPage> host;
            const int pages = x.component == Component::mamba ? 1 : static_cast<int>(x.count);
            for (int j = 0; j < pages && first_host > 0; ++j) host.emplace_back(first_host + j);
            if (chance(20)) {  // a peek is allowed while backups are pending (match_prefix is not)
                last_op_ = "peek with backups pending";
                auto [key, ns] = some_key();
                (void)peek_both(TokenKey{key, ns});
                ++stats["peek with backups pending"];
            }
            last_op_ = "finish_backup";
            auto a = fast_.finish_backup(x.node, x.component, host);
            auto b = ref_.finish_backup(y.node, y.component, host);
            expect(a.device_freed == b.device_freed && a.host_freed == b.host_freed,
                   "finish_backup freed amounts differ");
            expect(canon(a.actions) == canon(b.actions), "finish_backup actions differ");
            expect_unprotected(a.actions, before);
            expect_not_held(a.actions);
            count(a.actions);
            if (!a.actions.empty()) ++stats["finish_backup freed a node"];
            a.actions.mark_executed();
            b.actions.mark_executed();
        }
    }

    void do_evict() {
        last_op_ = "evict";
        const Component c = some_component();
        const std::int64_t amount = c == Component::mamba ? 1 + pick(3) : (1 + pick(8)) * ps();
        const EvictOptions o{chance(35) ? EvictBackups::on : EvictBackups::off};
        const Protected before = protected_now();
        auto a = fast_.evict(c, amount, o);
        auto b = ref_.evict(c, amount, o);
        expect(a.device_freed == b.device_freed && a.host_freed == b.host_freed, "evict freed amounts differ");
        expect(canon(a.actions) == canon(b.actions), "evict actions differ");
        expect_unprotected(a.actions, before);
        expect_not_held(a.actions);
        count(a.actions);
        if (a.freed(c) > 0) ++stats["evict made progress"];
        std::vector<int> outcome;
        for (std::size_t i = 0; i < a.actions.size(); ++i) {
            const TreeAction& act = a.actions.list()[i];
            if (act.kind != ActionKind::backup) continue;
            expect(span_of(fast_, act.node) == span_of(ref_, b.actions.list()[i].node), "backup node differs");
            ++stats[act.component == Component::full    ? "backup full"
                    : act.component == Component::swa ? "backup swa"
                                                       : "backup mamba"];
            outcome.push_back(chance(60) ? next_host_ : 0);
            next_host_ += 64;
        }
        // The list is executed (backups copied) before the completions are reported.
        a.actions.mark_executed();
        b.actions.mark_executed();
        finish_backups(a.actions, b.actions, outcome, before);
    }

    void do_evict_host() {
        last_op_ = "evict_host";
        const Component c = some_component();
        const std::int64_t amount = c == Component::mamba ? 1 + pick(3) : (1 + pick(8)) * ps();
        const Protected before = protected_now();
        auto a = fast_.evict_host(c, amount);
        auto b = ref_.evict_host(c, amount);
        expect(a.device_freed == b.device_freed && a.host_freed == b.host_freed, "host evict freed amounts differ");
        expect(canon(a.actions) == canon(b.actions), "host evict actions differ");
        expect_unprotected(a.actions, before);
        count(a.actions);
        if (a.host_freed_of(c) > 0) ++stats["host evict made progress"];
        a.actions.mark_executed();
        b.actions.mark_executed();
    }

    // Back up the path of a matched node (write-through commit) for one component.
    void do_set_host() {
        last_op_ = "set_host";
        auto [key, ns] = some_key();
        const auto m = match_both(TokenKey{key, ns}, {});
        const bool every_component = chance(50);  // write-through backs up all components together
        const Component one = some_component();
        NodeRef x = m.fast.device_node;
        NodeRef y = m.ref.device_node;
        const bool whole_path = chance(60);
        while (!x.is_root()) {
            const NodeInfo info = fast_.node_info(x);
            for (Component c : {Component::full, Component::swa, Component::mamba}) {
                if (!Set::mask.has(c) || (!every_component && c != one)) continue;
                const int count = c == Component::mamba ? 1 : static_cast<int>(info.pages.size());
                const auto host = unikv::test::hpages(next_host_, std::max(count, 1));
                next_host_ += 64;
                const bool ta = threw([&] { fast_.set_host(x, c, host); });
                const bool tb = threw([&] { ref_.set_host(y, c, host); });
                expect(ta == tb, "set_host precondition differs");
                ++stats[ta ? "set_host rejected" : "set_host accepted"];
            }
            if (!whole_path) break;
            x = info.parent;
            y = ref_.node_info(y).parent;
        }
    }

    // A load-back of a host hit: walk the best node's path from the root and commit, per node and component, a
    // random selection of loads (FULL with fresh pages, SWA, Mamba with a fresh state). Most are rejected (already
    // on device, no host copy, parent not loaded yet): both trees must agree on every call.
    template <class Tree>
    std::vector<NodeRef> path_of(const Tree& t, NodeRef n) const {
        std::vector<NodeRef> path;
        for (; !n.is_root(); n = t.node_info(n).parent) path.push_back(n);
        std::reverse(path.begin(), path.end());
        return path;
    }
    // The namespace and the tokens from the root to the end of `n`.
    template <class Tree>
    std::pair<std::uint64_t, std::vector<TokenId>> key_of(const Tree& t, NodeRef n) const {
        std::vector<TokenId> tokens;
        const NodeInfo info = t.node_info(n);
        for (NodeRef x : path_of(t, n)) {
            const auto part = t.node_info(x).tokens;
            tokens.insert(tokens.end(), part.begin(), part.end());
        }
        return {info.ns.value, tokens};
    }
    // Both plans name the same nodes, components, host copies and FULL pages (or both reject the node).
    void compare_load_back_plans(NodeRef a, NodeRef b) {
        std::span<const LoadBackStep> pa, pb;
        const bool ta = threw([&] { pa = fast_.load_back_plan(a); });
        const bool tb = threw([&] { pb = ref_.load_back_plan(b); });
        expect(ta == tb, "load_back_plan precondition differs");
        if (ta) return;
        expect(pa.size() == pb.size(), "load_back_plan lengths differ");
        for (std::size_t i = 0; i < pa.size() && i < pb.size(); ++i) {
            expect(pa[i].component == pb[i].component && pa[i].start == pb[i].start &&
                       pa[i].length == pb[i].length && pa[i].loading == pb[i].loading &&
                       std::equal(pa[i].host.begin(), pa[i].host.end(), pb[i].host.begin(), pb[i].host.end()) &&
                       std::equal(pa[i].full_pages.begin(), pa[i].full_pages.end(), pb[i].full_pages.begin(),
                                  pb[i].full_pages.end()),
                   "load_back_plan steps differ");
            expect(span_of(fast_, pa[i].node) == span_of(ref_, pb[i].node), "load_back_plan nodes differ");
            const NodeInfo n = fast_.node_info(pa[i].node);
            expect(!n.device[pa[i].component] && !n.host[pa[i].component].empty(),
                   "load_back_plan names data that is on device, or has no host copy");
            // SWA rows bind under the node's FULL pages as they are now; other steps bind under none.
            const bool names_node_pages = std::equal(pa[i].full_pages.begin(), pa[i].full_pages.end(),
                                                     n.pages.begin(), n.pages.end());
            expect(pa[i].component == Component::swa ? names_node_pages : pa[i].full_pages.empty(),
                   "load_back_plan's FULL pages are not the node's");
        }
        if (!pa.empty()) ++stats["load_back_plan with steps"];
    }

    // Loads every step of the plan for a host-hit match's best node on both trees, in plan order; then a
    // device-only match must reach the whole host-hit length: the plan was complete.
    void execute_plan(const TokenKey& key, NodeRef best, std::int32_t best_length) {
        std::vector<LoadBackStep> plan;
        if (threw([&] { const auto p = fast_.load_back_plan(best); plan.assign(p.begin(), p.end()); })) return;
        for (const LoadBackStep& step : plan) {
            const auto want = key_of(fast_, step.node);
            NodeRef in_ref;
            for (NodeRef n : ref_.nodes())
                if (key_of(ref_, n) == want) in_ref = n;
            expect(!in_ref.is_root(), "a planned node is missing from ReferenceTree");
            std::vector<VirtualPage> pages;
            LoadedValue v;
            if (step.component == Component::full) {
                for (int j = 0; j < step.length / ps(); ++j) pages.emplace_back(next_page_ + j);
                v.pages = pages;
            }
            if (step.component == Component::mamba) v.state = StateId{next_state_};
            const bool ta = threw([&] { fast_.commit_load_back(step.node, step.component, v); });
            const bool tb = threw([&] { ref_.commit_load_back(in_ref, step.component, v); });
            expect(!ta && !tb, "a planned load-back step was rejected");
            next_page_ += static_cast<std::int32_t>(pages.size());
            if (step.component == Component::mamba) ++next_state_;
        }
        const auto m = match_both(key, {});
        expect(m.fast.device_length == best_length, "after loading its plan, a device-only match stops short");
        if (!plan.empty()) ++stats["load_back_plan executed"];
    }

    // A node to load, the same on both trees: half the time the best node of a host-hit match of a random key
    // (as an engine loads; `key` and `best_length` say which), otherwise any node, so that partly loaded and
    // host-only paths get reached often. Both roots when the tree is empty.
    struct LoadTarget {
        NodeRef fast, ref;
        std::vector<TokenId> key;
        KeyNamespace ns{};
        std::int32_t best_length = -1;  // -1: not from a match
    };
    LoadTarget load_target() {
        LoadTarget t;
        if (chance(50)) {
            std::tie(t.key, t.ns) = some_key();
            const auto m = match_both(TokenKey{t.key, t.ns}, MatchOptions{HostHits::include});
            t.fast = m.fast.best_node;
            t.ref = m.ref.best_node;
            t.best_length = m.fast.best_length;
            return t;
        }
        const auto all = fast_.nodes();
        if (all.empty()) return t;
        t.fast = all[static_cast<std::size_t>(pick(static_cast<int>(all.size())))];
        const auto want = key_of(fast_, t.fast);
        for (NodeRef n : ref_.nodes())
            if (key_of(ref_, n) == want) t.ref = n;
        expect(!t.ref.is_root(), "a node of RadixTree is missing from ReferenceTree");
        return t;
    }

    void do_load_back() {
        last_op_ = "commit_load_back";
        const LoadTarget t = load_target();
        if (t.best_length >= 0 && chance(50)) return execute_plan(TokenKey{t.key, t.ns}, t.fast, t.best_length);
        const NodeRef target_fast = t.fast;
        const NodeRef target_ref = t.ref;
        compare_load_back_plans(target_fast, target_ref);
        const auto pa = path_of(fast_, target_fast);
        const auto pb = path_of(ref_, target_ref);
        expect(pa.size() == pb.size(), "load-back path length differs");
        for (std::size_t i = 0; i < pa.size(); ++i) {
            for (Component c : {Component::full, Component::swa, Component::mamba}) {
                if (!Set::mask.has(c) || chance(20)) continue;
                std::vector<VirtualPage> pages;
                LoadedValue v;
                if (c == Component::full) {
                    const int count = fast_.node_info(pa[i]).length / ps();
                    for (int j = 0; j < count; ++j) pages.emplace_back(next_page_ + j);
                    v.pages = pages;
                }
                if (c == Component::mamba) v.state = StateId{next_state_};
                const bool ta = threw([&] { fast_.commit_load_back(pa[i], c, v); });
                const bool tb = threw([&] { ref_.commit_load_back(pb[i], c, v); });
                expect(ta == tb, "commit_load_back precondition differs");
                if (!ta) {
                    next_page_ += static_cast<std::int32_t>(pages.size());
                    if (c == Component::mamba) ++next_state_;
                }
                ++stats[ta ? "load_back rejected" : "load_back committed"];
            }
        }
    }

    // A load recorded on both trees when queued (`begin_load`, the node locked in both tiers as a cache does),
    // finished by a later operation: the splits, inserts, commits and evictions in between must leave both trees
    // installing the same parts and handing back the same leftovers.
    struct OpenLoad {
        std::uint64_t id = 0;
        LockReceipt fast_device, fast_host, ref_device, ref_host;
    };

    void do_begin_load() {
        last_op_ = "begin_load";
        const LoadTarget t = load_target();
        const NodeRef fast_node = t.fast;
        const NodeRef ref_node = t.ref;
        if (fast_node.is_root()) return;
        compare_load_back_plans(fast_node, ref_node);
        std::vector<LoadBackStep> plan;
        if (threw([&] { const auto p = fast_.load_back_plan(fast_node); plan.assign(p.begin(), p.end()); })) return;
        if (plan.empty()) return;
        std::vector<VirtualPage> pages;
        StateId state{};
        for (const LoadBackStep& s : plan) {
            if (s.component == Component::full)
                for (int j = 0; j < s.length / ps(); ++j) pages.emplace_back(next_page_ + static_cast<std::int32_t>(pages.size()));
            if (s.component == Component::mamba) state = StateId{next_state_};
        }
        const LoadedValue dest{.pages = pages, .state = state};
        OpenLoad l{.id = next_load_++, .fast_device = {}, .fast_host = {}, .ref_device = {}, .ref_host = {}};
        if (std::any_of(plan.begin(), plan.end(), [](const LoadBackStep& s) { return s.loading; })) {
            expect(threw([&] { fast_.begin_load(fast_node, l.id, dest); }) &&
                       threw([&] { ref_.begin_load(ref_node, l.id, dest); }),
                   "begin_load took a plan with a part already loading");
            ++stats["begin_load waits for a load in flight"];
            return;
        }
        l.fast_device = fast_.lock(fast_node, {.tier = Tier::device});
        l.fast_host = fast_.lock(fast_node, {.tier = Tier::host});
        l.ref_device = ref_.lock(ref_node, {.tier = Tier::device});
        l.ref_host = ref_.lock(ref_node, {.tier = Tier::host});
        const bool ta = threw([&] { fast_.begin_load(fast_node, l.id, dest, plan); });  // the plan, still whole
        const bool tb = threw([&] { ref_.begin_load(ref_node, l.id, dest); });
        expect(!ta && !tb, "begin_load rejected a fresh plan");
        {
            next_page_ += static_cast<std::int32_t>(pages.size());
            if (state.is_valid()) ++next_state_;
            ++stats["begin_load"];
        }
        open_loads_.push_back(std::move(l));
    }

    void do_finish_load() {
        last_op_ = "finish_load";
        if (open_loads_.empty()) return;
        const auto i = static_cast<std::size_t>(pick(static_cast<int>(open_loads_.size())));
        finish_load(i, chance(70));
    }

    void finish_load(std::size_t i, bool copied) {
        OpenLoad l = std::move(open_loads_[i]);
        open_loads_.erase(open_loads_.begin() + static_cast<std::ptrdiff_t>(i));
        // Each tree's leftovers and the SWA moves it asked for, in order.
        using Pages = std::vector<VirtualPage>;
        using Outcome = std::tuple<Pages, Pages, Pages, Pages, std::int32_t>;
        const auto finish = [&](auto& tree, Outcome& out) {
            Pages& kept = std::get<2>(out);
            Pages& incoming = std::get<3>(out);
            const LoadLeftovers x = tree.finish_load(l.id, copied, [&](auto to, auto from) {
                kept.insert(kept.end(), to.begin(), to.end());
                incoming.insert(incoming.end(), from.begin(), from.end());
            });
            std::get<0>(out).assign(x.full.begin(), x.full.end());
            std::get<1>(out).assign(x.swa.begin(), x.swa.end());
            std::get<4>(out) = x.state.value();
        };
        Outcome a, b;
        const bool ta = threw([&] { finish(fast_, a); });
        const bool tb = threw([&] { finish(ref_, b); });
        expect(ta == tb, "finish_load precondition differs");
        expect(a == b, "finish_load leftovers differ");
        if (!ta) {
            ++stats[copied ? "finish_load copied" : "finish_load failed"];
            if (!std::get<0>(a).empty() && copied) ++stats["finish_load handed back FULL pages"];
            if (!std::get<2>(a).empty()) ++stats["finish_load moved SWA rows"];
        }
        fast_.unlock(std::move(l.fast_device));
        fast_.unlock(std::move(l.fast_host));
        ref_.unlock(std::move(l.ref_device));
        ref_.unlock(std::move(l.ref_host));
        expect(fast_.loads_in_flight() == open_loads_.size() && ref_.loads_in_flight() == open_loads_.size(),
               "a tree keeps a finished load");
    }

    void do_retention() {
        last_op_ = "set_retention";
        auto [key, ns] = some_key();
        const auto m = match_both(TokenKey{key, ns}, {});
        const auto r = static_cast<std::uint8_t>(pick(3));
        fast_.set_retention(m.fast.device_node, r);
        ref_.set_retention(m.ref.device_node, r);
    }

    void release_everything() {
        last_op_ = "final finish_load";
        while (!open_loads_.empty()) finish_load(open_loads_.size() - 1, true);
        last_op_ = "final unlock";
        for (auto& [a, b] : receipts_) {
            fast_.unlock(std::move(a));
            ref_.unlock(std::move(b));
        }
        receipts_.clear();
        compare_sizes();
        for (Component c : {Component::full, Component::swa, Component::mamba})
            expect(fast_.protected_size(c) == 0, "locks left after releasing every receipt");
    }

    TreeConfig config_;
    Fast fast_;
    Ref ref_;
    std::mt19937_64 rng_;
    std::vector<std::pair<std::vector<TokenId>, KeyNamespace>> history_;
    std::vector<std::pair<LockReceipt, LockReceipt>> receipts_;
    std::vector<Write> writes_;
    std::vector<OpenLoad> open_loads_;
    std::uint64_t next_load_ = 1;
    std::int32_t next_page_ = 1;
    std::int32_t next_state_ = 1;
    std::int32_t next_host_ = 1;
    std::int32_t key_prefix_ = 0;  // tokens the last `some_key` took from an earlier key
    std::uint64_t seed_;
    std::int64_t op_ = 0;
    const char* last_op_ = "";
};

template <class... Cs>
void report(const char* name, Differential<Cs...>& d, std::int64_t ops) {
    std::ostringstream s;
    for (const auto& [what, n] : d.stats) s << "  " << what << ": " << n << "\n";
    MESSAGE(std::string(name), " exercised:\n", s.str());
    using Set = tree_component_set<Cs...>;
    if (ops >= 5000) {  // a long run must reach the interesting paths, or the generator is broken
        CHECK(d.stats["evict made progress"] > 0);
        CHECK(d.stats["host evict made progress"] > 0);
        CHECK(d.stats["match host hit"] > 0);
        CHECK(d.stats["peek checked with host hits"] > 0);
        CHECK(d.stats["peek with backups pending"] > 0);
        CHECK(d.stats["action free_pages"] > 0);
        if (Set::has_swa) CHECK(d.stats["action free_swa"] > 0);
        if (Set::has_swa) CHECK(d.stats["action recover_swa_locked_full"] > 0);
        if (Set::has_mamba || Set::has_swa) CHECK(d.stats["action backup"] > 0);
        CHECK(d.stats["backup full"] > 0);
        CHECK(d.stats["load_back committed"] > 0);
        CHECK(d.stats["begin_load"] > 0);
        CHECK(d.stats["finish_load copied"] > 0);
        CHECK(d.stats["lock without Full rejected"] > 0);
        if (Set::has_swa) CHECK(d.stats["match swa host hit"] > 0);
        CHECK(d.stats["insert_host grafted"] > 0);
        CHECK(d.stats["host chains broken"] > 0);
        CHECK(d.stats["insert_host added nodes"] > 0);
        CHECK(d.stats["insert_host not grafted"] > 0);
        CHECK(d.stats["insert_host rejected"] > 0);
        if (Set::has_swa) CHECK(d.stats["insert_host took SWA"] > 0);
        if (Set::has_mamba) CHECK(d.stats["insert_host took a state"] > 0);
        if (d.config().write_through_threshold > 0) {
            CHECK(d.stats["write_through committed"] > 0);
            CHECK(d.stats["write_through committed after a split"] > 0);
            CHECK(d.stats["write_through skipped"] > 0);
            CHECK(d.stats["drop_host accepted"] > 0);
            CHECK(d.stats["drop_host after a split"] > 0);
        }
    }
}

template <class... Cs>
void differential(const char* name, TreeConfig config, std::int64_t ops) {
    const std::uint64_t seed = env_or("UNIKV_TREE_FUZZ_SEED", 20240611);
    INFO("configuration ", std::string(name), ", seed ", seed, ", ", ops, " operations");
    CountDrops quiet;
    {
        Differential<Cs...> d(config, seed);
        try {
            d.run(ops);
        } catch (const Divergence& e) {
            const std::string failure = std::string(name) + ": " + e.what();
            FAIL(failure);
        }
        report(name, d, ops);
    }
    CHECK_MESSAGE(drops == 0, "the run dropped ", drops.load(), " action lists or receipts");
}

constexpr int configurations = 7;

std::int64_t ops_per_configuration() {
    return std::max<std::int64_t>(1, static_cast<std::int64_t>(env_or("UNIKV_TREE_FUZZ_OPS", 35'000)) / configurations);
}

}  // namespace

TEST_CASE("RadixTree and ReferenceTree agree on random operation sequences") {
    const std::int64_t ops = ops_per_configuration();
    const auto rec = EventMode::record;
    SUBCASE("Full, page 1") { differential<Full>("Full ps1", {.page_size = {1}, .events = rec}, ops); }
    SUBCASE("Full+Swa, page 2, window 3, write-through after 2 hits") {
        differential<Full, Swa>("Full+Swa ps2 W3, write-through after 2 hits",
                                {.page_size = {2}, .swa_window = 3, .events = rec, .write_through_threshold = 2}, ops);
    }
    SUBCASE("Full+Swa, page 4, window 8") {
        differential<Full, Swa>("Full+Swa ps4 W8", {.page_size = {4}, .swa_window = 8, .events = rec}, ops);
    }
    SUBCASE("Full+Swa, page 12, window 20 (sampled edge hashes, colliding siblings)") {
        differential<Full, Swa>("Full+Swa ps12 W20", {.page_size = {12}, .swa_window = 20, .events = rec}, ops);
    }
    SUBCASE("Full+Mamba, page 1") {
        differential<Full, Mamba>("Full+Mamba ps1", {.page_size = {1}, .events = rec}, ops);
    }
    SUBCASE("Full+Swa+Mamba, page 1, window 2") {
        differential<Full, Swa, Mamba>("Full+Swa+Mamba ps1 W2", {.page_size = {1}, .swa_window = 2, .events = rec}, ops);
    }
    SUBCASE("Full+Swa+Mamba, page 2, window 6, write-through") {
        differential<Full, Swa, Mamba>("Full+Swa+Mamba ps2 W6, write-through",
                                       {.page_size = {2}, .swa_window = 6, .events = rec, .write_through_threshold = 1},
                                       ops);
    }
}

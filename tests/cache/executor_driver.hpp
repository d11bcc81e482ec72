#pragma once
// The randomized driver of the cache tests: a tree and an allocator over one layout, driven together through
// the action executor (see executor_randomized_test.cpp for what it checks). Optionally it moves the whole
// stack (allocator, tree, executor) into a new object between operations, with copies still queued.

#include <algorithm>
#include <cstdint>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "cache_support.hpp"

namespace cache_test {


inline constexpr std::size_t sweep_every = 64;
inline constexpr std::int32_t max_pages = 12;  // per key
inline constexpr std::size_t conversations = 6;
inline constexpr std::size_t max_running = 3;
inline constexpr std::size_t max_held = 4;

/// Token `pos` of conversation `c`: conversations 0-2 and 3-5 share a 4-page system prompt, and pairs share
/// the next two pages, so keys branch at several depths.
inline TokenId token_of(std::size_t c, std::int32_t pos) {
    if (pos < 16) return static_cast<TokenId>(1000 * (c / 3) + pos);
    if (pos < 24) return static_cast<TokenId>(5000 + 1000 * (c / 2) + pos);
    return static_cast<TokenId>(20000 + 1000 * static_cast<TokenId>(c) + pos);
}

template <class L>
class Driver {
    using S = Stack<L>;
    using Alloc = typename S::Alloc;
    static constexpr bool has_swa = Alloc::has_swa;
    static constexpr bool has_mamba = Alloc::has_mamba;

    struct Request {
        std::vector<TokenId> key;
        std::vector<VirtualPage> pages;  // one per page: the tree's for the matched prefix, then its own
        std::int32_t own_from = 0;       // first page index the request allocated
        StateId state{};
        LockReceipt receipt;
    };

public:
    /// After `relocate_percent` of the operations the whole stack moves into the other of two slots, before the
    /// operation's copies and those of an urgent flush run.
    Driver(std::uint64_t seed, std::size_t envelopes, int relocate_percent = 0)
        : rng_(seed), stream_(backend_.make_stream()), relocate_percent_(relocate_percent) {
        slots_[0].emplace(backend_, stream_, envelopes);
        bind(0);
    }

    void run(std::uint64_t ops) {
        for (std::uint64_t i = 0; i < ops; ++i) {
            step_ = i;
            one_operation();
            if (relocate_percent_ > 0 && coin(relocate_percent_)) relocate();  // before the operation's copies run
            REQUIRE(drain(backend_, stream_));
            check_step();
            if (i % sweep_every == 0) sweep();
        }
        while (!running_.empty()) abort_request(running_.size() - 1);
        for (LockReceipt& r : held_) s().tree.unlock(std::move(r));
        held_.clear();
        REQUIRE(drain(backend_, stream_));  // eager pools compact on these frees
        check_step();
        sweep();
    }

    [[nodiscard]] std::uint64_t executed(ActionKind k) const { return s().exec.executed(k); }
    /// Moves of the stack made while the stream still had queued copies.
    [[nodiscard]] std::uint64_t moves_in_flight() const { return moves_in_flight_; }

private:
    std::size_t pick(std::size_t n) { return std::uniform_int_distribution<std::size_t>(0, n - 1)(rng_); }
    bool coin(int percent) { return static_cast<int>(pick(100)) < percent; }

    [[nodiscard]] S& s() noexcept { return *slots_[active_]; }
    [[nodiscard]] const S& s() const noexcept { return *slots_[active_]; }
    void bind(std::size_t slot) {
        active_ = slot;
        rows_.alloc = &s().alloc;
    }

    // Moves the stack into the other slot with the copies of the last operation and of an urgent flush still
    // queued; the old object is destroyed, so whatever still pointed into it would now fail.
    void relocate() {
        (void)s().alloc.flush(FlushMode::urgent);
        if (backend_.queued(stream_) > 0) ++moves_in_flight_;
        const std::size_t next = 1 - active_;
        slots_[next].emplace(std::move(s()));
        slots_[active_].reset();
        bind(next);
    }

    void one_operation() {
        const std::size_t op = pick(100);
        if (op < 30) start_request();
        else if (op < 55) finish_request();
        else if (op < 62) release_held();
        else if (op < 65) abort_some();
        else if (op < 85) evict_some();
        else flush_some();
    }

    // ---- requests ----------------------------------------------------------------------------------------

    void start_request() {
        if (running_.size() >= max_running) return;
        const std::size_t c = pick(conversations);
        const auto pages = static_cast<std::int32_t>(1 + pick(max_pages));
        Request r;
        for (std::int32_t pos = 0; pos < pages * page_size; ++pos) r.key.push_back(token_of(c, pos));
        MatchResult m = s().tree.match_prefix(TokenKey{r.key});
        for (VirtualPage v : m.device_pages) r.pages.push_back(v);
        REQUIRE(static_cast<std::int32_t>(r.pages.size()) * page_size == m.device_length);
        check_matched(r.key, r.pages, m.device_length);
        if (!m.device_node.is_root()) r.receipt = s().tree.lock(m.device_node);
        r.own_from = static_cast<std::int32_t>(r.pages.size());
        const std::int32_t own = pages - r.own_from;
        if (own > 0 && !allocate_own(r, own)) {
            release(r.receipt);
            return;
        }
        if constexpr (has_mamba) {
            if (coin(60)) {
                StateId st;
                if (!s().alloc.alloc_state(std::span(&st, 1))) {
                    EvictResult ev = s().tree.evict(Component::mamba, 1);
                    s().execute(ev);
                    if (!s().alloc.alloc_state(std::span(&st, 1))) st = StateId{};
                }
                if (st.is_valid()) {
                    REQUIRE(drain(backend_, stream_));
                    r.state = st;
                    rows_.write(Component::mamba, st.value(), state_marker(r.key));
                }
            }
        }
        REQUIRE(drain(backend_, stream_));
        for (std::int32_t k = r.own_from; k < pages; ++k) write_page(r, k);
        running_.push_back(std::move(r));
    }

    // Allocates the request's own pages with `alloc` or `alloc_extend`, evicting FULL once when short.
    bool allocate_own(Request& r, std::int32_t own) {
        for (int attempt = 0; attempt < 2; ++attempt) {
            std::vector<VirtualPage> got(static_cast<std::size_t>(own));
            AllocResult res;
            if (coin(50)) {
                res = s().alloc.alloc(got);
            } else {
                const std::int32_t prefix = r.own_from * page_size;
                const std::int32_t seq = prefix + own * page_size;
                const VirtualToken last = r.pages.empty() ? VirtualToken{} : VirtualToken{r.pages.back().value() * page_size + page_size - 1};
                std::vector<VirtualToken> out(static_cast<std::size_t>(own * page_size));
                res = s().alloc.alloc_extend({.prefix_lens = std::span(&prefix, 1), .seq_lens = std::span(&seq, 1),
                                             .last_locs = std::span(&last, 1)},
                                            out);
                if (res) {
                    for (std::int32_t k = 0; k < own; ++k) {
                        got[static_cast<std::size_t>(k)] = VirtualPage{out[static_cast<std::size_t>(k * page_size)].value() / page_size};
                    }
                }
            }
            if (res) {
                r.pages.insert(r.pages.end(), got.begin(), got.end());
                return true;
            }
            REQUIRE(res.missing.count > 0);
            EvictResult ev = s().tree.evict(res.missing.component, res.missing.count * page_size);
            s().execute(ev);
            REQUIRE(drain(backend_, stream_));
        }
        return false;
    }

    void finish_request() {
        if (running_.empty()) return;
        const std::size_t i = pick(running_.size());
        Request r = std::move(running_[i]);
        running_.erase(running_.begin() + static_cast<std::ptrdiff_t>(i));
        const auto pages = static_cast<std::int32_t>(r.pages.size());
        std::int32_t swa_evicted = 0;
        if constexpr (has_swa) {
            // The request drops its own out-of-window SWA rows, as decode does.
            const std::int32_t last_out = pages - window / page_size;  // pages before this one are out of the window
            if (last_out > r.own_from && coin(40)) {
                const auto cut = static_cast<std::int32_t>(r.own_from + 1 + pick(static_cast<std::size_t>(last_out - r.own_from)));
                s().alloc.free_swa(std::span(r.pages).subspan(static_cast<std::size_t>(r.own_from),
                                                             static_cast<std::size_t>(cut - r.own_from)));
                swa_evicted = cut * page_size;
            }
        }
        InsertResult ins = s().tree.insert(TokenKey{r.key}, {.pages = r.pages, .swa_evicted = swa_evicted, .state = r.state});
        s().execute(ins);
        REQUIRE(drain(backend_, stream_));
        touched_.assign(r.pages.begin(), r.pages.end());
        touched_key_ = r.key;
        release(r.receipt);
        if (held_.size() < max_held && !ins.node.is_root()) held_.push_back(s().tree.lock(ins.node));
    }

    void abort_request(std::size_t i) {
        Request r = std::move(running_[i]);
        running_.erase(running_.begin() + static_cast<std::ptrdiff_t>(i));
        s().alloc.free(std::span(r.pages).subspan(static_cast<std::size_t>(r.own_from)));
        if constexpr (has_mamba) {
            if (r.state.is_valid()) s().alloc.free_state(std::span(&r.state, 1));
        }
        release(r.receipt);
    }
    void abort_some() {
        if (!running_.empty()) abort_request(pick(running_.size()));
    }

    void release_held() {
        if (held_.empty()) return;
        const std::size_t i = pick(held_.size());
        s().tree.unlock(std::move(held_[i]));
        held_.erase(held_.begin() + static_cast<std::ptrdiff_t>(i));
    }

    void release(LockReceipt& r) {
        if (!r.empty()) s().tree.unlock(std::move(r));
    }

    // ---- eviction, flushes, float moves -----------------------------------------------------------------

    void evict_some() {
        std::vector<Component> cs{Component::full};
        if constexpr (has_swa) cs.insert(cs.end(), 2, Component::swa);  // SWA often, so tombstones get recovered
        if constexpr (has_mamba) cs.push_back(Component::mamba);
        const Component c = cs[pick(cs.size())];
        const auto amount = static_cast<std::int64_t>(1 + pick(3)) * (c == Component::mamba ? 1 : page_size);
        EvictResult ev = s().tree.evict(c, amount);
        s().execute(ev);
    }

    void flush_some() {
        const std::size_t k = pick(4);
        if constexpr (Alloc::has_float) {
            if (k == 2) {
                (void)s().alloc.compact_holes(coin(50) ? Side::low : Side::high);
                return;
            }
            if (k == 3) {
                (void)s().alloc.make_room(coin(50) ? Side::low : Side::high, (1 + pick(4)) * 128);
                return;
            }
        }
        (void)s().alloc.flush(k == 0 ? FlushMode::urgent : FlushMode::opportunistic);
    }

    // ---- rows and checks --------------------------------------------------------------------------------

    static std::uint32_t state_marker(const std::vector<TokenId>& key) {
        return marker(Component::mamba, key.back(), static_cast<std::int32_t>(key.size()));
    }
    void write_page(const Request& r, std::int32_t k) {
        rows_.write_page(Component::full, r.pages[static_cast<std::size_t>(k)], r.key, k * page_size);
        if constexpr (has_swa) rows_.write_page(Component::swa, r.pages[static_cast<std::size_t>(k)], r.key, k * page_size);
    }

    // The matched pages' FULL rows, and SWA rows in the last window before the boundary (the SWA validator
    // accepted the boundary only with those live).
    void check_matched(std::span<const TokenId> key, std::span<const VirtualPage> pages, std::int32_t length) {
        for (std::size_t k = 0; k < pages.size(); ++k) {
            const auto first = static_cast<std::int32_t>(k) * page_size;
            INFO("step ", step_, " matched page ", k, " (virtual ", pages[k].value(), ")");
            REQUIRE(rows_.page_holds(Component::full, pages[k], key, first));
            if constexpr (has_swa) {
                if (first + page_size > length - window) REQUIRE(rows_.page_holds(Component::swa, pages[k], key, first));
            }
        }
    }

    void check_step() {
        INFO("step ", step_);
        const std::string alloc_broken = broken(s().alloc);
        REQUIRE(alloc_broken.empty());
        const std::string tree_broken = broken(s().tree);
        REQUIRE(tree_broken.empty());
        std::int64_t own = 0;
        std::int64_t states = 0;
        for (const Request& r : running_) {
            own += static_cast<std::int64_t>(r.pages.size()) - r.own_from;
            states += r.state.is_valid() ? 1 : 0;
        }
        const auto tree_units = [&](Component c) { return s().tree.evictable_size(c) + s().tree.protected_size(c); };
        REQUIRE(s().alloc.live_pages(Component::full) == tree_units(Component::full) / page_size + own);
        if constexpr (has_swa) REQUIRE(s().alloc.live_pages(Component::swa) == tree_units(Component::swa) / page_size + own);
        if constexpr (has_mamba) REQUIRE(s().alloc.live_pages(Component::mamba) == tree_units(Component::mamba) + states);
        // The pages the last insert handed over: those the tree kept still read their tokens.
        if (!touched_.empty()) {
            MatchResult m = s().tree.match_prefix(TokenKey{touched_key_});
            std::vector<VirtualPage> pages(m.device_pages.begin(), m.device_pages.end());
            check_matched(touched_key_, pages, m.device_length);
            touched_.clear();
        }
    }

    // Every node's rows, and every running request's own rows.
    void sweep() {
        for (NodeRef n : s().tree.nodes()) {
            const NodeInfo info = s().tree.node_info(n);
            INFO("step ", step_, " node at ", info.start, " length ", info.length);
            std::vector<TokenId> key(static_cast<std::size_t>(info.start), 0);
            key.insert(key.end(), info.tokens.begin(), info.tokens.end());
            for (std::size_t k = 0; k < info.pages.size(); ++k) {
                const auto first = info.start + static_cast<std::int32_t>(k) * page_size;
                REQUIRE(rows_.page_holds(Component::full, info.pages[k], key, first));
                if constexpr (has_swa) {
                    if (info.device[Component::swa]) REQUIRE(rows_.page_holds(Component::swa, info.pages[k], key, first));
                }
            }
            if constexpr (has_mamba) {
                if (info.state.is_valid()) REQUIRE(rows_.holds(Component::mamba, info.state.value(), state_marker(key)));
            }
        }
        for (const Request& r : running_) {
            for (auto k = static_cast<std::size_t>(r.own_from); k < r.pages.size(); ++k) {
                const auto first = static_cast<std::int32_t>(k) * page_size;
                REQUIRE(rows_.page_holds(Component::full, r.pages[k], r.key, first));
                if constexpr (has_swa) REQUIRE(rows_.page_holds(Component::swa, r.pages[k], r.key, first));
            }
            if constexpr (has_mamba) {
                if (r.state.is_valid()) REQUIRE(rows_.holds(Component::mamba, r.state.value(), state_marker(r.key)));
            }
        }
    }

    std::mt19937_64 rng_;
    HostBackend backend_{{.mode = ExecutionMode::manual}};
    HostBackend::Stream stream_;
    int relocate_percent_;
    std::uint64_t moves_in_flight_ = 0;
    std::optional<S> slots_[2];
    std::size_t active_ = 0;
    Rows<Alloc> rows_{nullptr};
    std::vector<Request> running_;
    std::vector<LockReceipt> held_;
    std::vector<VirtualPage> touched_;
    std::vector<TokenId> touched_key_;
    std::uint64_t step_ = 0;
};

}  // namespace cache_test

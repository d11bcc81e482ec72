#pragma once
// Shared by the host-tier cache tests: a cache on a manual HostBackend (so each test decides when the copies run),
// requests whose every row (FULL and SWA per token, the Mamba state) carries a marker written through
// translation, and readers of device rows (through translation) and host rows (through a lease), so a row a
// wrong free, move, copy or commit touched reads back wrong.

#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include <unikv/backend/host_backend.hpp>
#include <unikv/cache.hpp>
#include <unikv/host/page_envelope_host.hpp>
#include <unikv/host/separate_host_pools.hpp>
#include <unikv/tree/reference_tree.hpp>

#include "cache/cache_support.hpp"

namespace hicache_test {

using namespace cache_test;

/// The policies under test: manual host backend, layout `L`, host pools `H`. The write policy is the `Rig`'s
/// runtime argument.
template <class L, class H = SeparateHostPools>
struct Policies : DefaultCachePolicies {
    using layout = L;
    using backend = HostBackend;
    using host_pools = H;
};

/// The write policies under test (`HostConfig::write`).
inline constexpr HostWrites write_back{.policy = WritePolicy::back};
inline constexpr HostWrites write_through{.policy = WritePolicy::through};
inline constexpr HostWrites write_selective{.policy = WritePolicy::selective, .threshold = 2};

/// A cache of `envelopes` device envelopes and `host_pages` host pages per component under `writes`, and its
/// requests.
template <class P>
struct Rig {
    using Cache = unikv::Cache<P>;
    using Alloc = typename Cache::allocator_type;
    static constexpr bool has_swa = Alloc::has_swa;
    static constexpr bool has_mamba = Alloc::has_mamba;

    HostBackend backend{{.mode = ExecutionMode::manual}};
    HostBackend::Stream stream = backend.make_stream();
    Cache cache;

    Rig(std::size_t envelopes, per_component<std::int32_t> host_pages, const HostWrites& writes = write_back)
        : cache(backend, {.arena = config(envelopes), .host = host_config(host_pages, writes)}, stream) {}
    Rig(std::size_t envelopes, std::int32_t host_pages, const HostWrites& writes = write_back)
        : Rig(envelopes, per_component<std::int32_t>{.values = {host_pages, host_pages, host_pages}}, writes) {}

    static HostConfig host_config(per_component<std::int32_t> pages, const HostWrites& writes = write_back) {
        HostConfig out;
        out.write = writes;
        out.pages[Component::full] = pages[Component::full];
        if (has_swa) out.pages[Component::swa] = pages[Component::swa];
        if (has_mamba) out.pages[Component::mamba] = pages[Component::mamba];
        return out;
    }
    [[nodiscard]] Rows<Alloc> rows() const { return Rows<Alloc>{&cache.allocator()}; }

    /// The key `first, first + 1, ...` of `pages` pages, starting at token `first`.
    static std::vector<TokenId> key(TokenId first, std::int32_t pages) {
        std::vector<TokenId> out;
        for (std::int32_t i = 0; i < pages * page_size; ++i) out.push_back(first + i);
        return out;
    }
    /// Caches `tokens` as a request would: its pages (and state) allocated, every row marked, inserted.
    /// Returns the end node; the whole result lands in `inserted`.
    NodeRef insert(const std::vector<TokenId>& tokens) {
        const auto n = tokens.size() / static_cast<std::size_t>(page_size);
        std::vector<VirtualPage> pages(n);
        REQUIRE(cache.allocator().alloc(pages));
        StateId state{};
        if constexpr (has_mamba) REQUIRE(cache.allocator().alloc_state(std::span(&state, 1)));
        REQUIRE(drain(backend, stream));
        for (std::size_t k = 0; k < n; ++k) {
            rows().write_page(Component::full, pages[k], tokens, static_cast<std::int32_t>(k) * page_size);
            if constexpr (has_swa)
                rows().write_page(Component::swa, pages[k], tokens, static_cast<std::int32_t>(k) * page_size);
        }
        if constexpr (has_mamba) rows().write(Component::mamba, state.value(), state_marker(tokens));
        inserted = cache.insert(TokenKey{tokens}, {.pages = pages, .state = state});
        return inserted.node;
    }
    /// What the last `insert` returned.
    CacheInsert inserted{};
    static std::uint32_t state_marker(const std::vector<TokenId>& tokens) {
        return marker(Component::mamba, tokens.back(), static_cast<std::int32_t>(tokens.size()));
    }

    /// True when the device rows of `node` (FULL, and SWA / Mamba where `node` has them on device) hold the
    /// markers of `tokens`, the key ending at `node`.
    bool device_holds(NodeRef node, const std::vector<TokenId>& tokens) const {
        const NodeInfo info = cache.tree().node_info(node);
        if (!info.device[Component::full]) return false;
        for (std::size_t k = 0; k < info.pages.size(); ++k) {
            const std::int32_t first = info.start + static_cast<std::int32_t>(k) * page_size;
            if (!rows().page_holds(Component::full, info.pages[k], tokens, first)) return false;
            if (has_swa && info.device[Component::swa] &&
                !rows().page_holds(Component::swa, info.pages[k], tokens, first)) {
                return false;
            }
        }
        if (has_mamba && info.device[Component::mamba] &&
            !rows().holds(Component::mamba, info.state.value(), state_marker(tokens))) {
            return false;
        }
        return true;
    }
    /// True when `node`'s host copy of `c` exists and holds the markers of `tokens`.
    bool host_holds(NodeRef node, Component c, const std::vector<TokenId>& tokens) {
        return host_holds(cache, node, c, tokens);
    }
    /// The same, in `cache` (a cache moved out of the rig).
    static bool host_holds(Cache& cache, NodeRef node, Component c, const std::vector<TokenId>& tokens) {
        const NodeInfo info = cache.tree().node_info(node);
        const std::vector<HostPage>& hp = info.host[c];
        if (hp.empty()) return false;
        auto lease = cache.host_pools().lease();
        const std::size_t entry = cache.allocator().spec()[c].entry_bytes;
        for (std::size_t k = 0; k < hp.size(); ++k) {
            std::int32_t physical = -1;
            lease.physical(c, std::span(&hp[k], 1), std::span(&physical, 1));
            const std::byte* page = lease.region(c).data + static_cast<std::size_t>(physical) * lease.page_bytes(c);
            const std::int32_t rows_per_page = cache.page_size(c);
            for (std::int32_t r = 0; r < rows_per_page; ++r) {
                const std::int32_t pos = info.start + static_cast<std::int32_t>(k) * page_size + r;
                const std::uint32_t want = c == Component::mamba
                                               ? state_marker(tokens)
                                               : marker(c, tokens[static_cast<std::size_t>(pos)], pos);
                for (std::size_t w = 0; w < entry / 4; ++w) {
                    std::uint32_t x = 0;
                    std::memcpy(&x, page + static_cast<std::size_t>(r) * entry + 4 * w, 4);
                    if (x != want) return false;
                }
            }
        }
        return true;
    }
    /// Runs the controller's transfer stream one operation at a time, calling `each()` before every one, and the
    /// allocator's stream where the transfer stream waits on it; returns the transfer operations run.
    template <class Each>
    std::size_t run_transfers(Each&& each) {
        std::size_t n = 0;
        while (backend.queued(cache.controller().stream()) > 0) {
            each();
            if (backend.run_next(cache.controller().stream())) {
                ++n;
            } else if (!backend.run_next(stream)) {  // the copies wait on the allocator's stream
                break;
            }
        }
        return n;
    }
    std::size_t run_transfers() {
        return run_transfers([] {});
    }
    /// Loads `node` back and acknowledges it; true when committed.
    bool load(NodeRef node) {
        const LoadBackStart start = cache.load_back(node);
        REQUIRE(start);
        CHECK(cache.start_loading() == 1);
        (void)run_transfers();
        const std::span<const LoadDone> done = cache.loading_check();
        REQUIRE(done.size() == 1);
        CHECK(done[0].id == start.id);
        return done[0].committed;
    }
    /// Every broken rule of the cache, one per line.
    [[nodiscard]] std::string broken() const { return test_verify::broken(cache); }
    [[nodiscard]] std::int32_t live(Component c) const { return cache.allocator().live_pages(c); }
};

/// A tree call the cache makes inside its own calls, to throw from (once) in a `Faulty` cache.
enum class TreeFault : std::uint8_t { none, load_back_plan, evict, finish_load, set_host, drop_host };
struct TreeFaults {
    /// The call that throws next, before it changes anything; reset to `none` when it has.
    static inline TreeFault next = TreeFault::none;
    static void hit(TreeFault call) {
        if (next != call) return;
        next = TreeFault::none;
        throw std::runtime_error("injected tree fault");
    }
};

/// The fast tree, throwing where `TreeFaults::next` says.
template <class... Cs>
class FaultyTree : public RadixTree<Cs...> {
    using base = RadixTree<Cs...>;

public:
    using base::base;
    std::span<const LoadBackStep> load_back_plan(NodeRef node) {
        TreeFaults::hit(TreeFault::load_back_plan);
        return base::load_back_plan(node);
    }
    EvictResult evict(Component c, std::int64_t amount, EvictOptions options = {}) {
        TreeFaults::hit(TreeFault::evict);
        return base::evict(c, amount, options);
    }
    template <class MoveSwa>
    LoadLeftovers finish_load(std::uint64_t id, bool copied, MoveSwa&& move_swa) {
        TreeFaults::hit(TreeFault::finish_load);
        return base::finish_load(id, copied, std::forward<MoveSwa>(move_swa));
    }
    void set_host(NodeRef node, Component c, std::span<const HostPage> host) {
        TreeFaults::hit(TreeFault::set_host);
        base::set_host(node, c, host);
    }
    EvictResult drop_host(NodeRef node, Component c, HostDrop why = HostDrop::failed) {
        TreeFaults::hit(TreeFault::drop_host);
        return base::drop_host(node, c, why);
    }
};
struct FaultyTreeCore {
    template <class... Cs>
    using impl = FaultyTree<Cs...>;
};
/// `Policies<L, SeparateHostPools>` over the faulty tree.
template <class L>
struct FaultyPolicies : Policies<L, SeparateHostPools> {
    using tree_core = FaultyTreeCore;
};

/// The configurations the tests run on: every shipped layout with a host tier, both host pools where served.
using SwaSeparate = Policies<SwaFullLayout>;
using SwaEnvelope = Policies<SwaFullLayout, PageEnvelopeHost<>>;
using FullEnvelope = Policies<FullLayout, PageEnvelopeHost<>>;
using TriSeparate = Policies<TriPoolLayout>;
/// The simple tree core in the same composition.
struct SwaReference : Policies<SwaFullLayout> {
    using tree_core = ReferenceTreeCore;
};

}  // namespace hicache_test

#pragma once
// Definitions of `CacheCore` (cache.hpp): construction, the tree executed, a request's rows and allocation, inspection.

#include <algorithm>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <unikv/detail/tree/held_lock.hpp>

namespace unikv::detail::cache {

template <class P>
CacheCore<P>::CacheCore(backend_type& backend, const CacheConfig& config, stream_ref stream)
    : host_writes_(checked(config.host).write),
      host_mode_(config.host.mode),
      retention_(checked(config.retention, config.arena)),
      alloc_(backend, config.arena, stream),
      host_(backend, alloc_.spec(), config.host, stream),
      tree_(tree_config(config, host_writes_)),
      ctl_(backend) {}

template <class P>
CacheCore<P>::~CacheCore() {
    // The tree goes with the cache: release the locks so they are not reported as dropped. Nothing is freed
    // here, and the controller (destroyed first) finishes the copies before the memory behind them goes. A load
    // still queued is never submitted: its reservation is cancelled, not dropped.
    for (Ticket& t : writes_) abandon(t);
    for (Ticket& t : loads_) abandon(t);
    // The store writes into host pages and reads from them: wait for its batches before the host pools go (their
    // answers are not needed any more).
    wait_for_store();
}

template <class P>
const HostConfig& CacheCore<P>::checked(const HostConfig& host) {
    const HostWrites& w = check_host_writes(host.write);
    if constexpr (is_no_host_tier_v<typename P::host_pools>) {
        UNIKV_EXPECTS(w.policy == WritePolicy::none, "Cache: the write policy is ", write_policy_name(w.policy),
                      ", which copies device data to the host tier, but host_pools is NoHostTier; give "
                      "HostConfig::write = {.policy = WritePolicy::none} for a device-only cache, or give it host "
                      "pools (SeparateHostPools, PageEnvelopeHost<>)");
    }
    UNIKV_EXPECTS(host.mode == HostMode::cache || host.mode == HostMode::buffer_only, "Cache: HostConfig::mode is ",
                  static_cast<unsigned>(host.mode), ", not a HostMode; use HostMode::cache or HostMode::buffer_only");
    UNIKV_EXPECTS(host.mode != HostMode::buffer_only || !allocator_type::has_mamba,
                  "Cache: HostMode::buffer_only stages FULL and SWA pages for the storage tier, but the layout has "
                  "a Mamba pool, whose running states are not staged; use HostConfig::mode = HostMode::cache");
    if constexpr (std::is_same_v<typename P::storage, NoStorage>) {
        UNIKV_EXPECTS(host.mode != HostMode::buffer_only,
                      "Cache: HostMode::buffer_only stages host copies for a storage tier, but the bundle's storage "
                      "is NoStorage, so its host copies would never be served; use HostConfig::mode = "
                      "HostMode::cache, or name a storage policy");
    }
    UNIKV_EXPECTS(host.mode != HostMode::buffer_only || w.policy == WritePolicy::through ||
                      w.policy == WritePolicy::selective,
                  "Cache: HostMode::buffer_only stages write-throughs on their way to the storage tier (the device rows "
                  "stay until the store holds them), but the write policy is ", write_policy_name(w.policy),
                  "; use WritePolicy::through or WritePolicy::selective");
    return host;
}

template <class P>
const RetentionConfig& CacheCore<P>::checked(const RetentionConfig& retention, const ArenaConfig& arena) {
    const std::int32_t page = arena.page_sizes.full.tokens;
    UNIKV_EXPECTS(retention.every_tokens >= 0 && (page <= 0 || retention.every_tokens % page == 0),
                  "Cache: RetentionConfig::every_tokens is ", retention.every_tokens, "; give 0 (no sparse "
                  "checkpoints) or a multiple of the ", page, "-token page");
    return retention;
}

template <class P>
TreeConfig CacheCore<P>::tree_config(const CacheConfig& config, const HostWrites& writes) {
    return TreeConfig{.page_size = config.arena.page_sizes.full,
                      .swa_window = has_swa ? config.arena.model.swa_window_tokens : 0,
                      .events = config.events,
                      .write_through_threshold = write_through_threshold(writes)};
}

template <class P>
CacheInsert CacheCore<P>::insert(TokenKey key, const InsertValues& values) {
    return insert_then(key, values, [](const CacheInsert&) noexcept {});
}

template <class P>
template <class Inserted>
CacheInsert CacheCore<P>::insert_then(TokenKey key, const InsertValues& values, Inserted&& inserted) {
    alloc_.expect_allocated(values.pages, "insert");
    if constexpr (has_mamba) {
        if (values.state.is_valid()) alloc_.expect_allocated(std::span<const StateId>(&values.state, 1), "insert");
    }
    InsertResult r = tree_.insert(key, values);
    // The tree holds the pages from now on; the duplicates it hands back are freed below by its own list.
    alloc_.hold(values.pages);
    if constexpr (has_mamba) {
        if (values.state.is_valid()) alloc_.hold(std::span<const StateId>(&values.state, 1));
    }
    CacheInsert out{.node = r.node, .prefix_length = r.prefix_length, .first_write = next_write_};
    HostActions work = exec_.execute(alloc_, r);
    free_host(work);
    inserted(out);
    const std::span<const TreeAction> actions = work.actions();
    // A write-through may relieve the host (`evict_host`), and the collection after it could remove the node
    // returned here (over Mamba, a node without a state cannot end a match): pinned from the first one on.
    std::optional<detail::held_lock<tree_type>> pin;
    std::size_t i = 0;
    try {
        for (; i < actions.size(); ++i) {
            const TreeAction& a = actions[i];
            UNIKV_ASSERT(a.kind != ActionKind::backup);  // insert never asks for a write-back
            if (a.kind != ActionKind::write_through) continue;
            if (!pin && !r.node.is_root()) pin.emplace(tree_, tree_.lock(r.node));
            ++(write_through(work, a) ? out.writes : out.skipped);
        }
    } catch (...) {
        // Nothing stays pending: a pending node could never be evicted. The write that threw may have got
        // past `set_host` (cold path: ask the tree; a write pending holds its node, so the handle is live).
        for (; i < actions.size(); ++i) {
            const TreeAction& a = actions[i];
            if (a.kind == ActionKind::write_through && tree_.contains(a.node) &&
                tree_.node_info(a.node).write_through_pending[a.component])
                tree_.skip_write_through(a.node, a.component);
        }
        exec_.complete(alloc_, std::move(work));
        throw;
    }
    exec_.complete(alloc_, std::move(work));
    // A buffer-only host keeps no copy beside device data: one a prefetch grafted while the request computed goes
    // (last: a throw here leaves an ordinary host copy, and the writes queued above are host-locked, so skipped).
    if (r.beside_host && host_mode_ == HostMode::buffer_only) drop_staged(r.node);
    return out;
}

template <class P>
template <class Result>
void CacheCore<P>::run_actions(Result& result) {
    HostActions work = exec_.execute(alloc_, result);
    for (const TreeAction& a : work.actions()) {
        UNIKV_EXPECTS(a.kind == ActionKind::free_host, "Cache: the tree asked for a ", to_string(a.component),
                      " copy outside an eviction or an insert");
    }
    free_host(work);
    exec_.complete(alloc_, std::move(work));
}

template <class P>
void CacheCore<P>::free_host(const HostActions& work) {
    for (const TreeAction& a : work.actions()) {
        if (a.kind == ActionKind::free_host) host_.free(a.component, work.host_pages(a));
    }
}

// ---- a request's rows and allocation -------------------------------------------------------------------

template <class P>
void CacheCore<P>::prefix_rows(NodeRef node, std::span<VirtualToken> out) {
    const PageSize page{page_size(Component::full)};
    prefix_pages_.resize(out.size() / static_cast<std::size_t>(page.tokens) + 1);
    const std::size_t pages = tree_.prefix_pages(node, prefix_pages_);
    UNIKV_EXPECTS(out.size() >= pages * static_cast<std::size_t>(page.tokens), "prefix_rows: ", out.size(),
                  " rows for a prefix of ", pages * static_cast<std::size_t>(page.tokens),
                  " tokens; size the request's rows to hold the prefix");
    VirtualToken* to = out.data();
    for (std::size_t k = 0; k < pages; ++k) {
        for (std::int32_t i = 0; i < page.tokens; ++i) *to++ = token_of(prefix_pages_[k], page, i);
    }
}

template <class P>
AllocResult CacheCore<P>::alloc_rows(std::span<VirtualToken> rows, std::int32_t from) {
    const auto size = static_cast<std::int32_t>(rows.size());
    UNIKV_EXPECTS(from >= 0 && from <= size, "alloc_rows: from is ", from, " for a request of ", size,
                  " rows; give the rows it already has (0 to rows.size())");
    if (from == size) return AllocResult{};
    const std::int32_t prefix_lens[] = {from};
    const std::int32_t seq_lens[] = {size};
    const VirtualToken last_locs[] = {from > 0 ? rows[static_cast<std::size_t>(from) - 1] : VirtualToken{}};
    return alloc_extend({.prefix_lens = prefix_lens, .seq_lens = seq_lens, .last_locs = last_locs},
                        rows.subspan(static_cast<std::size_t>(from)));
}

template <class P>
CacheInsert CacheCore<P>::finish(TokenKey tokens, std::span<const VirtualToken> rows, LockReceipt&& lock,
                             const FinishOptions& options) {
    UNIKV_EXPECTS(tokens.tokens.size() >= rows.size(), "finish: ", rows.size(), " rows for ", tokens.tokens.size(),
                  " tokens; give the tokens the rows hold");
    const auto page = static_cast<std::size_t>(page_size(Component::full));
    const std::span<const VirtualPage> pages = page_list(rows);
    const std::size_t whole_pages = rows.size() / page;
    const std::size_t whole = whole_pages * page;
    const bool state_to_tree = whole == rows.size() && whole > 0;
    const CacheInsert done =
        insert({tokens.tokens.first(whole), tokens.ns},
                   {.pages = pages.first(whole_pages),
                    .swa_evicted = std::min(options.swa_evicted, static_cast<std::int32_t>(whole)),
                    .state = state_to_tree ? options.state : StateId{},
                    .retention = options.retention,
                    .window_class = options.window_class});
    if (whole_pages < pages.size()) alloc_.free(pages.subspan(whole_pages));
    if constexpr (has_mamba) {
        if (!state_to_tree && options.state.is_valid()) alloc_.free_state(std::span(&options.state, 1));
    }
    if (!lock.empty()) unlock(std::move(lock));
    return done;
}

template <class P>
AllocResult CacheCore<P>::alloc_extend(const ExtendBatch& batch, std::span<VirtualToken> out) {
    return relieved([&] { return alloc_.alloc_extend(batch, out); });
}

template <class P>
AllocResult CacheCore<P>::alloc_decode(const DecodeBatch& batch, std::span<VirtualToken> out) {
    return relieved([&] { return alloc_.alloc_decode(batch, out); });
}

template <class P>
AllocResult CacheCore<P>::alloc_state(std::span<StateId> out)
    requires has_mamba
{
    return relieved([&] { return alloc_.alloc_state(out); });
}

// ---- inspection ------------------------------------------------------------------------------------------

template <class P>
std::vector<std::string> CacheCore<P>::verify() const {
    std::vector<std::string> out = alloc_.verify();
    for (std::string& line : tree_.verify()) out.push_back("tree: " + std::move(line));
    for (std::string& line : host_.verify()) out.push_back("host: " + std::move(line));
    // The tree against the allocator: each device page of a node is allocated, held, and named by one node; a
    // node with SWA device data has its SWA rows bound; a node's state slot is allocated and held. With no load or write-back run open, the tree holds
    // exactly the pages it names (a load's destinations and a run's evicted rows are held off the nodes).
    std::vector<std::uint8_t> seen;
    std::int64_t named = 0;
    for (const NodeRef node : tree_.nodes()) {
        const NodeInfo info = tree_.node_info(node);
        for (const VirtualPage page : info.pages) {
            const auto status = alloc_.status(page);
            const auto v = static_cast<std::size_t>(page.value());
            if (v >= seen.size()) seen.resize(v + 1, 0);
            const char* problem = !status.allocated ? "is not allocated"
                                  : !status.held    ? "is not held by the tree"
                                  : seen[v] != 0    ? "is named by two nodes"
                                  : info.device[Component::swa] && !status.swa_bound ? "has no SWA rows bound"
                                                                                     : nullptr;
            if (problem != nullptr) {
                out.push_back(detail::concat("cache: virtual page ", page.value(), " of the node at token ",
                                             info.start, " ", problem));
            }
            seen[v] = 1;
            ++named;
        }
        if (const auto status = alloc_.status(info.state); info.state.is_valid() && !(status.allocated && status.held)) {
            out.push_back(detail::concat("cache: state slot ", info.state.value(), " of the node at token ", info.start,
                                         status.allocated ? " is not held by the tree" : " is not allocated"));
        }
    }
    if (loads_.empty() && open_backups_ == 0 && named != alloc_.held_pages()) {
        out.push_back(detail::concat("cache: the allocator holds ", alloc_.held_pages(), " pages for the tree, whose ",
                                     "nodes name ", named));
    }
    return out;
}

}  // namespace unikv::detail::cache

namespace unikv {

template <class Policies>
Cache<Policies>::Cache(typename core::backend_type& backend, const CacheConfig& config, stream_ref stream)
    : core(backend, config, stream), budget_(config.budget) {
    // A static partition bounds the pools themselves, so that one pool's cached pages never hold another's
    // memory (see `PartitionedSWABudget`).
    if constexpr (requires { budget_.partitions(); }) this->allocator().bound_pages(budget_.partitions());
}

}  // namespace unikv

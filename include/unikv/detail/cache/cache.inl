#pragma once
// Definitions of `Cache` (cache.hpp).

#include <algorithm>
#include <utility>

#include <unikv/detail/transfer/with_relief.hpp>

namespace unikv {

namespace detail::cache {

// The tree of a cache: FULL's page size, the arena's window where the layout has Swa.
template <bool HasSwa>
TreeConfig tree_config(const CacheConfig& config) {
    return TreeConfig{.page_size = config.arena.page_sizes.full,
                      .swa_window = HasSwa ? config.arena.model.swa_window_tokens : 0,
                      .events = config.events};
}

// The host configuration of a cache of bundle `P`, checked for what only the bundle knows: buffer-only host
// mode stages for a storage tier. Over a layout with Mamba the `HiCache` refuses that mode first (its message
// names the Mamba pool), as the compile-time rules did.
template <class P, bool HasMamba>
const HostConfig& host_config(const HostConfig& host) {
    if constexpr (std::is_same_v<typename P::storage, NoStorage> && !HasMamba) {
        UNIKV_EXPECTS(host.mode != HostMode::buffer_only,
                      "Cache: HostMode::buffer_only stages host copies for a storage tier, but the bundle's storage "
                      "is NoStorage, so its host copies would never be served; use HostConfig::mode = "
                      "HostMode::cache, or name a storage policy");
    }
    return host;
}

}  // namespace detail::cache

template <class P>
Cache<P>::Cache(backend_type& backend, const CacheConfig& config, stream_ref stream)
    : hc_(backend, config.arena, detail::cache::host_config<P, has_mamba>(config.host),
          detail::cache::tree_config<has_swa>(config), stream),
      budget_(config.budget),
      window_(has_swa ? config.arena.model.swa_window_tokens : 0) {
    // A static partition bounds the pools themselves, so that one pool's cached pages never hold another's
    // memory (see `PartitionedSWABudget`).
    if constexpr (requires { budget_.partitions(); }) hc_.allocator().bound_pages(budget_.partitions());
}

template <class P>
AllocResult Cache<P>::alloc_extend(const ExtendBatch& batch, std::span<VirtualToken> out) {
    return relieved([&] { return hc_.allocator().alloc_extend(batch, out); });
}

template <class P>
AllocResult Cache<P>::alloc_decode(const DecodeBatch& batch, std::span<VirtualToken> out) {
    return relieved([&] { return hc_.allocator().alloc_decode(batch, out); });
}

template <class P>
AllocResult Cache<P>::alloc_state(std::span<StateId> out)
    requires has_mamba
{
    return relieved([&] { return hc_.allocator().alloc_state(out); });
}

template <class P>
template <class Alloc>
AllocResult Cache<P>::relieved(Alloc&& alloc) {
    return detail::with_relief(alloc, [this](const AllocResult& r) { return hc_.relieve(r); });
}

// ---- a request's rows ------------------------------------------------------------------------------------

template <class P>
void Cache<P>::prefix_rows(TokenKey prefix, std::span<VirtualToken> out) {
    const auto tokens = static_cast<std::int32_t>(prefix.tokens.size());
    UNIKV_EXPECTS(out.size() >= prefix.tokens.size(), "prefix_rows: ", out.size(), " rows for a prefix of ", tokens,
                  " tokens; size the request's rows to hold the prefix");
    const MatchResult m = hc_.match(prefix);
    UNIKV_EXPECTS(m.device_length == tokens, "prefix_rows: the device serves ", m.device_length, " of the ", tokens,
                  " prefix tokens; give an admitted prefix and acknowledge its load-back (loading_check) first");
    const PageSize page{hc_.allocator().spec()[Component::full].page_size};
    VirtualToken* to = out.data();
    for (const std::span<const VirtualPage> run : m.device_pages.runs()) {
        for (const VirtualPage p : run) {
            for (std::int32_t i = 0; i < page.tokens; ++i) *to++ = token_of(p, page, i);
        }
    }
}

template <class P>
AllocResult Cache<P>::alloc_rows(std::span<VirtualToken> rows, std::int32_t from) {
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
CacheInsert Cache<P>::finish(TokenKey tokens, std::span<const VirtualToken> rows, LockReceipt&& lock,
                             const FinishOptions& options) {
    UNIKV_EXPECTS(tokens.tokens.size() >= rows.size(), "finish: ", rows.size(), " rows for ", tokens.tokens.size(),
                  " tokens; give the tokens the rows hold");
    const PageSize page_size{hc_.allocator().spec()[Component::full].page_size};
    const auto page = static_cast<std::size_t>(page_size.tokens);
    finish_pages_.clear();
    for (std::size_t t = 0; t < rows.size(); t += page) finish_pages_.push_back(page_of(rows[t], page_size));
    const std::size_t whole_pages = rows.size() / page;
    const std::size_t whole = whole_pages * page;
    const bool state_to_tree = whole == rows.size() && whole > 0;
    const std::span<const VirtualPage> pages(finish_pages_);
    const CacheInsert done =
        hc_.insert({tokens.tokens.first(whole), tokens.ns},
                   {.pages = pages.first(whole_pages),
                    .swa_evicted = std::min(options.swa_evicted, static_cast<std::int32_t>(whole)),
                    .state = state_to_tree ? options.state : StateId{},
                    .retention = options.retention});
    if (whole_pages < pages.size()) hc_.allocator().free(pages.subspan(whole_pages));
    if constexpr (has_mamba) {
        if (!state_to_tree && options.state.is_valid()) hc_.allocator().free_state(std::span(&options.state, 1));
    }
    if (!lock.empty()) hc_.unlock(std::move(lock));
    return done;
}

// ---- write-through -------------------------------------------------------------------------------------

template <class P>
std::span<const WriteDone> Cache<P>::writing_check() {
    const std::span<const WriteDone> acks = hc_.writing_check();
    if (settled_.empty()) [[likely]] return acks;
    settled_.insert(settled_.end(), acks.begin(), acks.end());
    reported_.swap(settled_);
    settled_.clear();
    return reported_;
}

template <class P>
void Cache<P>::settle_writes() {
    if (hc_.writes_in_flight() == 0) return;
    (void)hc_.start_writing();
    hc_.controller().stream().synchronize();
    const std::span<const WriteDone> acks = hc_.writing_check();
    settled_.insert(settled_.end(), acks.begin(), acks.end());
}

// ---- retraction ------------------------------------------------------------------------------------------

template <class P>
RetractionRequest Cache<P>::retraction_of(const RequestRows& rows) const {
    return RetractionRequest{
        .own = rows.own, .prefix_tokens = rows.prefix_tokens, .seq_len = rows.seq_len, .window_tokens = window_};
}

template <class P>
RetractionBackup Cache<P>::backup(const RequestRows& request) {
    static_assert(check_cache_retraction<P>());
    if constexpr (!can_retract) {
        return RetractionBackup{};
    } else {
        settle_writes();
        return retract(hc_.allocator(), hc_.host_pools(), hc_.controller(), retraction_of(request),
                       [this](const HostAllocResult& r) { return hc_.relieve_host(r); });
    }
}

template <class P>
bool Cache<P>::restore(RetractionBackup& backup, const RequestRows& fresh) {
    static_assert(check_cache_retraction<P>());
    if constexpr (!can_retract) {
        return false;
    } else {
        return unikv::restore(hc_.allocator(), hc_.host_pools(), hc_.controller(), backup, retraction_of(fresh));
    }
}

}  // namespace unikv

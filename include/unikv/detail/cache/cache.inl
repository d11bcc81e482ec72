#pragma once
// Definitions of `Cache` (cache.hpp).

#include <utility>

namespace unikv {

namespace detail::cache {

// The tree of a cache: FULL's page size, the arena's window where the layout has Swa.
template <bool HasSwa>
TreeConfig tree_config(const CacheConfig& config) {
    return TreeConfig{.page_size = config.arena.page_sizes.full,
                      .swa_window = HasSwa ? config.arena.model.swa_window_tokens : 0,
                      .events = config.events};
}

}  // namespace detail::cache

template <class P>
Cache<P>::Cache(backend_type& backend, const CacheConfig& config, stream_ref stream)
    : hc_(backend, config.arena, config.host, detail::cache::tree_config<has_swa>(config), stream),
      budget_(config.budget),
      window_(has_swa ? config.arena.model.swa_window_tokens : 0) {}

template <class P>
AllocResult Cache<P>::alloc_extend(const ExtendBatch& batch, std::span<VirtualToken> out) {
    AllocResult r = hc_.allocator().alloc_extend(batch, out);
    while (!r && relieve(r)) r = hc_.allocator().alloc_extend(batch, out);
    return r;
}

template <class P>
AllocResult Cache<P>::alloc_decode(const DecodeBatch& batch, std::span<VirtualToken> out) {
    AllocResult r = hc_.allocator().alloc_decode(batch, out);
    while (!r && relieve(r)) r = hc_.allocator().alloc_decode(batch, out);
    return r;
}

template <class P>
AllocResult Cache<P>::alloc_state(std::span<StateId> out)
    requires has_mamba
{
    AllocResult r = hc_.allocator().alloc_state(out);
    while (!r && relieve(r)) r = hc_.allocator().alloc_state(out);
    return r;
}

template <class P>
bool Cache<P>::relieve(const AllocResult& r) {
    const ArenaSpec& spec = hc_.allocator().spec();
    const auto freed = [&](Component c, std::int64_t pages) {
        const Eviction ev = hc_.evict(c, c == Component::mamba ? pages : pages * spec[c].page_size);
        for (const std::int64_t units : ev.freed) {
            if (units > 0) return true;
        }
        return false;
    };
    if (freed(r.component, r.pages_short)) return true;
    if (r.shortfall != Shortfall::room) return false;
    // The short pool has nothing left to evict, but its bytes can come from another pool's pages: the pools
    // share the arena, and the allocation's compaction hands freed bytes over.
    const std::size_t bytes = static_cast<std::size_t>(r.pages_short) * spec[r.component].page_bytes;
    for (const Component c : all_components) {
        if (c == r.component || !spec[c].present) continue;
        if (freed(c, static_cast<std::int64_t>((bytes + spec[c].page_bytes - 1) / spec[c].page_bytes))) return true;
    }
    return false;
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
        const auto evict_host = [this](Component c, std::int32_t pages_short) {
            const std::int64_t page = c == Component::mamba ? 1 : hc_.allocator().spec()[c].page_size;
            (void)hc_.evict_host(c, pages_short * page);
        };
        settle_writes();
        return retract(hc_.allocator(), hc_.host_pools(), hc_.controller(), retraction_of(request), evict_host);
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

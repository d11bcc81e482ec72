#pragma once
/// \file
/// The values a `Cache` with a storage tier takes and returns (named fields): how a store is attached, what a
/// prefetch started and finished as, and the tier's counters. The calls are `Cache::attach_storage`,
/// `prefetch`, `storage_check` and `detach_storage` (`docs/storage.md`).

#include <chrono>
#include <cstdint>
#include <optional>
#include <string_view>

#include <unikv/transfer/write_policies.hpp>

namespace unikv {

/// How `Cache::attach_storage` attaches a store: what names this instance's pages (with the arena's geometry, the
/// store namespace: `StoreNamespace`), how long a prefetch may take, and an optional write-policy switch.
struct StorageOptions {
    /// The model whose KV the pages hold (any stable name, e.g. the checkpoint's).
    std::string_view model{};
    /// The layout of the page envelopes (any stable name: pools, dtype, layer order).
    std::string_view layout{};
    std::int32_t tp_rank = 0;  ///< tensor-parallel rank of this instance
    std::int32_t tp_size = 1;  ///< tensor-parallel size
    std::int32_t pp_rank = 0;  ///< pipeline-parallel rank
    std::int32_t pp_size = 1;  ///< pipeline-parallel size
    /// A prefetch not finished after this long is reported `timed_out` (its request computes instead); its copies
    /// still land in the host tier when they finish.
    std::chrono::milliseconds prefetch_timeout{2000};
    /// A write policy to switch to at the attach (reference §4.4), e.g. `{.policy = WritePolicy::through}`. From
    /// write-back to a policy that writes through (`through`, `selective`) in `HostMode::cache`, only over a tree
    /// whose host copies form chains from the root (`HostChainBreak`: no SWA or Mamba host copy without its FULL
    /// host copy, no host copy under a parent without a FULL one); otherwise the attach is refused with nothing
    /// changed. `none` is refused (nothing would reach the store).
    std::optional<HostWrites> write{};
};

/// What `Cache::prefetch` did.
struct PrefetchStart {
    enum class Status : std::uint8_t {
        started,     ///< the store is asked; `storage_check` reports the outcome under `id`
        cached,      ///< the cache holds the whole key already (nothing to fetch)
        no_storage,  ///< no store attached
    };
    Status status = Status::no_storage;
    /// Names the prefetch in `PrefetchDone::id` (0 unless started).
    std::uint64_t id = 0;
    /// Tokens of the key the cache held when asked (device or host; the prefetch asks the store for the rest).
    std::int32_t cached_length = 0;
};

/// The outcome of one prefetch, reported once by `Cache::storage_check`.
struct PrefetchDone {
    enum class Status : std::uint8_t {
        grafted,    ///< the store's pages are host copies in the tree now: a match finds them as host hits
        missed,     ///< the store held nothing usable beyond the cache (or a read failed, or the host had no room)
        timed_out,  ///< not finished within `StorageOptions::prefetch_timeout`: compute the request
    };
    std::uint64_t id = 0;
    Status status = Status::missed;
    /// Tokens the tree holds of the key after the graft (its end), 0 unless `grafted`.
    std::int32_t length = 0;
    /// Tokens read from the store (`length` minus what the cache held), 0 unless `grafted`.
    std::int32_t fetched = 0;
};

/// What the storage tier did so far (`Cache::storage_counters`).
struct StorageCounters {
    std::int64_t put_objects = 0;     ///< objects written (or found stored already)
    std::int64_t put_failed = 0;      ///< objects the store declined or failed to write
    std::int64_t prefetches = 0;      ///< prefetches started
    std::int64_t grafted = 0;         ///< of those, grafted
    std::int64_t timed_out = 0;       ///< of those, reported timed out
    std::int64_t fetched_tokens = 0;  ///< tokens grafted from the store
    std::int64_t get_failed = 0;      ///< objects a prefetch read that missed or failed (a corrupt one included)
    std::uint64_t bytes_written = 0;  ///< payload bytes of the objects put
    std::uint64_t bytes_read = 0;     ///< payload bytes of the objects grafted
};

}  // namespace unikv

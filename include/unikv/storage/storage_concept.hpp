#pragma once
/// \file
/// The storage tier (L3) below the host tier: the policy kind a cache bundle names (`storage`), and the backend
/// protocol its stores model (ARCHITECTURE.md §1.8).
///
/// **The policy** is a type with `static constexpr bool needs_separate_pools`: true when the store keeps pages
/// per component and so cannot read them out of one shared host arena (`PageEnvelopeHost`); the cache refuses
/// that combination at compile time. `NoStorage` is the tag of no storage tier; a backend type is its own policy.
///
/// **A backend** stores page objects (`page_object.hpp`) under 128-bit keys (`object_key.hpp`) and serves them
/// in batches, asynchronously: `exists`, `get` and `put` each take a batch and return a `StorageTicket` at
/// once; the batch completes later, reported by `poll` as a `StorageDone` with one `PageResult` per object, in
/// the order given. Protocol (`check_storage_backend<S>()` names the first member missing):
/// * `StorageTicket exists(std::span<const ObjectKey>)`: `hit` when the store holds the key now;
/// * `StorageTicket get(std::span<const ObjectRead>)`: each hit writes the object's payload into its `bytes`
///   (exactly that size; an object of another size, a corrupt or a torn one is a `miss`, and its `bytes` hold
///   garbage); the buffers must stay valid and untouched until the batch completes;
/// * `StorageTicket put(std::span<const ObjectWrite>)`: `hit` when the store holds the object afterwards (a key
///   already stored is not written again), `miss` when it declined it (full of objects being read or written),
///   `error` when writing failed; the buffers must stay valid and unchanged until the batch completes;
/// * `std::span<const StorageDone> poll(std::chrono::nanoseconds wait = {})`: the batches completed since the
///   last call (valid until the next), waiting up to `wait` for one when none has; never blocks with `wait` 0;
/// * `std::size_t in_flight() const`: batches submitted and not yet reported by `poll`;
/// * `StorageStats stats() const`: counters.
/// The item spans themselves are copied at submission. An unreachable store (a node down, a directory gone) is
/// `error` per object, never an exception: the cache computes instead. One thread drives a backend.

#include <chrono>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <span>

#include <unikv/storage/object_key.hpp>

namespace unikv {

/// The outcome for one object of a batch.
enum class PageResult : std::uint8_t {
    hit,    ///< exists: stored; get: served, the bytes are the object's; put: stored (now or before)
    miss,   ///< not stored, or not servable (corrupt, torn, another size); put: declined
    error,  ///< the store could not be asked (I/O error, node down, timeout); the caller treats it as a miss
};

/// Which call a batch came from.
enum class StorageOp : std::uint8_t { exists, get, put };

/// Names one submitted batch; 0 is no batch.
struct StorageTicket {
    std::uint64_t value = 0;
    explicit constexpr operator bool() const noexcept { return value != 0; }
    friend constexpr bool operator==(StorageTicket, StorageTicket) noexcept = default;
};

/// One object to read: its key and kind, and where its payload goes.
struct ObjectRead {
    ObjectKey key{};
    ObjectKind kind = ObjectKind::full;
    std::span<std::byte> bytes{};
};

/// One object to store: its key and kind, and its payload.
struct ObjectWrite {
    ObjectKey key{};
    ObjectKind kind = ObjectKind::full;
    std::span<const std::byte> bytes{};
};

/// A completed batch: its results, one per object in submission order, valid until the next `poll`.
struct StorageDone {
    StorageTicket ticket{};
    StorageOp op = StorageOp::get;
    std::span<const PageResult> results{};
};

/// What a backend did so far.
struct StorageStats {
    std::uint64_t hits = 0;           ///< objects served (get)
    std::uint64_t misses = 0;         ///< objects asked for and not served (get), corrupt ones included
    std::uint64_t corrupt = 0;        ///< of those, objects found but failing their checks
    std::uint64_t errors = 0;         ///< objects of any call that failed for the store's sake
    std::uint64_t stored = 0;         ///< objects written (put)
    std::uint64_t evicted = 0;        ///< objects dropped for room
    std::uint64_t bytes_read = 0;     ///< payload bytes served
    std::uint64_t bytes_written = 0;  ///< payload bytes stored
};

/// Has `static constexpr bool needs_separate_pools`.
template <class S>
inline constexpr bool has_needs_separate_pools_v = requires {
    { S::needs_separate_pools } -> std::convertible_to<bool>;
};

/// True for a storage policy (it says whether it needs separate host pools).
template <class S>
inline constexpr bool is_storage_policy_v = has_needs_separate_pools_v<S>;

/// A storage policy.
template <class S>
concept StoragePolicy = is_storage_policy_v<S>;

/// True when storage `S` needs one host pool per component (`SeparateHostPools`), not a shared host arena.
template <class S>
inline constexpr bool needs_separate_pools_v = [] {
    if constexpr (has_needs_separate_pools_v<S>) {
        return static_cast<bool>(S::needs_separate_pools);
    } else {
        return false;
    }
}();

/// Checks that `S` is a storage policy, with one `unikv:` message. Returns true.
template <class S>
consteval bool check_storage_policy() {
    static_assert(is_storage_policy_v<S>,
                  "unikv: a storage policy says whether it needs separate host pools (static constexpr bool "
                  "needs_separate_pools); use NoStorage or a storage backend (FileStorage, RedisClusterStorage)");
    return true;
}

// ---- the backend protocol: one trait per member ---------------------------------------------------------------

template <class S>
inline constexpr bool has_storage_exists_v = requires(S& s, std::span<const ObjectKey> keys) {
    { s.exists(keys) } -> std::same_as<StorageTicket>;
};
template <class S>
inline constexpr bool has_storage_get_v = requires(S& s, std::span<const ObjectRead> items) {
    { s.get(items) } -> std::same_as<StorageTicket>;
};
template <class S>
inline constexpr bool has_storage_put_v = requires(S& s, std::span<const ObjectWrite> items) {
    { s.put(items) } -> std::same_as<StorageTicket>;
};
template <class S>
inline constexpr bool has_storage_poll_v = requires(S& s, std::chrono::nanoseconds wait) {
    { s.poll(wait) } -> std::same_as<std::span<const StorageDone>>;
    { s.poll() } -> std::same_as<std::span<const StorageDone>>;
};
template <class S>
inline constexpr bool has_storage_in_flight_v = requires(const S& s) {
    { s.in_flight() } -> std::same_as<std::size_t>;
    { s.stats() } -> std::same_as<StorageStats>;
};

/// True for a storage backend (see the file comment).
template <class S>
inline constexpr bool is_storage_backend_v = is_storage_policy_v<S> && has_storage_exists_v<S> && has_storage_get_v<S> &&
                                             has_storage_put_v<S> && has_storage_poll_v<S> && has_storage_in_flight_v<S>;

/// A storage backend.
template <class S>
concept StorageBackend = is_storage_backend_v<S>;

/// Checks that `S` is a storage backend, naming the first member missing. Returns true.
template <class S>
consteval bool check_storage_backend() {
    if constexpr (!is_storage_policy_v<S>) {
        static_assert(is_storage_policy_v<S>, "unikv: a storage backend says whether it needs separate host pools "
                                              "(static constexpr bool needs_separate_pools)");
    } else if constexpr (!has_storage_exists_v<S>) {
        static_assert(has_storage_exists_v<S>, "unikv: a storage backend needs StorageTicket exists(std::span<const ObjectKey>)");
    } else if constexpr (!has_storage_get_v<S>) {
        static_assert(has_storage_get_v<S>, "unikv: a storage backend needs StorageTicket get(std::span<const ObjectRead>)");
    } else if constexpr (!has_storage_put_v<S>) {
        static_assert(has_storage_put_v<S>, "unikv: a storage backend needs StorageTicket put(std::span<const ObjectWrite>)");
    } else if constexpr (!has_storage_poll_v<S>) {
        static_assert(has_storage_poll_v<S>,
                      "unikv: a storage backend needs std::span<const StorageDone> poll(std::chrono::nanoseconds = {})");
    } else {
        static_assert(has_storage_in_flight_v<S>,
                      "unikv: a storage backend needs std::size_t in_flight() const and StorageStats stats() const");
    }
    return true;
}

}  // namespace unikv

#pragma once
// A cache's side of its storage tier: the attached store, the namespace digest its keys start from, the store's
// answers not finished yet and the prefetch reports. The batches on the store are the cache's tickets (kinds
// `store_put` and `prefetch`), which carry what only they need in a `store_part`: a put of one host copy (its node
// host-locked and the host pool leased until the store acknowledges; a buffer-only host's staged copy
// device-locked too, and let go of at the answer), or a prefetch's probe (`exists`) then fetch (`get` into host
// pages it owns, under a lease). Plain values only: the cache stays movable with batches in flight (the store
// writes into host memory, which does not move with the cache).

#include <chrono>
#include <cstdint>
#include <utility>
#include <vector>

#include <unikv/cache/storage_values.hpp>
#include <unikv/component.hpp>
#include <unikv/ids.hpp>
#include <unikv/storage/object_key.hpp>
#include <unikv/storage/storage_concept.hpp>
#include <unikv/tree/handles.hpp>
#include <unikv/tree/keys.hpp>

namespace unikv::detail::cache {

// What a storage ticket carries beyond a copy's common fields (`node`, `component`, its `host` and `device` locks).
template <class Lease>
struct store_part {
    StorageTicket batch{};    // the store's batch in flight
    Lease lease{};            // the host pool's, while the store reads or writes host pages
    std::uint64_t bytes = 0;  // store_put: payload bytes
    // prefetch: its key, the chain keys of the key's pages, the page range [from, end) the fetch reads (FULL pages;
    // the window's SWA pages and the state end at `end`), the fetch's host pages, and its deadline.
    bool fetching = false;  // the probe was answered: `batch` is the fetch
    std::vector<TokenId> tokens{};
    KeyNamespace ns{};
    std::vector<ObjectKey> chain{};
    std::int32_t from = 0;
    std::int32_t end = 0;
    per_component<std::vector<HostPage>> pages{};
    std::chrono::steady_clock::time_point deadline{};
    bool reported = false;  // its `PrefetchDone` went out (a timed-out prefetch reports before it finishes)
};

template <class Store>
struct storage_link {
    Store* store = nullptr;
    std::uint64_t digest = 0;
    std::chrono::milliseconds timeout{};
    // The store's answers of the last `poll` not finished yet (a throw while finishing one leaves the rest here,
    // finished before the next `poll`, while their results are still valid).
    std::vector<StorageDone> answers{};
    std::size_t next_answer = 0;
    std::vector<PrefetchDone> done{};      // what the last `storage_check` reported
    std::vector<PrefetchDone> pending{};   // gathered for the next report
    StorageCounters counters{};
    std::uint64_t next_prefetch = 1;
    // Scratch of the cold paths.
    std::vector<TokenId> prefix{};
    std::vector<ObjectKey> keys{};
    std::vector<ObjectRead> reads{};
    std::vector<ObjectWrite> writes{};
    std::vector<std::int32_t> physical{};
};

// The stand-ins of a cache without a storage tier.
struct no_storage_link {};
struct no_store_part {};

// The link and the tickets' storage part of a cache whose storage policy is `Store` (a backend when `on`) over host
// pools `Host`.
template <bool on, class Store, class Host>
struct storage_parts {
    using link = no_storage_link;
    using part = no_store_part;
};
template <class Store, class Host>
struct storage_parts<true, Store, Host> {
    using link = storage_link<Store>;
    using part = store_part<decltype(std::declval<Host&>().lease())>;
};

}  // namespace unikv::detail::cache

#pragma once
// A cache's side of its storage tier: the attached store, the namespace digest its keys start from, and the tasks in
// flight. A task is one batch on the store: a put of one host copy (its node host-locked and the host pool leased
// until the store acknowledges; a buffer-only host's staged copy device-locked too, and let go of at the answer),
// or a prefetch's probe (`exists`) or fetch (`get` into host pages the task owns, under a lease). Plain values only: the cache stays movable with tasks in flight (the store writes into host
// memory, which does not move with the cache).

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

template <class Lease>
struct storage_task {
    enum class phase : std::uint8_t { put, probe, fetch };
    phase kind = phase::put;
    StorageTicket ticket{};
    // put: the host lock of the copy written and the pool's lease; a staged copy's node, component and device lock.
    LockReceipt lock{};
    Lease lease{};
    NodeRef node{};
    Component component = Component::full;
    LockReceipt device{};
    std::uint64_t bytes = 0;
    // probe and fetch: the prefetch, its key, the chain keys of the key's pages, and the page range [from, end) the
    // fetch reads (FULL pages; the window's SWA pages and the state end at `end`).
    std::uint64_t id = 0;
    std::vector<TokenId> tokens{};
    KeyNamespace ns{};
    std::vector<ObjectKey> chain{};
    std::int32_t from = 0;
    std::int32_t end = 0;
    per_component<std::vector<HostPage>> pages{};
    std::chrono::steady_clock::time_point deadline{};
    bool reported = false;  // its `PrefetchDone` went out (a timed-out prefetch reports before it finishes)
};

template <class Store, class Lease>
struct storage_link {
    using lease_type = Lease;
    Store* store = nullptr;
    std::uint64_t digest = 0;
    std::chrono::milliseconds timeout{};
    std::vector<storage_task<Lease>> tasks{};
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

// The stand-in of a cache without a storage tier.
struct no_storage_link {};

// The link of a cache whose storage policy is `Store` (a backend when `on`) over host pools `Host`.
template <bool on, class Store, class Host>
struct storage_link_for {
    using type = no_storage_link;
};
template <class Store, class Host>
struct storage_link_for<true, Store, Host> {
    using type = storage_link<Store, decltype(std::declval<Host&>().lease())>;
};
template <bool on, class Store, class Host>
using storage_link_t = typename storage_link_for<on, Store, Host>::type;

}  // namespace unikv::detail::cache

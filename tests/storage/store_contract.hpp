#pragma once
// The storage-backend contract, written once and run against every backend (FileStorage, RedisClusterStorage):
// byte-exact round trips of objects of several sizes and kinds, a result per object in submission order,
// misses for what is not stored or not servable as asked, idempotent puts, batches completing independently.

#include <doctest/doctest.h>

#include <cstddef>
#include <map>
#include <vector>

#include "store_support.hpp"

namespace unikv::test {

/// Runs the contract on an empty `store`; object keys are drawn from `base` on (so runs on one store do not meet).
template <class Store>
void check_store_contract(Store& store, std::uint64_t base) {
    static_assert(check_storage_backend<Store>());
    // Three kinds at three sizes, as a hybrid model's FULL pages, SWA windows and Mamba states would be.
    const std::size_t sizes[3] = {64 << 10, 24 << 10, 4096 + 8};
    const ObjectKind kinds[3] = {ObjectKind::full, ObjectKind::swa, ObjectKind::mamba};
    for (int k = 0; k < 3; ++k) {
        std::vector<ObjectKey> keys;
        std::vector<std::vector<std::byte>> payloads;
        for (std::uint64_t i = 0; i < 5; ++i) {
            keys.push_back(test_key(base + 100 * static_cast<std::uint64_t>(k) + i));
            payloads.push_back(marked_payload(base + 100 * static_cast<std::uint64_t>(k) + i, sizes[k]));
        }
        // Not stored yet: exists and get miss, the buffers' contents are not promised.
        auto before = wait_for(store, store.exists(keys));
        CHECK(before == std::vector<PageResult>(5, PageResult::miss));
        std::vector<std::vector<std::byte>> read;
        CHECK(get_all(store, keys, sizes[k], read, kinds[k]) == std::vector<PageResult>(5, PageResult::miss));

        CHECK(put_all(store, std::span<const ObjectKey>(keys).first(3), payloads, kinds[k]) ==
              std::vector<PageResult>(3, PageResult::hit));
        CHECK(wait_for(store, store.exists(keys)) ==
              std::vector<PageResult>{PageResult::hit, PageResult::hit, PageResult::hit, PageResult::miss, PageResult::miss});
        // One result per object in the order asked, stored ones byte-exact.
        const ObjectKey mixed[4] = {keys[3], keys[2], keys[0], keys[4]};
        CHECK(get_all(store, mixed, sizes[k], read, kinds[k]) ==
              std::vector<PageResult>{PageResult::miss, PageResult::hit, PageResult::hit, PageResult::miss});
        CHECK(read[1] == payloads[2]);
        CHECK(read[2] == payloads[0]);
        // Asked at another size or as another kind: a miss, never the bytes.
        CHECK(get_all(store, std::span<const ObjectKey>(keys).first(1), sizes[k] + 8, read, kinds[k]) ==
              std::vector<PageResult>{PageResult::miss});
        CHECK(get_all(store, std::span<const ObjectKey>(keys).first(1), sizes[k], read, kinds[(k + 1) % 3]) ==
              std::vector<PageResult>{PageResult::miss});
        // A put of a stored key is a hit and keeps the object.
        CHECK(put_all(store, std::span<const ObjectKey>(keys).first(1), payloads, kinds[k]) ==
              std::vector<PageResult>{PageResult::hit});
        CHECK(get_all(store, std::span<const ObjectKey>(keys).first(1), sizes[k], read, kinds[k]) ==
              std::vector<PageResult>{PageResult::hit});
        CHECK(read[0] == payloads[0]);
    }

    // Several batches in flight at once (reads and writes): each completes with its own results.
    std::vector<ObjectKey> keys;
    std::vector<std::vector<std::byte>> payloads;
    for (std::uint64_t i = 0; i < 8; ++i) {
        keys.push_back(test_key(base + 1000 + i));
        payloads.push_back(marked_payload(base + 1000 + i, 16 << 10));
    }
    std::vector<ObjectWrite> first, second;
    for (std::size_t i = 0; i < 4; ++i) first.push_back({keys[i], ObjectKind::full, payloads[i]});
    for (std::size_t i = 4; i < 8; ++i) second.push_back({keys[i], ObjectKind::full, payloads[i]});
    const StorageTicket p1 = store.put(first);
    const StorageTicket p2 = store.put(second);
    std::vector<std::vector<std::byte>> read(2, std::vector<std::byte>(16 << 10));
    const ObjectRead early[2] = {{keys[0], ObjectKind::full, read[0]}, {test_key(base + 9999), ObjectKind::full, read[1]}};
    const StorageTicket g = store.get(early);  // keys[0] may or may not be written yet: hit or miss, never wrong bytes
    std::map<std::uint64_t, std::vector<PageResult>> others;
    const auto got = wait_for(store, g, &others);
    REQUIRE(got.size() == 2);
    if (got[0] == PageResult::hit) CHECK(read[0] == payloads[0]);
    CHECK(got[1] == PageResult::miss);
    const auto r1 = others.count(p1.value) != 0 ? others[p1.value] : wait_for(store, p1, &others);
    const auto r2 = others.count(p2.value) != 0 ? others[p2.value] : wait_for(store, p2, &others);
    CHECK(r1 == std::vector<PageResult>(4, PageResult::hit));
    CHECK(r2 == std::vector<PageResult>(4, PageResult::hit));
    std::vector<std::vector<std::byte>> all;
    CHECK(get_all(store, keys, 16 << 10, all) == std::vector<PageResult>(8, PageResult::hit));
    CHECK(all == payloads);
    CHECK(store.in_flight() == 0);
}

}  // namespace unikv::test

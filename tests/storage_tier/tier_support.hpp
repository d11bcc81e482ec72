#pragma once
// Helpers of the storage-tier tests that drive a cache (a `handle_engine.hpp` engine) over a store.

#include <doctest/doctest.h>

#include <chrono>
#include <vector>

#include <unikv/cache.hpp>

namespace tier_support {

// Drives `e`'s `storage_check` until its store holds nothing of it in flight (bounded), returning every prefetch
// outcome reported.
template <class Engine>
std::vector<unikv::PrefetchDone> settle(Engine& e) {
    std::vector<unikv::PrefetchDone> out;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    for (;;) {
        for (const unikv::PrefetchDone& d : e.cache.storage_check(std::chrono::milliseconds(50))) out.push_back(d);
        if (e.cache.storage_in_flight() == 0) return out;
        REQUIRE(std::chrono::steady_clock::now() < deadline);
    }
}

// Acknowledges `e`'s write-throughs in flight: their acks put the host copies to the store.
template <class Engine>
void write_through_acks(Engine& e) {
    (void)e.cache.start_writing();
    e.cache.transfer_stream().synchronize();
    (void)e.cache.writing_check();
}

}  // namespace tier_support

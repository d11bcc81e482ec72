// Every copy engine of BasicCudaBackend on the same page lists, checked row by row: whole and sliced envelopes,
// device-to-device, host-to-device and device-to-host. Runs only on a GPU (scripts/gpu-check.sh).
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include <unikv/backend/cub_copy_engine.cuh>
#include <unikv/backend/cuda_backend.cuh>

using namespace unikv;

namespace {

constexpr std::size_t row_bytes = 256, rows = 16, page_bytes = row_bytes * rows;  // 4 KiB envelopes
constexpr std::int32_t pages = 96;

// Every word of row r of page p holds salt + p * 64 + r: a row copied to the wrong place, or not at all, shows.
std::vector<std::byte> rows_of(std::uint32_t salt) {
    std::vector<std::byte> v(pages * page_bytes);
    for (std::int32_t p = 0; p < pages; ++p) {
        for (std::size_t r = 0; r < rows; ++r) {
            const std::uint32_t m = salt + static_cast<std::uint32_t>(p) * 64 + static_cast<std::uint32_t>(r);
            for (std::size_t w = 0; w < row_bytes / 4; ++w) std::memcpy(v.data() + p * page_bytes + r * row_bytes + w * 4, &m, 4);
        }
    }
    return v;
}

template <class Buffer>
void put(const Buffer& b, const std::vector<std::byte>& v) {
    detail::cuda::check(cudaMemcpy(b.data(), v.data(), v.size(), cudaMemcpyDefault), "cudaMemcpy");
    detail::cuda::check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
}

template <class Buffer>
std::vector<std::byte> get(const Buffer& b) {
    std::vector<std::byte> v(b.size());
    detail::cuda::check(cudaMemcpy(v.data(), b.data(), v.size(), cudaMemcpyDefault), "cudaMemcpy");
    return v;
}

// What the destination must hold after copying `slice` of src_pages[i] onto dst_pages[i].
std::vector<std::byte> expected(std::vector<std::byte> dst, const std::vector<std::byte>& src,
                                const std::vector<std::int32_t>& sp, const std::vector<std::int32_t>& dp,
                                const EnvelopeSlice& slice) {
    for (std::size_t i = 0; i < sp.size(); ++i) {
        for (std::size_t r = 0; r < slice.count; ++r) {
            const std::size_t off = slice.offset + r * slice.stride;
            std::memcpy(dst.data() + dp[i] * page_bytes + off, src.data() + sp[i] * page_bytes + off, slice.bytes);
        }
    }
    return dst;
}

// A mix, so the dispatch itself is tested: every direction gets a different engine.
using MixedEngines = PerDirectionCopyEngine<CubBatchedCopyEngine, MemcpyBatchCopyEngine, KernelCopyEngine>;

}  // namespace

TEST_CASE_TEMPLATE("every copy engine moves exactly the listed rows, whole and sliced, in every direction", Engine,
                   KernelCopyEngine, MemcpyBatchCopyEngine, CubBatchedCopyEngine, MixedEngines, DefaultCopyEngine) {
    BasicCudaBackend<Engine> backend;
    auto stream = backend.make_stream();
    auto arena = backend.allocate_device(pages * page_bytes);
    auto other = backend.allocate_device(pages * page_bytes);
    auto host = backend.allocate_pinned(pages * page_bytes);
    // The same lists for every engine: a seeded shuffle, 60 of the 96 pages.
    std::vector<std::int32_t> sp(pages), dp(pages);
    std::iota(sp.begin(), sp.end(), 0);
    std::iota(dp.begin(), dp.end(), 0);
    std::mt19937 rng(11);
    std::shuffle(sp.begin(), sp.end(), rng);
    std::shuffle(dp.begin(), dp.end(), rng);
    sp.resize(60);
    dp.resize(60);
    const EnvelopeSlice slices[] = {
        EnvelopeSlice::whole(page_bytes),
        {.offset = 2 * row_bytes, .bytes = 5 * row_bytes, .stride = page_bytes, .count = 1},  // rows 2..6
        {.offset = 64, .bytes = 64, .stride = row_bytes, .count = rows},                        // a layer of each row
        {.offset = 4, .bytes = 44, .stride = row_bytes, .count = rows},                         // not 16-byte aligned
    };
    const auto arena_rows = rows_of(1'000'000), other_rows = rows_of(2'000'000), host_rows = rows_of(3'000'000);
    for (const EnvelopeSlice& slice : slices) {
        CAPTURE(slice.offset);
        CAPTURE(slice.count);
        put(arena, arena_rows);
        put(other, other_rows);
        std::memcpy(host.data(), host_rows.data(), host_rows.size());

        const auto before = backend.counters().host_synchronizations;
        backend.copy_page_slices_async(arena.region(), sp, other.region(), dp, page_bytes, slice, stream);  // D2D
        backend.copy_page_slices_async(host.region(), sp, arena.region(), dp, page_bytes, slice, stream);   // H2D
        CHECK(backend.counters().host_synchronizations == before);
        stream.ref().synchronize();
        CHECK(get(other) == expected(other_rows, arena_rows, sp, dp, slice));
        const auto arena_now = expected(arena_rows, host_rows, sp, dp, slice);
        CHECK(get(arena) == arena_now);

        // D2H from the rows the H2D just wrote, back onto the host pool with the lists swapped.
        backend.copy_page_slices_async(arena.region(), dp, host.region(), sp, page_bytes, slice, stream);
        auto done = backend.make_event();
        done.ref().record(stream);
        done.ref().synchronize();
        CHECK_FALSE(done.ref().failed());
        const std::vector<std::byte> host_now(host.data(), host.data() + host.size());
        CHECK(host_now == expected(host_rows, arena_now, dp, sp, slice));
    }
}

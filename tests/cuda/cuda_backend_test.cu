// CUDA backend tests: built in every CUDA configuration, run only on a machine with a GPU
// (scripts/gpu-check.sh). Contents are read back with cudaMemcpy and compared byte by byte.
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <numeric>
#include <random>
#include <thread>
#include <vector>

#include <unikv/backend/cuda_backend.cuh>

using namespace unikv;

namespace {

std::vector<std::byte> pattern(std::size_t n, unsigned salt) {
    std::vector<std::byte> v(n);
    for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<std::byte>((i * 131 + salt * 7 + (i >> 9)) & 0xff);
    return v;
}

template <class Buffer>
void upload(const Buffer& b, const std::vector<std::byte>& v) {
    detail::cuda::check(cudaMemcpy(b.data(), v.data(), v.size(), cudaMemcpyDefault), "cudaMemcpy");
    // A pageable upload may return before its DMA lands, and the backend's streams do not wait for it.
    detail::cuda::check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
}

template <class Buffer>
std::vector<std::byte> download(const Buffer& b) {
    std::vector<std::byte> v(b.size());
    detail::cuda::check(cudaMemcpy(v.data(), b.data(), v.size(), cudaMemcpyDefault), "cudaMemcpy");
    return v;
}

}  // namespace

TEST_CASE("device page copies preserve every byte in random orders and envelope sizes, without host syncs") {
    CudaBackend backend;
    auto stream = backend.make_stream();
    std::mt19937 rng(7);
    for (std::size_t page_bytes : {1ul, 3ul, 4096ul, 16384ul + 8, 1ul << 20}) {
        const std::int32_t pages = page_bytes >= (1u << 20) ? 8 : 200;
        auto src = backend.allocate_device(pages * page_bytes);
        auto dst = backend.allocate_pinned(pages * page_bytes);
        const auto src_bytes = pattern(src.size(), static_cast<unsigned>(page_bytes));
        upload(src, src_bytes);
        std::vector<std::int32_t> sp(static_cast<std::size_t>(pages)), dp(sp.size());
        std::iota(sp.begin(), sp.end(), 0);
        std::iota(dp.begin(), dp.end(), 0);
        std::shuffle(sp.begin(), sp.end(), rng);
        std::shuffle(dp.begin(), dp.end(), rng);
        const std::size_t n = sp.size() / 2 + 1;
        const auto before = backend.counters();
        backend.copy_pages_async(src.region(), std::span(sp).first(n), dst.region(), std::span(dp).first(n),
                                 page_bytes, stream);
        CHECK(backend.counters().host_synchronizations == before.host_synchronizations);
        stream.ref().synchronize();
        const auto got = download(dst);
        for (std::size_t i = 0; i < n; ++i) {
            CHECK(std::memcmp(got.data() + dp[i] * page_bytes, src_bytes.data() + sp[i] * page_bytes, page_bytes) == 0);
        }
        for (std::size_t i = n; i < dp.size(); ++i) {
            CHECK(std::all_of(got.begin() + dp[i] * page_bytes, got.begin() + (dp[i] + 1) * page_bytes,
                              [](std::byte b) { return b == std::byte{0}; }));
        }
    }
}

TEST_CASE("device sliced copy, in-arena move, fill, and stream ordering through events") {
    CudaBackend backend;
    auto load = backend.make_stream();
    auto compute = backend.make_stream();
    auto loaded = backend.make_event();
    constexpr std::size_t entry = 48, layer = 16, ps = 4, page_bytes = entry * ps;
    auto host = backend.allocate_pinned(8 * page_bytes);
    auto arena = backend.allocate_device(16 * page_bytes);
    const auto host_bytes = pattern(host.size(), 3);
    std::memcpy(host.data(), host_bytes.data(), host_bytes.size());
    const std::vector<std::int32_t> h{5, 1}, a{2, 9}, moved{12, 13}, zero{9};
    backend.copy_page_slices_async(host.region(), h, arena.region(), a, page_bytes,
                                   {.offset = layer, .bytes = layer, .stride = entry, .count = ps}, load);
    loaded.ref().record(load);
    compute.ref().wait(loaded);
    backend.copy_pages_async(arena.region(), a, arena.region(), moved, page_bytes, compute);
    backend.fill_pages_async(arena.region(), zero, page_bytes, std::byte{0}, compute);
    compute.ref().synchronize();
    const auto got = download(arena);
    for (std::size_t i = 0; i < h.size(); ++i) {
        for (std::size_t b = 0; b < page_bytes; ++b) {
            const bool in_slice = b % entry >= layer && b % entry < 2 * layer;
            const std::byte want = in_slice ? host_bytes[h[i] * page_bytes + b] : std::byte{0};
            CHECK(got[moved[i] * page_bytes + b] == want);
        }
    }
    CHECK(std::all_of(got.begin() + 9 * page_bytes, got.begin() + 10 * page_bytes,
                      [](std::byte b) { return b == std::byte{0}; }));
    CHECK(backend.counters().stream_waits == 1);
    CHECK_THROWS_AS(backend.copy_pages_async(arena.region(), a, arena.region(), std::vector<std::int32_t>{2, 3},
                                             page_bytes, compute),
                    unikv::logic_error);
}

TEST_CASE("a thousand small copies queue without a host wait, and each lands where it was sent") {
    CudaBackend backend;
    auto s = backend.make_stream();
    constexpr std::size_t page_bytes = 64;
    constexpr std::int32_t copies = 1000;
    auto src = backend.allocate_device(2 * copies * page_bytes);
    auto dst = backend.allocate_device(2 * copies * page_bytes);
    const auto bytes = pattern(src.size(), 13);
    upload(src, bytes);
    const auto before = backend.counters().host_synchronizations;
    for (std::int32_t i = 0; i < copies; ++i) {  // per-layer loads look like this: many short lists
        const std::vector<std::int32_t> sp{2 * i, 2 * i + 1}, dp{2 * copies - 1 - 2 * i, 2 * copies - 2 - 2 * i};
        backend.copy_pages_async(src.region(), sp, dst.region(), dp, page_bytes, s);
    }
    CHECK(backend.counters().host_synchronizations == before);
    s.ref().synchronize();
    const auto got = download(dst);
    for (std::int32_t p = 0; p < 2 * copies; ++p) {
        const auto from = static_cast<std::size_t>(p) * page_bytes;
        const auto to = static_cast<std::size_t>(2 * copies - 1 - p) * page_bytes;
        REQUIRE(std::memcmp(got.data() + to, bytes.data() + from, page_bytes) == 0);
    }
}

TEST_CASE("two host threads queue short copies on their own streams at once; each copy lands") {
    CudaBackend backend;
    constexpr std::size_t page_bytes = 48;  // not a multiple of 16: the bytewise path too
    constexpr std::int32_t copies = 400;    // per thread; both together stay under the ring's 1024 lists
    auto src = backend.allocate_device(4 * copies * page_bytes);
    auto dst = backend.allocate_device(4 * copies * page_bytes);
    const auto bytes = pattern(src.size(), 17);
    upload(src, bytes);
    auto streams = std::array{backend.make_stream(), backend.make_stream()};
    auto queue = [&](std::int32_t thread) {  // thread t owns pages [2 * copies * t, 2 * copies * (t + 1))
        const std::int32_t base = 2 * copies * thread;
        for (std::int32_t i = 0; i < copies; ++i) {
            const std::vector<std::int32_t> sp{base + 2 * i, base + 2 * i + 1};
            const std::vector<std::int32_t> dp{base + 2 * copies - 1 - 2 * i, base + 2 * copies - 2 - 2 * i};
            backend.copy_pages_async(src.region(), sp, dst.region(), dp, page_bytes, streams[static_cast<std::size_t>(thread)]);
        }
    };
    const auto before = backend.counters().host_synchronizations;
    std::thread other(queue, 1);
    queue(0);
    other.join();
    CHECK(backend.counters().host_synchronizations == before);
    for (auto& s : streams) s.ref().synchronize();
    const auto got = download(dst);
    for (std::int32_t t = 0; t < 2; ++t) {
        for (std::int32_t p = 0; p < 2 * copies; ++p) {
            const auto from = static_cast<std::size_t>(2 * copies * t + p) * page_bytes;
            const auto to = static_cast<std::size_t>(2 * copies * t + 2 * copies - 1 - p) * page_bytes;
            REQUIRE(std::memcmp(got.data() + to, bytes.data() + from, page_bytes) == 0);
        }
    }
}

TEST_CASE("more index lists than the staging ring holds still copy correctly") {
    CudaBackend backend;
    auto s = backend.make_stream();
    constexpr std::size_t page_bytes = 16;
    constexpr std::int32_t pages = 100000;
    auto src = backend.allocate_device(pages * page_bytes);
    auto dst = backend.allocate_device(pages * page_bytes);
    const auto bytes = pattern(src.size(), 11);
    upload(src, bytes);
    std::vector<std::int32_t> sp(pages), dp(pages);
    std::iota(sp.begin(), sp.end(), 0);
    std::reverse_copy(sp.begin(), sp.end(), dp.begin());
    // 2 x 100000 indices per call x 6 calls = 1.2M indices: more than the 1M-index ring, so it wraps and reuses
    // ranges behind their events.
    for (int round = 0; round < 6; ++round) backend.copy_pages_async(src.region(), sp, dst.region(), dp, page_bytes, s);
    s.ref().synchronize();
    const auto got = download(dst);
    for (std::int32_t i = 0; i < pages; i += 997) {
        CHECK(std::memcmp(got.data() + dp[i] * page_bytes, bytes.data() + sp[i] * page_bytes, page_bytes) == 0);
    }
}

TEST_CASE("sliced copies whose runs span several warp units, 16-byte aligned or not, copy exactly the slice") {
    CudaBackend backend;
    auto s = backend.make_stream();
    constexpr std::size_t page_bytes = 3 * 20000;
    constexpr std::int32_t pages = 24;
    for (const EnvelopeSlice slice : {EnvelopeSlice{.offset = 48, .bytes = 2 * 4096 + 40, .stride = 20000, .count = 3},
                                      EnvelopeSlice{.offset = 41, .bytes = 4096 + 7, .stride = 19999, .count = 3},
                                      EnvelopeSlice::whole(page_bytes)}) {
        auto src = backend.allocate_device(pages * page_bytes);
        auto dst = backend.allocate_device(pages * page_bytes);
        const auto bytes = pattern(src.size(), 5);
        upload(src, bytes);
        std::vector<std::int32_t> sp(pages / 2), dp(pages / 2);
        for (std::int32_t i = 0; i < pages / 2; ++i) {
            sp[static_cast<std::size_t>(i)] = 2 * i + 1;
            dp[static_cast<std::size_t>(i)] = pages - 2 - 2 * i;
        }
        backend.copy_page_slices_async(src.region(), sp, dst.region(), dp, page_bytes, slice, s);
        s.ref().synchronize();
        std::vector<std::byte> want(dst.size(), std::byte{0});
        for (std::size_t i = 0; i < sp.size(); ++i) {
            for (std::size_t r = 0; r < slice.count; ++r) {
                const std::size_t off = slice.offset + r * slice.stride;
                std::memcpy(want.data() + static_cast<std::size_t>(dp[i]) * page_bytes + off,
                            bytes.data() + static_cast<std::size_t>(sp[i]) * page_bytes + off, slice.bytes);
            }
        }
        CHECK(download(dst) == want);
    }
}

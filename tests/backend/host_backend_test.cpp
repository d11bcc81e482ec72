#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <random>
#include <thread>
#include <vector>

#include <unikv/backend/host_backend.hpp>

using namespace unikv;

namespace {

// Fills every byte of the region with a value derived from its address and a salt, so a byte copied to the
// wrong place, or not copied, is visible.
template <MemorySpace S>
void paint(basic_region_ref<S> r, std::uint32_t salt) {
    for (std::size_t i = 0; i < r.size; ++i) r.data[i] = static_cast<std::byte>((i * 131 + salt * 7 + (i >> 9)) & 0xff);
}

template <MemorySpace A, MemorySpace B>
bool page_equals(basic_region_ref<A> a, std::int32_t pa, basic_region_ref<B> b, std::int32_t pb,
                 std::size_t page_bytes) {
    return std::memcmp(a.data + pa * page_bytes, b.data + pb * page_bytes, page_bytes) == 0;
}

std::vector<std::int32_t> iota_pages(std::int32_t n) {
    std::vector<std::int32_t> v(static_cast<std::size_t>(n));
    std::iota(v.begin(), v.end(), 0);
    return v;
}

}  // namespace

TEST_CASE("page copies preserve every byte of every page in random orders and envelope sizes") {
    for (ExecutionMode mode : {ExecutionMode::asynchronous, ExecutionMode::manual}) {
        HostBackend backend({.mode = mode});
        auto stream = backend.make_stream();
        std::mt19937 rng(42);
        // The two largest envelope sizes copy more than the streaming threshold, 65544-byte ones neither
        // 16-byte multiples nor all 16-byte aligned, so the vector body, its tail and the fallback all run.
        for (std::size_t page_bytes : {1ul, 3ul, 64ul, 4096ul, 16384ul + 8, 65536ul + 8, 1ul << 20}) {
            const std::int32_t pages =
                page_bytes > 65536 ? static_cast<std::int32_t>(2 * detail::streaming_copy_threshold / page_bytes + 8) : 40;
            auto src = backend.allocate_device(pages * page_bytes);
            auto dst = backend.allocate_pinned(pages * page_bytes);
            paint(src.region(), static_cast<std::uint32_t>(page_bytes));
            paint(dst.region(), 999);
            auto before = std::vector<std::byte>(dst.data(), dst.data() + dst.size());

            auto src_pages = iota_pages(pages);
            auto dst_pages = iota_pages(pages);
            std::shuffle(src_pages.begin(), src_pages.end(), rng);
            std::shuffle(dst_pages.begin(), dst_pages.end(), rng);
            const std::size_t n = static_cast<std::size_t>(pages) / 2 + 1;  // leave some destinations untouched
            backend.copy_pages_async(src.region(), std::span(src_pages).first(n), dst.region(),
                                     std::span(dst_pages).first(n), page_bytes, stream);
            stream.ref().synchronize();
            for (std::size_t i = 0; i < n; ++i) {
                CHECK(page_equals(src.region(), src_pages[i], dst.region(), dst_pages[i], page_bytes));
            }
            for (std::size_t i = n; i < dst_pages.size(); ++i) {
                const std::size_t off = static_cast<std::size_t>(dst_pages[i]) * page_bytes;
                CHECK(std::memcmp(dst.data() + off, before.data() + off, page_bytes) == 0);
            }
        }
    }
}

TEST_CASE("the streaming copy equals memcpy at every alignment and tail length") {
    std::vector<std::byte> src(8192 + 64);
    std::vector<std::byte> dst(8192 + 64);
    device_region_ref s{src.data(), src.size()};
    paint(s, 5);
    for (std::size_t src_off : {0ul, 1ul, 8ul, 16ul}) {
        for (std::size_t dst_off : {0ul, 3ul, 16ul}) {
            for (std::size_t bytes : {0ul, 1ul, 15ul, 16ul, 63ul, 64ul, 65ul, 1000ul, 4096ul + 17, 8192ul}) {
                std::fill(dst.begin(), dst.end(), std::byte{0xEE});
                // Align the bases to 16 bytes, so offset 0 and 16 take the vector body.
                std::byte* d = dst.data() + (16 - reinterpret_cast<std::uintptr_t>(dst.data()) % 16) % 16 + dst_off;
                const std::byte* from = src.data() + (16 - reinterpret_cast<std::uintptr_t>(src.data()) % 16) % 16 + src_off;
                detail::copy_streaming(d, from, bytes);
                CHECK(std::memcmp(d, from, bytes) == 0);
                CHECK(d[bytes] == std::byte{0xEE});  // nothing written past the end
                CHECK((d == dst.data() || d[-1] == std::byte{0xEE}));
            }
        }
    }
}

TEST_CASE("a compaction move inside one region copies disjoint page sets, including adjacent runs") {
    HostBackend backend({.mode = ExecutionMode::manual});
    auto stream = backend.make_stream();
    constexpr std::size_t page_bytes = 256;
    auto arena = backend.allocate_device(32 * page_bytes);
    paint(arena.region(), 5);
    const std::vector<std::byte> original(arena.data(), arena.data() + arena.size());
    const std::vector<std::int32_t> src{20, 21, 22, 9, 30};
    const std::vector<std::int32_t> dst{3, 4, 5, 1, 10};
    backend.copy_pages_async(arena.region(), src, arena.region(), dst, page_bytes, stream);
    CHECK(backend.run_all() == 1);
    for (std::size_t i = 0; i < src.size(); ++i) {
        CHECK(std::memcmp(arena.data() + dst[i] * page_bytes, original.data() + src[i] * page_bytes, page_bytes) == 0);
        CHECK(std::memcmp(arena.data() + src[i] * page_bytes, original.data() + src[i] * page_bytes, page_bytes) == 0);
    }
    CHECK(std::memcmp(arena.data() + 2 * page_bytes, original.data() + 2 * page_bytes, page_bytes) == 0);
}

TEST_CASE("bad copy requests are rejected with logic_error and queue nothing") {
    HostBackend backend({.mode = ExecutionMode::manual});
    auto stream = backend.make_stream();
    constexpr std::size_t page_bytes = 64;
    auto arena = backend.allocate_device(16 * page_bytes);
    auto other = backend.allocate_device(16 * page_bytes);
    const std::vector<std::int32_t> a{1, 2, 3};
    const std::vector<std::int32_t> overlapping{3, 4, 5};
    const std::vector<std::int32_t> duplicate_dst{7, 7, 8};
    const std::vector<std::int32_t> out_of_range{1, 2, 16};
    const std::vector<std::int32_t> negative{1, -1, 2};
    CHECK_THROWS_AS(backend.copy_pages_async(arena.region(), a, arena.region(), overlapping, page_bytes, stream),
                    unikv::logic_error);
    CHECK_THROWS_AS(backend.copy_pages_async(arena.region(), a, other.region(), duplicate_dst, page_bytes, stream),
                    unikv::logic_error);
    CHECK_THROWS_AS(backend.copy_pages_async(arena.region(), a, other.region(), out_of_range, page_bytes, stream),
                    unikv::logic_error);
    CHECK_THROWS_AS(backend.copy_pages_async(arena.region(), negative, other.region(), a, page_bytes, stream),
                    unikv::logic_error);
    CHECK_THROWS_AS(backend.copy_pages_async(arena.region(), a, other.region(), std::span(a).first(2), page_bytes,
                                             stream),
                    unikv::logic_error);
    CHECK_THROWS_AS(backend.copy_page_slices_async(arena.region(), a, other.region(), a, page_bytes,
                                                   {.offset = 60, .bytes = 8, .stride = 0, .count = 1}, stream),
                    unikv::logic_error);
    // Two views of one arena with different bases: page 0 of the upper view is page 8 of the whole arena.
    const device_region_ref upper{arena.data() + 8 * page_bytes, 8 * page_bytes};
    const std::vector<std::int32_t> whole_8{8};
    const std::vector<std::int32_t> upper_0{0};
    CHECK_THROWS_AS(backend.copy_pages_async(arena.region(), whole_8, upper, upper_0, page_bytes, stream),
                    unikv::logic_error);
    // Slices whose end would wrap around size_t are rejected, not accepted as tiny.
    CHECK_THROWS_AS(backend.copy_page_slices_async(arena.region(), a, other.region(), a, page_bytes,
                                                   {.offset = 0, .bytes = 8, .stride = std::size_t{1} << 63, .count = 3},
                                                   stream),
                    unikv::logic_error);
    CHECK_THROWS_AS(backend.copy_page_slices_async(arena.region(), a, other.region(), a, page_bytes,
                                                   {.offset = SIZE_MAX - 3, .bytes = 8, .stride = 0, .count = 1}, stream),
                    unikv::logic_error);
    CHECK_THROWS_AS(backend.copy_page_slices_async(arena.region(), a, other.region(), a, page_bytes, {}, stream),
                    unikv::logic_error);
    CHECK(backend.queued(stream) == 0);
    CHECK_THROWS_WITH_AS(backend.copy_pages_async(arena.region(), a, other.region(), out_of_range, page_bytes, stream),
                         doctest::Contains("copy_pages_async: destination page 16 is outside its region of 16 pages"),
                         unikv::logic_error);
}

TEST_CASE("duplicates and overlaps are found among sparse pages of a large region too") {
    HostBackend backend({.mode = ExecutionMode::manual});
    auto stream = backend.make_stream();
    auto big = backend.allocate_device(std::size_t{1} << 22);  // 4 Mi one-byte pages: the sorted path
    const std::vector<std::int32_t> src{10, 3'000'000, 77};
    const std::vector<std::int32_t> dup{4'000'000, 5, 4'000'000};
    const std::vector<std::int32_t> hits_src{4'000'000, 3'000'000, 6};
    const std::vector<std::int32_t> fine{4'000'000, 3'000'001, 6};
    CHECK_THROWS_AS(backend.copy_pages_async(big.region(), src, big.region(), dup, 1, stream), unikv::logic_error);
    CHECK_THROWS_AS(backend.copy_pages_async(big.region(), src, big.region(), hits_src, 1, stream), unikv::logic_error);
    big.data()[3'000'000] = std::byte{0x21};
    backend.copy_pages_async(big.region(), src, big.region(), fine, 1, stream);
    backend.run_all();
    CHECK(big.data()[3'000'001] == std::byte{0x21});
}

TEST_CASE("handles of another backend, empty handles and impossible buffer sizes are rejected") {
    HostBackend a({.mode = ExecutionMode::manual});
    HostBackend b({.mode = ExecutionMode::manual});
    auto sa = a.make_stream();
    auto eb = b.make_event();
    auto region = a.allocate_device(64);
    const std::vector<std::int32_t> p{0}, q{1};
    CHECK_THROWS_AS(sa.ref().wait(eb), unikv::logic_error);
    CHECK_THROWS_AS(eb.ref().record(sa), unikv::logic_error);
    CHECK_THROWS_AS(b.copy_pages_async(region.region(), p, region.region(), q, 32, sa), unikv::logic_error);
    CHECK_THROWS_AS(b.run_next(sa), unikv::logic_error);
    CHECK_THROWS_AS(a.copy_pages_async(region.region(), p, region.region(), q, 32, HostBackend::stream_ref{}),
                    unikv::logic_error);
    CHECK_THROWS_AS(HostBackend::stream_ref{}.synchronize(), unikv::logic_error);
    CHECK_THROWS_AS((void)HostBackend::event_ref{}.query(), unikv::logic_error);
    CHECK_THROWS_AS((void)a.allocate_device(SIZE_MAX - 100), unikv::out_of_memory);
    CHECK(a.queued(sa) == 0);
}

TEST_CASE("a layer-sliced copy touches only its byte range of each envelope") {
    HostBackend backend({.mode = ExecutionMode::manual});
    auto stream = backend.make_stream();
    // Token-major envelope of 4 tokens x 3 layers x 8 bytes; copy layer 1 only.
    constexpr std::size_t layer_bytes = 8, entry_bytes = 24, page_size = 4, page_bytes = entry_bytes * page_size;
    auto src = backend.allocate_device(8 * page_bytes);
    auto dst = backend.allocate_pinned(8 * page_bytes);
    paint(src.region(), 1);
    paint(dst.region(), 2);
    const std::vector<std::byte> before(dst.data(), dst.data() + dst.size());
    const std::vector<std::int32_t> s{5, 2}, d{1, 6};
    backend.copy_page_slices_async(src.region(), s, dst.region(), d, page_bytes,
                                   {.offset = layer_bytes, .bytes = layer_bytes, .stride = entry_bytes, .count = page_size},
                                   stream);
    backend.run_all();
    for (std::size_t i = 0; i < s.size(); ++i) {
        for (std::size_t b = 0; b < page_bytes; ++b) {
            const bool in_layer_1 = b % entry_bytes >= layer_bytes && b % entry_bytes < 2 * layer_bytes;
            const std::byte got = dst.data()[d[i] * page_bytes + b];
            const std::byte want = in_layer_1 ? src.data()[s[i] * page_bytes + b] : before[d[i] * page_bytes + b];
            CHECK(got == want);
        }
    }
    CHECK(std::equal(dst.data(), dst.data() + page_bytes, before.begin()));  // page 0 untouched
}

TEST_CASE("manual mode: a queued copy has not touched its destination and reads the source when it runs") {
    HostBackend backend({.mode = ExecutionMode::manual});
    auto stream = backend.make_stream();
    auto done = backend.make_event();
    constexpr std::size_t page_bytes = 32;
    auto src = backend.allocate_device(4 * page_bytes);
    auto dst = backend.allocate_pinned(4 * page_bytes);
    std::memset(src.data(), 0x11, src.size());
    const std::vector<std::int32_t> p{2};
    backend.copy_pages_async(src.region(), p, dst.region(), p, page_bytes, stream);
    done.ref().record(stream);
    CHECK_FALSE(done.ref().query());
    CHECK(dst.data()[2 * page_bytes] == std::byte{0});  // not copied yet
    std::memset(src.data() + 2 * page_bytes, 0x5a, page_bytes);  // the source changes before the copy runs
    CHECK(backend.queued(stream) == 2);
    CHECK(backend.run_next(stream));
    CHECK_FALSE(done.ref().query());  // the record has not executed yet
    CHECK(dst.data()[2 * page_bytes] == std::byte{0x5a});
    CHECK(dst.data()[2 * page_bytes + page_bytes - 1] == std::byte{0x5a});
    CHECK(backend.run_next(stream));
    CHECK(done.ref().query());
    CHECK_FALSE(backend.run_next(stream));
}

TEST_CASE("a stream wait orders later work after the awaited copy, without blocking the host") {
    HostBackend backend({.mode = ExecutionMode::manual});
    auto load = backend.make_stream();
    auto compute = backend.make_stream();
    auto loaded = backend.make_event();
    constexpr std::size_t page_bytes = 16;
    auto host = backend.allocate_pinned(4 * page_bytes);
    auto arena = backend.allocate_device(8 * page_bytes);
    std::memset(host.data(), 0x77, host.size());
    const std::vector<std::int32_t> h{1}, a{3}, moved{6};
    backend.copy_pages_async(host.region(), h, arena.region(), a, page_bytes, load);
    loaded.ref().record(load);
    const auto before = backend.counters();
    compute.ref().wait(loaded);
    backend.copy_pages_async(arena.region(), a, arena.region(), moved, page_bytes, compute);
    CHECK(backend.counters().stream_waits == before.stream_waits + 1);
    CHECK(backend.counters().host_synchronizations == before.host_synchronizations);
    CHECK_FALSE(backend.run_next(compute));  // blocked on the load
    CHECK(arena.data()[6 * page_bytes] == std::byte{0});
    CHECK(backend.run_next(load));
    CHECK_FALSE(backend.run_next(compute));  // the record has not run yet
    CHECK(backend.run_next(load));
    CHECK(backend.run_next(compute));  // the wait
    CHECK(backend.run_next(compute));  // the move
    CHECK(arena.data()[6 * page_bytes] == std::byte{0x77});
}

TEST_CASE("host synchronization is counted and in manual mode runs the work it waits for") {
    HostBackend backend({.mode = ExecutionMode::manual});
    auto s = backend.make_stream();
    auto e = backend.make_event();
    CHECK(e.ref().query());  // never recorded
    constexpr std::size_t page_bytes = 8;
    auto a = backend.allocate_device(2 * page_bytes);
    auto b = backend.allocate_device(2 * page_bytes);
    std::memset(a.data(), 3, a.size());
    const std::vector<std::int32_t> p{1};
    backend.copy_pages_async(a.region(), p, b.region(), p, page_bytes, s);
    e.ref().record(s);
    e.ref().synchronize();
    CHECK(b.data()[page_bytes] == std::byte{3});
    CHECK(backend.counters().host_synchronizations == 1);
    s.ref().synchronize();
    CHECK(backend.counters().host_synchronizations == 2);
    CHECK(backend.counters().bytes_copied == page_bytes);


    // Synchronizing on an event behind a cross-stream wait runs the awaited stream's work first.
    auto upstream = backend.make_stream();
    auto up_done = backend.make_event();
    auto down_done = backend.make_event();
    std::memset(a.data(), 9, a.size());
    backend.copy_pages_async(a.region(), p, b.region(), p, page_bytes, upstream);
    up_done.ref().record(upstream);
    s.ref().wait(up_done);
    down_done.ref().record(s);
    down_done.ref().synchronize();
    CHECK(up_done.ref().query());
    CHECK(b.data()[page_bytes] == std::byte{9});
}

TEST_CASE("like CUDA: a query sees the latest record, a wait binds to the record current when it was queued") {
    HostBackend backend({.mode = ExecutionMode::manual});
    auto a = backend.make_stream();
    auto b = backend.make_stream();
    auto c = backend.make_stream();
    auto e = backend.make_event();
    e.ref().record(a);
    c.ref().wait(e);  // binds to the record on a
    e.ref().record(b);
    CHECK_FALSE(e.ref().query());
    CHECK_FALSE(backend.run_next(c));
    CHECK(backend.run_next(a));      // the first record executes: c's wait is released...
    CHECK_FALSE(e.ref().query());    // ...while the latest record (on b) is still pending
    CHECK(backend.run_next(c));
    CHECK(backend.run_next(b));
    CHECK(e.ref().query());

    // The other order: the latest record runs first; the query says done, the earlier-bound wait still waits.
    auto d = backend.make_stream();
    e.ref().record(a);
    d.ref().wait(e);
    e.ref().record(b);
    CHECK(backend.run_next(b));
    CHECK(e.ref().query());
    CHECK_FALSE(backend.run_next(d));
    CHECK(backend.run_next(a));
    CHECK(backend.run_next(d));
}

TEST_CASE("manual mode: synchronizing one stream runs only the work it depends on") {
    HostBackend backend({.mode = ExecutionMode::manual});
    constexpr std::size_t page_bytes = 8;
    auto buf = backend.allocate_device(8 * page_bytes);  // outlives the streams, whose queued work runs at destruction
    auto a = backend.make_stream();
    auto upstream = backend.make_stream();
    auto unrelated = backend.make_stream();
    auto ready = backend.make_event();
    std::memset(buf.data(), 0x44, page_bytes);
    const std::vector<std::int32_t> p0{0}, p1{1}, p2{2}, p3{3};
    backend.copy_pages_async(buf.region(), p0, buf.region(), p1, page_bytes, unrelated);
    backend.copy_pages_async(buf.region(), p0, buf.region(), p2, page_bytes, upstream);
    ready.ref().record(upstream);
    backend.copy_pages_async(buf.region(), p0, buf.region(), p3, page_bytes, upstream);  // after the record
    a.ref().wait(ready);
    a.ref().synchronize();
    CHECK(buf.data()[2 * page_bytes] == std::byte{0x44});  // the awaited copy ran
    CHECK(buf.data()[1 * page_bytes] == std::byte{0});     // the unrelated stream did not
    CHECK(buf.data()[3 * page_bytes] == std::byte{0});     // nor upstream work queued after the record
    CHECK(backend.queued(unrelated) == 1);
    CHECK(backend.queued(upstream) == 1);
}

TEST_CASE("destroying a stream, or moving owners, keeps queued work and handles intact") {
    for (ExecutionMode mode : {ExecutionMode::asynchronous, ExecutionMode::manual}) {
        HostBackend original({.mode = mode});
        HostBackend backend(std::move(original));  // handles point at the engine, which does not move
        constexpr std::size_t page_bytes = 16;
        auto buf = backend.allocate_device(4 * page_bytes);
        std::memset(buf.data(), 0x61, page_bytes);
        auto done = backend.make_event();
        auto moved_event = std::move(done);
        {
            auto s = backend.make_stream();
            auto t = std::move(s);
            const std::vector<std::int32_t> src{0}, dst{3};
            backend.copy_pages_async(buf.region(), src, buf.region(), dst, page_bytes, t);
            moved_event.ref().record(t);
        }  // destroyed with a copy and a record still queued (manual mode): both run first
        CHECK(buf.data()[3 * page_bytes] == std::byte{0x61});
        CHECK(moved_event.ref().query());
    }
}

TEST_CASE("asynchronous mode: many streams and threads chain copies through events") {
    HostBackend backend;  // asynchronous
    constexpr int threads = 4, rounds = 200;
    constexpr std::size_t page_bytes = 512;
    auto arena = backend.allocate_device(threads * 4 * page_bytes);
    std::vector<std::thread> workers;
    std::vector<int> failures(threads, 0);
    for (int t = 0; t < threads; ++t) {
        workers.emplace_back([&, t] {
            auto first = backend.make_stream();
            auto second = backend.make_stream();
            auto hop = backend.make_event();
            const std::int32_t base = t * 4;
            const std::vector<std::int32_t> p0{base}, p1{base + 1}, p2{base + 2};
            for (int r = 0; r < rounds; ++r) {
                std::memset(arena.data() + p0[0] * page_bytes, (t * 31 + r) & 0xff, page_bytes);
                backend.copy_pages_async(arena.region(), p0, arena.region(), p1, page_bytes, first);
                hop.ref().record(first);
                second.ref().wait(hop);
                backend.copy_pages_async(arena.region(), p1, arena.region(), p2, page_bytes, second);
                second.ref().synchronize();
                const auto want = static_cast<std::byte>((t * 31 + r) & 0xff);
                if (arena.data()[p2[0] * page_bytes] != want || arena.data()[p2[0] * page_bytes + page_bytes - 1] != want)
                    ++failures[static_cast<std::size_t>(t)];
            }
        });
    }
    for (auto& w : workers) w.join();
    for (int f : failures) CHECK(f == 0);
    CHECK(backend.counters().host_synchronizations == threads * rounds);
    CHECK(backend.counters().stream_waits == threads * rounds);
}

TEST_CASE("fill zeroes only the listed envelopes") {
    HostBackend backend({.mode = ExecutionMode::manual});
    auto s = backend.make_stream();
    constexpr std::size_t page_bytes = 24;
    auto arena = backend.allocate_device(6 * page_bytes);
    std::memset(arena.data(), 0xee, arena.size());
    const std::vector<std::int32_t> pages{4, 1};
    backend.fill_pages_async(arena.region(), pages, page_bytes, std::byte{0}, s);
    CHECK(arena.data()[page_bytes] == std::byte{0xee});
    backend.run_all();
    for (std::size_t b = 0; b < arena.size(); ++b) {
        const std::size_t page = b / page_bytes;
        CHECK(arena.data()[b] == ((page == 1 || page == 4) ? std::byte{0} : std::byte{0xee}));
    }
    const std::vector<std::int32_t> bad{6};
    CHECK_THROWS_AS(backend.fill_pages_async(arena.region(), bad, page_bytes, std::byte{0}, s), unikv::logic_error);
}

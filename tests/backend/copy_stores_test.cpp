#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include <unikv/backend/host_backend.hpp>

using namespace unikv;

namespace {

std::vector<std::byte> painted(std::size_t bytes, std::uint32_t salt) {
    std::vector<std::byte> v(bytes);
    for (std::size_t i = 0; i < bytes; ++i) v[i] = static_cast<std::byte>((i * 131 + salt * 7 + (i >> 9)) & 0xff);
    return v;
}

}  // namespace

TEST_CASE("slice and whole-envelope host copies move exactly their rows with either store kind") {
    struct shape {
        std::size_t page_bytes;
        EnvelopeSlice slice;
    };
    // A layer of a 4-layer token-major envelope (rows 512 bytes apart by 2048, prefetched across pages), a
    // row shape neither aligned nor a multiple of 16, rows wider than the prefetch distance, whole envelopes.
    const shape shapes[] = {
        {16384, {.offset = 1024, .bytes = 512, .stride = 2048, .count = 8}},
        {500, {.offset = 3, .bytes = 37, .stride = 100, .count = 5}},
        {3 * 8192, {.offset = 64, .bytes = 5000, .stride = 8192, .count = 3}},
        {4096, EnvelopeSlice::whole(4096)},
    };
    std::mt19937 rng(7);
    for (const shape& sh : shapes) {
        for (detail::CopyStores stores : {detail::CopyStores::cached, detail::CopyStores::streaming}) {
            constexpr std::int32_t pages = 24;
            auto src = painted(pages * sh.page_bytes, 1);
            auto dst = painted(pages * sh.page_bytes, 2);
            const auto before = dst;
            std::vector<std::int32_t> s(pages), d(pages);
            std::iota(s.begin(), s.end(), 0);
            std::iota(d.begin(), d.end(), 0);
            std::shuffle(s.begin(), s.end(), rng);
            std::shuffle(d.begin(), d.end(), rng);
            const std::size_t n = pages / 2 + 1;  // the other destinations stay untouched
            detail::copy_pages_host({src.data(), src.size()}, std::span(s).first(n), {dst.data(), dst.size()},
                                    std::span(d).first(n), sh.page_bytes, sh.slice, stores);
            std::vector<bool> written(pages, false);
            for (std::size_t i = 0; i < n; ++i) written[static_cast<std::size_t>(d[i])] = true;
            std::size_t wrong = 0;
            for (std::size_t i = 0; i < static_cast<std::size_t>(pages); ++i) {
                const auto page = static_cast<std::size_t>(d[i]);
                for (std::size_t b = 0; b < sh.page_bytes; ++b) {
                    const bool in_row = b >= sh.slice.offset && (b - sh.slice.offset) / sh.slice.stride < sh.slice.count &&
                                        (b - sh.slice.offset) % sh.slice.stride < sh.slice.bytes;
                    const std::byte want = written[page] && in_row ? src[static_cast<std::size_t>(s[i]) * sh.page_bytes + b]
                                                                   : before[page * sh.page_bytes + b];
                    wrong += dst[page * sh.page_bytes + b] != want ? 1 : 0;
                }
            }
            CHECK(wrong == 0);
        }
    }
}

TEST_CASE("a stream's burst decides streaming: copies queued back to back stream once they reach the threshold") {
    HostBackend backend({.mode = ExecutionMode::manual});
    auto stream = backend.make_stream();
    auto done = backend.make_event();
    constexpr std::size_t page_bytes = std::size_t{1} << 20;
    constexpr auto pages = static_cast<std::int32_t>(detail::streaming_copy_threshold / page_bytes);
    auto src = backend.allocate_device(pages * page_bytes);
    auto dst = backend.allocate_pinned(pages * page_bytes);
    const auto streamed = [&] { return backend.counters().bytes_streamed; };

    // One page per copy with a record behind each, like a backup of one-page nodes: the first copy already
    // sees the whole burst queued behind it.
    for (std::int32_t p = 0; p < pages; ++p) {
        backend.copy_pages_async(src.region(), std::span(&p, 1), dst.region(), std::span(&p, 1), page_bytes, stream);
        done.ref().record(stream);
    }
    backend.run_all();
    CHECK(streamed() == detail::streaming_copy_threshold);

    // The same copies each run before the next is queued: every burst is one page, nothing streams.
    for (std::int32_t p = 0; p < pages; ++p) {
        backend.copy_pages_async(src.region(), std::span(&p, 1), dst.region(), std::span(&p, 1), page_bytes, stream);
        backend.run_all();
    }
    CHECK(streamed() == detail::streaming_copy_threshold);

    // A burst short of the threshold by one page stays cached; the rows arrive either way.
    std::memset(src.data(), 0x5c, src.size());
    for (std::int32_t p = 1; p < pages; ++p) {
        backend.copy_pages_async(src.region(), std::span(&p, 1), dst.region(), std::span(&p, 1), page_bytes, stream);
    }
    backend.run_all();
    CHECK(streamed() == detail::streaming_copy_threshold);
    CHECK(std::all_of(dst.data() + page_bytes, dst.data() + dst.size(), [](std::byte b) { return b == std::byte{0x5c}; }));
}

TEST_CASE("asynchronous mode: a worker idle on an empty queue wakes for a wait whose record executes later") {
    // The consumer's worker sleeps on its empty queue, then gets a wait that is still blocked (the producer is
    // busy with a large copy): it must register on the event so that the record, executed afterwards on the
    // producer's stream, wakes it. Without that, the consumer's synchronize never returns.
    HostBackend backend({.mode = ExecutionMode::asynchronous});
    auto producer = backend.make_stream();
    auto consumer = backend.make_stream();
    auto ready = backend.make_event();
    constexpr std::size_t page_bytes = std::size_t{8} << 20;
    auto src = backend.allocate_device(2 * page_bytes);
    auto mid = backend.allocate_pinned(2 * page_bytes);
    auto out = backend.allocate_device(2 * page_bytes);
    const std::int32_t p = 1;
    for (int round = 0; round < 4; ++round) {
        std::memset(src.data() + page_bytes, 0x21 + round, page_bytes);
        backend.copy_pages_async(src.region(), std::span(&p, 1), mid.region(), std::span(&p, 1), page_bytes, producer);
        ready.ref().record(producer);
        consumer.ref().wait(ready.ref());
        backend.copy_pages_async(mid.region(), std::span(&p, 1), out.region(), std::span(&p, 1), page_bytes, consumer);
        consumer.ref().synchronize();
        const auto want = static_cast<std::byte>(0x21 + round);
        CHECK(std::all_of(out.data() + page_bytes, out.data() + 2 * page_bytes, [want](std::byte b) { return b == want; }));
    }
}

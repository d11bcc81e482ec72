// Copy failure injection and caller-chosen completion order of HostBackend's manual mode, checked by rows.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <random>
#include <span>
#include <vector>

#include <unikv/backend/host_backend.hpp>

#include "fuzz_env.hpp"

using namespace unikv;

namespace {

// Pages of `rows` token rows of 16 bytes; row r of page p holds the marker p * 1000 + r + salt in every word.
constexpr std::size_t row_bytes = 16, rows = 4, page_bytes = row_bytes * rows;

std::uint32_t marker(std::int32_t page, std::size_t row, std::uint32_t salt) {
    return static_cast<std::uint32_t>(page) * 1000 + static_cast<std::uint32_t>(row) + salt;
}

template <MemorySpace S>
void write_rows(basic_region_ref<S> r, std::int32_t page, std::uint32_t salt) {
    for (std::size_t row = 0; row < rows; ++row) {
        const std::uint32_t m = marker(page, row, salt);
        for (std::size_t w = 0; w < row_bytes / 4; ++w) {
            std::memcpy(r.data + static_cast<std::size_t>(page) * page_bytes + row * row_bytes + w * 4, &m, 4);
        }
    }
}

// True when every word of `row` of page `page` of `r` holds `want`.
template <MemorySpace S>
bool row_holds(basic_region_ref<S> r, std::int32_t page, std::size_t row, std::uint32_t want) {
    for (std::size_t w = 0; w < row_bytes / 4; ++w) {
        std::uint32_t got = 0;
        std::memcpy(&got, r.data + static_cast<std::size_t>(page) * page_bytes + row * row_bytes + w * 4, 4);
        if (got != want) return false;
    }
    return true;
}

template <MemorySpace S>
bool row_poisoned(basic_region_ref<S> r, std::int32_t page, std::size_t row) {
    const std::byte* b = r.data + static_cast<std::size_t>(page) * page_bytes + row * row_bytes;
    return std::all_of(b, b + row_bytes, [](std::byte x) { return x == HostBackend::copy_failure_poison; });
}

}  // namespace

TEST_CASE("an injected copy failure poisons exactly its destination rows and fails every record behind it "
          "on its stream until cleared") {
    HostBackend backend({.mode = ExecutionMode::manual});
    auto xfer = backend.make_stream();
    auto other = backend.make_stream();
    auto arena = backend.allocate_device(8 * page_bytes);
    auto host = backend.allocate_pinned(8 * page_bytes);
    for (std::int32_t p = 0; p < 8; ++p) {
        write_rows(arena.region(), p, 0);
        write_rows(host.region(), p, 500);  // what the host held before: a skipped copy would leave this
    }
    auto before = backend.make_event(), failing = backend.make_event(), behind = backend.make_event(),
         after = backend.make_event(), downstream = backend.make_event();
    const std::vector<std::int32_t> a{1, 2}, b{3}, c{4}, d{5}, zero{7};

    backend.copy_pages_async(arena.region(), a, host.region(), a, page_bytes, xfer);
    before.ref().record(xfer);
    backend.inject_copy_failure(xfer);
    backend.fill_pages_async(host.region(), zero, page_bytes, std::byte{0}, xfer);  // a fill is not a copy
    backend.copy_pages_async(arena.region(), b, host.region(), b, page_bytes, xfer);  // the failing one
    failing.ref().record(xfer);
    other.ref().wait(failing);
    downstream.ref().record(other);
    // Rows 1 and 2 of page 4 only: the copy itself succeeds, but its event lies behind the failure.
    backend.copy_page_slices_async(arena.region(), c, host.region(), c, page_bytes,
                                   {.offset = row_bytes, .bytes = 2 * row_bytes, .stride = page_bytes, .count = 1},
                                   xfer);
    behind.ref().record(xfer);
    backend.clear_copy_failure(xfer);
    backend.copy_pages_async(arena.region(), d, host.region(), d, page_bytes, xfer);
    after.ref().record(xfer);

    CHECK_FALSE(failing.ref().failed());  // pending records report nothing yet
    CHECK(backend.run_all() == 12);
    CHECK_FALSE(before.ref().failed());
    CHECK(failing.ref().query());
    CHECK(failing.ref().failed());
    CHECK(behind.ref().failed());
    CHECK_FALSE(after.ref().failed());
    CHECK_FALSE(downstream.ref().failed());  // failures are per stream: the waiter checks the event it waited on
    for (std::size_t row = 0; row < rows; ++row) {
        CHECK(row_holds(host.region(), 1, row, marker(1, row, 0)));
        CHECK(row_holds(host.region(), 2, row, marker(2, row, 0)));
        CHECK(row_poisoned(host.region(), 3, row));  // neither the source nor the old host row
        const bool in_slice = row == 1 || row == 2;
        CHECK(row_holds(host.region(), 4, row, marker(4, row, in_slice ? 0 : 500)));
        CHECK(row_holds(host.region(), 5, row, marker(5, row, 0)));
        CHECK(row_holds(host.region(), 7, row, 0));  // the fill ran normally
    }

    // Re-recording clears an event's failure; a failed sliced copy poisons only its slice.
    failing.ref().record(xfer);
    backend.run_all();
    CHECK_FALSE(failing.ref().failed());
    backend.inject_copy_failure(xfer);
    backend.copy_page_slices_async(arena.region(), d, host.region(), b, page_bytes,
                                   {.offset = 2 * row_bytes, .bytes = row_bytes, .stride = page_bytes, .count = 1}, xfer);
    failing.ref().record(xfer);
    backend.run_all();
    CHECK(failing.ref().failed());
    CHECK(row_poisoned(host.region(), 3, 2));
    CHECK(row_poisoned(host.region(), 3, 1));  // still the poison of the first failure, untouched
    CHECK(backend.counters().bytes_copied == (2 + 1 + 1) * page_bytes + 2 * row_bytes);  // failed copies count 0

    // Each injection arms one more copy; the third copy runs normally but its record still reports the failure.
    backend.clear_copy_failure(xfer);
    backend.inject_copy_failure(xfer);
    backend.inject_copy_failure(xfer);
    const std::vector<std::int32_t> p0{0}, p6{6};
    backend.copy_pages_async(arena.region(), p0, host.region(), p0, page_bytes, xfer);
    backend.copy_pages_async(arena.region(), a, host.region(), a, page_bytes, xfer);
    backend.copy_pages_async(arena.region(), p6, host.region(), p6, page_bytes, xfer);
    after.ref().record(xfer);
    backend.run_all();
    CHECK(after.ref().failed());
    for (std::size_t row = 0; row < rows; ++row) {
        CHECK(row_poisoned(host.region(), 0, row));
        CHECK(row_poisoned(host.region(), 1, row));
        CHECK(row_poisoned(host.region(), 2, row));
        CHECK(row_holds(host.region(), 6, row, marker(6, row, 0)));
    }
}

TEST_CASE("asynchronous mode: an injected failure is seen after the event's synchronize, not thrown") {
    HostBackend backend;
    auto s = backend.make_stream();
    auto done = backend.make_event();
    auto arena = backend.allocate_device(4 * page_bytes);
    auto host = backend.allocate_pinned(4 * page_bytes);
    write_rows(arena.region(), 2, 0);
    const std::vector<std::int32_t> p{2};
    backend.inject_copy_failure(s);
    backend.copy_pages_async(arena.region(), p, host.region(), p, page_bytes, s);
    done.ref().record(s);
    done.ref().synchronize();
    CHECK(done.ref().failed());
    CHECK(row_poisoned(host.region(), 2, 0));
    CHECK_THROWS_AS(HostBackend().inject_copy_failure(s), unikv::logic_error);  // a stream of another backend
}

TEST_CASE("run_one executes the chosen runnable stream head; streams stay FIFO and waits still order them") {
    // A model of every stream's queue decides which heads can run; each step must execute exactly the head the
    // pick names among them. Copy k of stream s writes the rows of source page (s, k) to destination page (s, k),
    // so which operation ran is read from the destination rows.
    constexpr std::size_t streams = 3, copies = 6;
    const std::uint64_t seeds = test::env_or("UNIKV_FUZZ_SEEDS", 40);
    std::size_t first_pick_differs = 0;
    for (std::uint64_t seed = 1; seed <= seeds; ++seed) {
        HostBackend backend({.mode = ExecutionMode::manual});
        std::vector<HostBackend::Stream> q;
        for (std::size_t s = 0; s < streams; ++s) q.push_back(backend.make_stream());
        auto gate = backend.make_event();
        const auto pages = static_cast<std::int32_t>(streams * copies);
        auto src = backend.allocate_device(static_cast<std::size_t>(pages) * page_bytes);
        auto dst = backend.allocate_pinned(static_cast<std::size_t>(pages) * page_bytes);
        for (std::int32_t p = 0; p < pages; ++p) write_rows(src.region(), p, 1);

        enum class kind { copy, record, wait };
        struct op {
            kind k;
            std::int32_t page;
        };
        std::vector<std::vector<op>> model(streams);
        std::mt19937_64 rng(seed);
        const std::size_t gate_after = rng() % copies;  // stream 0 records the gate after this copy
        for (std::size_t s = 0; s < streams; ++s) {
            for (std::size_t k = 0; k < copies; ++k) {
                if (s == 2 && k == 2) {  // stream 2's later copies wait on stream 0's gate record
                    q[2].ref().wait(gate);
                    model[2].push_back({kind::wait, -1});
                }
                const auto page = static_cast<std::int32_t>(s * copies + k);
                const std::vector<std::int32_t> pl{page};
                backend.copy_pages_async(src.region(), pl, dst.region(), pl, page_bytes, q[s]);
                model[s].push_back({kind::copy, page});
                if (s == 0 && k == gate_after) {
                    gate.ref().record(q[0]);
                    model[0].push_back({kind::record, -1});
                }
            }
        }
        std::vector<std::size_t> next(streams, 0);
        bool gate_done = false;
        std::vector<bool> landed(static_cast<std::size_t>(pages), false);
        for (std::size_t step = 0;; ++step) {
            std::vector<std::size_t> heads;  // streams whose head can run, in creation order
            for (std::size_t s = 0; s < streams; ++s) {
                if (next[s] < model[s].size() && (model[s][next[s]].k != kind::wait || gate_done)) heads.push_back(s);
            }
            const std::size_t pick = rng();
            REQUIRE(backend.run_one(pick) == !heads.empty());
            if (heads.empty()) break;
            const std::size_t s = heads[pick % heads.size()];
            if (step == 0 && s != 0) ++first_pick_differs;
            const op ran = model[s][next[s]++];
            if (ran.k == kind::record) gate_done = true;
            if (ran.k == kind::copy) landed[static_cast<std::size_t>(ran.page)] = true;
            CHECK(gate.ref().query() == gate_done);
            for (std::int32_t p = 0; p < pages; ++p) {  // exactly the modelled copies have landed, row by row
                for (std::size_t row = 0; row < rows; ++row) {
                    REQUIRE(row_holds(dst.region(), p, row, landed[static_cast<std::size_t>(p)] ? marker(p, row, 1) : 0));
                }
            }
        }
        for (std::size_t s = 0; s < streams; ++s) CHECK(next[s] == model[s].size());
        for (auto& stream : q) CHECK(backend.queued(stream) == 0);
    }
    CHECK(first_pick_differs > 0);  // the picks really vary the order
    CHECK_THROWS_AS(HostBackend().run_one(0), unikv::logic_error);  // asynchronous mode
}

// FileStorage's put and get throughput against the floor of the same bytes through raw pwrite / pread, in one
// binary: batches of 16 objects at 64 KiB, 256 KiB and 1 MiB, cycling through 256 MiB of objects on each side,
// the store with 1 batch in flight (each waited for: the latency a prefetch sees) and with 4 (a stream of
// prefetches or backups). Files live in a fresh directory under $TMPDIR: the page cache serves both sides alike,
// so the figures are the store's overhead over the system calls (the header and its checksums, the index, the
// lanes' hand-offs). Each runs buffered and with O_DIRECT (`direct` = 1: the store's `direct_io` on, the floor's
// file opened with O_DIRECT); buffers are 4 KiB aligned, as host-tier pages are, so the store takes its O_DIRECT
// path. O_DIRECT goes to the disk: its floor is the device, and its figures read only against each other.

#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include <fcntl.h>
#include <unistd.h>

#include <unikv/storage/file_storage.hpp>

namespace {

constexpr std::size_t batch = 16;
constexpr std::uint64_t footprint = 256ull << 20;  // bytes each side cycles through

class Scratch {
public:
    Scratch() {
        std::string pattern = (std::filesystem::temp_directory_path() / "unikv-bench-XXXXXX").string();
        if (::mkdtemp(pattern.data()) == nullptr) std::abort();
        path_ = pattern;
    }
    Scratch(const Scratch&) = delete;
    Scratch& operator=(const Scratch&) = delete;
    ~Scratch() {
        std::error_code ec;
        std::filesystem::remove_all(path_, ec);
    }
    const std::string& path() const { return path_; }

private:
    std::string path_;
};

// A payload in a 4 KiB-aligned buffer.
struct Payload {
    struct Free {
        void operator()(std::byte* p) const noexcept { std::free(p); }
    };
    std::unique_ptr<std::byte[], Free> data;
    std::size_t size = 0;
    [[nodiscard]] std::span<std::byte> bytes() const { return {data.get(), size}; }
    [[nodiscard]] bool operator==(const Payload& o) const { return size == o.size && std::memcmp(data.get(), o.data.get(), size) == 0; }
};

std::vector<Payload> payloads(std::size_t count, std::size_t bytes) {
    std::vector<Payload> out;
    for (std::size_t i = 0; i < count; ++i) {
        Payload p{std::unique_ptr<std::byte[], Payload::Free>(static_cast<std::byte*>(std::aligned_alloc(4096, bytes))), bytes};
        std::memset(p.data.get(), 0, bytes);
        for (std::size_t b = 0; b < bytes; b += 64) p.data[b] = static_cast<std::byte>(i % batch + b / 64);
        out.push_back(std::move(p));
    }
    return out;
}

unikv::ObjectKey key(std::uint64_t n) { return {n, ~n}; }

// Batches in flight on a store, at most `depth`: `submit` waits for room first, `drain` for all.
class Pipeline {
public:
    Pipeline(unikv::FileStorage& store, benchmark::State& state, std::size_t depth) : store_(store), state_(state), depth_(depth) {}
    template <class Submit>
    void submit(Submit&& s) {
        while (open_ >= depth_) reap();
        s();
        ++open_;
    }
    void drain() {
        while (open_ > 0) reap();
    }

private:
    void reap() {
        for (const unikv::StorageDone& d : store_.poll(std::chrono::milliseconds(100))) {
            --open_;
            for (unikv::PageResult r : d.results)
                if (r != unikv::PageResult::hit) state_.SkipWithError("a batch was not all hits");
        }
    }
    unikv::FileStorage& store_;
    benchmark::State& state_;
    std::size_t depth_;
    std::size_t open_ = 0;
};

void BM_FileStorage_put(benchmark::State& state) {
    const auto bytes = static_cast<std::size_t>(state.range(0));
    const auto depth = static_cast<std::size_t>(state.range(1));
    Scratch dir;
    unikv::FileStorage store({.directory = dir.path(), .capacity_bytes = footprint, .direct_io = state.range(2) != 0});
    const auto data = payloads(batch, bytes);
    std::vector<unikv::ObjectWrite> items(batch);
    std::uint64_t next = 0;
    Pipeline pipe(store, state, depth);
    for (auto _ : state) {
        for (std::size_t i = 0; i < batch; ++i) items[i] = {key(next++), unikv::ObjectKind::full, data[i].bytes()};
        pipe.submit([&] { (void)store.put(items); });
    }
    pipe.drain();
    state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * batch * bytes));
}

void BM_FileStorage_get(benchmark::State& state) {
    const auto bytes = static_cast<std::size_t>(state.range(0));
    const auto depth = static_cast<std::size_t>(state.range(1));
    Scratch dir;
    unikv::FileStorage store({.directory = dir.path(), .capacity_bytes = 2 * footprint, .direct_io = state.range(2) != 0});
    const auto data = payloads(batch, bytes);
    const std::uint64_t objects = footprint / bytes / batch * batch;
    {
        Pipeline fill(store, state, 1);
        std::vector<unikv::ObjectWrite> writes(batch);
        for (std::uint64_t n = 0; n < objects; n += batch) {
            for (std::size_t i = 0; i < batch; ++i) writes[i] = {key(n + i), unikv::ObjectKind::full, data[i].bytes()};
            fill.submit([&] { (void)store.put(writes); });
        }
        fill.drain();
    }
    auto into = payloads(batch * depth, bytes);  // one set of buffers per batch in flight
    std::vector<unikv::ObjectRead> items(batch);
    std::uint64_t next = 0;
    std::size_t set = 0;
    Pipeline pipe(store, state, depth);
    for (auto _ : state) {
        for (std::size_t i = 0; i < batch; ++i)
            items[i] = {key(next++ % objects), unikv::ObjectKind::full, into[set * batch + i].bytes()};
        set = (set + 1) % depth;
        pipe.submit([&] { (void)store.get(items); });
    }
    pipe.drain();
    for (std::size_t i = 0; i < into.size(); ++i)
        if (!(into[i] == data[i % batch])) state.SkipWithError("read back other bytes");
    if ((state.range(2) != 0) != (store.direct_objects() > 0)) state.SkipWithError("O_DIRECT was not used as asked");
    state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * batch * bytes));
}

// The floor: the same payloads with one pwrite / pread each, at offsets cycling through the same footprint.
int open_raw(const Scratch& dir, bool direct) {
    const int fd = ::open((dir.path() + "/raw.dat").c_str(), O_RDWR | O_CREAT | (direct ? O_DIRECT : 0), 0644);
    if (fd < 0) std::abort();
    return fd;
}

void BM_raw_pwrite(benchmark::State& state) {
    const auto bytes = static_cast<std::size_t>(state.range(0));
    Scratch dir;
    const int fd = open_raw(dir, state.range(1) != 0);
    const auto data = payloads(batch, bytes);
    const std::uint64_t slots = footprint / bytes;
    std::uint64_t next = 0;
    for (auto _ : state)
        for (std::size_t i = 0; i < batch; ++i)
            if (::pwrite(fd, data[i].data.get(), bytes, static_cast<off_t>((next++ % slots) * bytes)) != static_cast<ssize_t>(bytes))
                state.SkipWithError("pwrite failed");
    ::close(fd);
    state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * batch * bytes));
}

void BM_raw_pread(benchmark::State& state) {
    const auto bytes = static_cast<std::size_t>(state.range(0));
    Scratch dir;
    const int fd = open_raw(dir, state.range(1) != 0);
    const auto data = payloads(batch, bytes);
    const std::uint64_t objects = footprint / bytes / batch * batch;
    for (std::uint64_t n = 0; n < objects; ++n)
        if (::pwrite(fd, data[n % batch].data.get(), bytes, static_cast<off_t>(n * bytes)) != static_cast<ssize_t>(bytes)) std::abort();
    auto into = payloads(batch, bytes);
    std::uint64_t next = 0;
    for (auto _ : state)
        for (std::size_t i = 0; i < batch; ++i, ++next)
            if (::pread(fd, into[i].data.get(), bytes, static_cast<off_t>((next % objects) * bytes)) != static_cast<ssize_t>(bytes))
                state.SkipWithError("pread failed");
    ::close(fd);
    state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * batch * bytes));
}

void raw_sizes(benchmark::internal::Benchmark* b) {
    b->ArgNames({"bytes", "direct"})->UseRealTime();
    for (int direct : {0, 1})
        for (int bytes : {64 << 10, 256 << 10, 1 << 20}) b->Args({bytes, direct});
}
void store_sizes(benchmark::internal::Benchmark* b) {
    b->ArgNames({"bytes", "in_flight", "direct"})->UseRealTime();
    for (int direct : {0, 1})
        for (int depth : {1, 4})
            for (int bytes : {64 << 10, 256 << 10, 1 << 20}) b->Args({bytes, depth, direct});
}

BENCHMARK(BM_raw_pwrite)->Apply(raw_sizes);
BENCHMARK(BM_FileStorage_put)->Apply(store_sizes);
BENCHMARK(BM_raw_pread)->Apply(raw_sizes);
BENCHMARK(BM_FileStorage_get)->Apply(store_sizes);

}  // namespace

BENCHMARK_MAIN();

// FileStorage's put and get throughput against the floor of the same bytes through raw pwrite / pread, in one
// binary: batches of 16 objects at 64 KiB, 256 KiB and 1 MiB, cycling through 256 MiB of objects on each side,
// the store with 1 batch in flight (each waited for: the latency a prefetch sees) and with 4 (a stream of
// prefetches or backups). Files live in a fresh directory under $TMPDIR: the page cache serves both sides alike,
// so the figures are the store's overhead over the system calls (the header and its checksums, the index, the
// lanes' hand-offs).

#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
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

std::vector<std::vector<std::byte>> payloads(std::size_t count, std::size_t bytes) {
    std::vector<std::vector<std::byte>> out(count, std::vector<std::byte>(bytes));
    for (std::size_t i = 0; i < count; ++i)
        for (std::size_t b = 0; b < bytes; b += 64) out[i][b] = static_cast<std::byte>(i % batch + b / 64);
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
    unikv::FileStorage store({.directory = dir.path(), .capacity_bytes = footprint});
    const auto data = payloads(batch, bytes);
    std::vector<unikv::ObjectWrite> items(batch);
    std::uint64_t next = 0;
    Pipeline pipe(store, state, depth);
    for (auto _ : state) {
        for (std::size_t i = 0; i < batch; ++i) items[i] = {key(next++), unikv::ObjectKind::full, data[i]};
        pipe.submit([&] { (void)store.put(items); });
    }
    pipe.drain();
    state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * batch * bytes));
}

void BM_FileStorage_get(benchmark::State& state) {
    const auto bytes = static_cast<std::size_t>(state.range(0));
    const auto depth = static_cast<std::size_t>(state.range(1));
    Scratch dir;
    unikv::FileStorage store({.directory = dir.path(), .capacity_bytes = 2 * footprint});
    const auto data = payloads(batch, bytes);
    const std::uint64_t objects = footprint / bytes / batch * batch;
    {
        Pipeline fill(store, state, 1);
        std::vector<unikv::ObjectWrite> writes(batch);
        for (std::uint64_t n = 0; n < objects; n += batch) {
            for (std::size_t i = 0; i < batch; ++i) writes[i] = {key(n + i), unikv::ObjectKind::full, data[i]};
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
            items[i] = {key(next++ % objects), unikv::ObjectKind::full, into[set * batch + i]};
        set = (set + 1) % depth;
        pipe.submit([&] { (void)store.get(items); });
    }
    pipe.drain();
    for (std::size_t i = 0; i < into.size(); ++i)
        if (into[i] != data[i % batch]) state.SkipWithError("read back other bytes");
    state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * batch * bytes));
}

// The floor: the same payloads with one pwrite / pread each, at offsets cycling through the same footprint.
void BM_raw_pwrite(benchmark::State& state) {
    const auto bytes = static_cast<std::size_t>(state.range(0));
    Scratch dir;
    const int fd = ::open((dir.path() + "/raw.dat").c_str(), O_RDWR | O_CREAT, 0644);
    const auto data = payloads(batch, bytes);
    const std::uint64_t slots = footprint / bytes;
    std::uint64_t next = 0;
    for (auto _ : state)
        for (std::size_t i = 0; i < batch; ++i)
            if (::pwrite(fd, data[i].data(), bytes, static_cast<off_t>((next++ % slots) * bytes)) != static_cast<ssize_t>(bytes))
                state.SkipWithError("pwrite failed");
    ::close(fd);
    state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * batch * bytes));
}

void BM_raw_pread(benchmark::State& state) {
    const auto bytes = static_cast<std::size_t>(state.range(0));
    Scratch dir;
    const int fd = ::open((dir.path() + "/raw.dat").c_str(), O_RDWR | O_CREAT, 0644);
    const auto data = payloads(batch, bytes);
    const std::uint64_t objects = footprint / bytes / batch * batch;
    for (std::uint64_t n = 0; n < objects; ++n)
        if (::pwrite(fd, data[n % batch].data(), bytes, static_cast<off_t>(n * bytes)) != static_cast<ssize_t>(bytes)) std::abort();
    auto into = payloads(batch, bytes);
    std::uint64_t next = 0;
    for (auto _ : state)
        for (std::size_t i = 0; i < batch; ++i, ++next)
            if (::pread(fd, into[i].data(), bytes, static_cast<off_t>((next % objects) * bytes)) != static_cast<ssize_t>(bytes))
                state.SkipWithError("pread failed");
    ::close(fd);
    state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * batch * bytes));
}

void raw_sizes(benchmark::internal::Benchmark* b) { b->ArgNames({"bytes"})->Arg(64 << 10)->Arg(256 << 10)->Arg(1 << 20)->UseRealTime(); }
void store_sizes(benchmark::internal::Benchmark* b) {
    b->ArgNames({"bytes", "in_flight"})->UseRealTime();
    for (int depth : {1, 4})
        for (int bytes : {64 << 10, 256 << 10, 1 << 20}) b->Args({bytes, depth});
}

BENCHMARK(BM_raw_pwrite)->Apply(raw_sizes);
BENCHMARK(BM_FileStorage_put)->Apply(store_sizes);
BENCHMARK(BM_raw_pread)->Apply(raw_sizes);
BENCHMARK(BM_FileStorage_get)->Apply(store_sizes);

}  // namespace

BENCHMARK_MAIN();

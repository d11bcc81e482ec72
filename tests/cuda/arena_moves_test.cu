// The allocator on a GPU, end to end: kernels write a marker into every row of every live page through the
// device tables, the allocator moves pages (urgent and opportunistic flushes, make_room both ways,
// compact_holes) with real device copies, and a kernel queued right behind each move, with no host wait in
// between (ids are staged in pinned memory and uploaded on the same stream), reads every live row back through
// the freshly published tables. Rounds are randomized (seeded); each ends with the one host synchronization.
// Layouts: the tri-pool (lazy ends and a float: flushes, compact_holes, make_room), lazy Mamba|FULL, and eager
// SWA|FULL (every free compacts). UNIKV_CUDA_FUZZ_SEED and UNIKV_CUDA_FUZZ_ROUNDS change the seed and length.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include <unikv/backend/cuda_backend.cuh>
#include <unikv/pools/layouts.hpp>
#include <unikv/pools/unified_allocator.hpp>

#include "fuzz_env.hpp"

using namespace unikv;

namespace {

using unikv::test::env_or;

__host__ __device__ constexpr std::uint32_t marker(int component, std::int32_t id, std::int32_t row,
                                                   std::uint32_t version) {
    return ((version & 0xFu) << 28) | (static_cast<std::uint32_t>(component) << 26) |
           ((static_cast<std::uint32_t>(id) & 0xFFFFFu) << 6) | (static_cast<std::uint32_t>(row) & 0x3Fu);
}

// The rows of one component: `rows_per_id` rows per id (a page's tokens, or one Mamba slot).
struct Rows {
    TranslationTable table;
    std::byte* arena;
    std::size_t entry_bytes;
    int component;
    std::int32_t rows_per_id;
    bool tokens;  // FULL/SWA: translate tokens; Mamba: translate state ids

    __device__ std::uint32_t* row(std::int32_t id, std::int32_t r) const {
        const std::int32_t p = tokens ? table.physical_token(id * rows_per_id + r) : table.physical_page(id);
        return reinterpret_cast<std::uint32_t*>(arena + static_cast<std::size_t>(p) * entry_bytes);
    }
};

// One thread per (id, row): writes the marker into every word of the row (`check == nullptr`), or counts
// the rows whose words are not all the marker into `*errors`.
__global__ void rows_kernel(Rows rows, const std::int32_t* ids, const std::uint32_t* versions, std::size_t n,
                            unsigned* errors) {
    const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
    if (i >= n * static_cast<std::size_t>(rows.rows_per_id)) return;
    const std::size_t k = i / static_cast<std::size_t>(rows.rows_per_id);
    const auto r = static_cast<std::int32_t>(i % static_cast<std::size_t>(rows.rows_per_id));
    const std::uint32_t want = marker(rows.component, ids[k], r, versions[k]);
    std::uint32_t* words = rows.row(ids[k], r);
    bool torn = false;
    for (std::size_t w = 0; w < rows.entry_bytes / 4; ++w) {
        if (errors == nullptr) words[w] = want;
        else torn |= words[w] != want;
    }
    if (torn) atomicAdd(errors, 1u);
}

struct LivePage {
    VirtualPage id;
    bool swa_bound;
    std::uint32_t version;
};
struct LiveState {
    StateId id;
    std::uint32_t version;
};

template <class L>
class Scenario {
public:
    using Alloc = UnifiedAllocator<L, CudaBackend>;

    CudaBackend backend_;
    CudaBackend::Stream stream_ = backend_.make_stream();
    Alloc alloc_{backend_,
                 ArenaConfig{.model = {.full = {.layers = 1, .kv_heads = 1, .head_dim = 8, .dtype_bytes = 2},
                                       .swa = {.layers = 1, .kv_heads = 1, .head_dim = 8, .dtype_bytes = 2},
                                       .swa_window_tokens = 8,
                                       .mamba = {.layers = 1, .conv_state_bytes = 32, .temporal_state_bytes = 32}},
                             .page_sizes = {.full = {4}, .swa = {4}, .mamba = {1}},
                             .arena_bytes = 2048 * 128},
                 stream_};
    std::vector<LivePage> pages;
    std::vector<LiveState> states;

    // Queues a kernel over the FULL rows of `full`, the SWA rows of `swa` and the Mamba rows of `mamba`
    // (ids, versions) through the tables `device_tables()` publishes now; `check` counts mismatches.
    void rows(const std::vector<LivePage>& full, const std::vector<LivePage>& swa,
              const std::vector<LiveState>& mamba, bool check) {
        const DeviceTables d = alloc_.device_tables();
        const auto& spec = alloc_.spec();
        auto launch = [&](const TranslationTable& t, Component c, std::int32_t rows_per_id, bool tokens,
                          const std::vector<std::int32_t>& ids, const std::vector<std::uint32_t>& versions) {
            if (ids.empty()) return;
            // Staged in pinned memory and uploaded on the allocator's stream: nothing here waits for the device,
            // so the kernel runs right behind whatever moves and publishes the stream already holds.
            REQUIRE(staged_ + ids.size() <= max_staged);
            auto* host_ids = reinterpret_cast<std::int32_t*>(staging_host_.data()) + staged_;
            auto* host_versions = reinterpret_cast<std::uint32_t*>(staging_host_.data()) + max_staged + staged_;
            auto* dev_ids = reinterpret_cast<std::int32_t*>(staging_device_.data()) + staged_;
            auto* dev_versions = reinterpret_cast<std::uint32_t*>(staging_device_.data()) + max_staged + staged_;
            std::copy(ids.begin(), ids.end(), host_ids);
            std::copy(versions.begin(), versions.end(), host_versions);
            const cudaStream_t native = stream_.ref().native();
            detail::cuda::check(cudaMemcpyAsync(dev_ids, host_ids, ids.size() * 4, cudaMemcpyHostToDevice, native),
                                "cudaMemcpyAsync");
            detail::cuda::check(
                cudaMemcpyAsync(dev_versions, host_versions, ids.size() * 4, cudaMemcpyHostToDevice, native),
                "cudaMemcpyAsync");
            staged_ += ids.size();
            const Rows r{t, alloc_.region().data, spec[c].entry_bytes, static_cast<int>(c), rows_per_id, tokens};
            const std::size_t threads = ids.size() * static_cast<std::size_t>(rows_per_id);
            rows_kernel<<<static_cast<unsigned>((threads + 255) / 256), 256, 0, native>>>(
                r, dev_ids, dev_versions, ids.size(), check ? reinterpret_cast<unsigned*>(errors_.data()) : nullptr);
            detail::cuda::check(cudaGetLastError(), "rows_kernel");
        };
        auto split_pages = [](const std::vector<LivePage>& v, auto&& ids, auto&& versions) {
            for (const auto& p : v) {
                ids.push_back(p.id.value());
                versions.push_back(p.version);
            }
        };
        std::vector<std::int32_t> ids;
        std::vector<std::uint32_t> versions;
        const std::int32_t ps = spec[Component::full].page_size;
        split_pages(full, ids, versions);
        launch(d.full, Component::full, ps, true, ids, versions);
        ids.clear();
        versions.clear();
        split_pages(swa, ids, versions);
        if constexpr (Alloc::has_swa) launch(d.swa, Component::swa, ps, true, ids, versions);
        ids.clear();
        versions.clear();
        for (const auto& s : mamba) {
            ids.push_back(s.id.value());
            versions.push_back(s.version);
        }
        if constexpr (Alloc::has_mamba) launch(d.mamba, Component::mamba, 1, false, ids, versions);
    }

    std::vector<LivePage> swa_bound() const {
        std::vector<LivePage> v;
        for (const auto& p : pages) {
            if (p.swa_bound) v.push_back(p);
        }
        return v;
    }
    void write(const std::vector<LivePage>& p, const std::vector<LiveState>& s) {
        std::vector<LivePage> bound;
        for (const auto& x : p) {
            if (x.swa_bound) bound.push_back(x);
        }
        rows(p, bound, s, false);
    }
    // Checks every live row, then waits for the stream (the round's one host synchronization) and returns the
    // number of torn or wrong rows.
    unsigned check_all() {
        rows(pages, swa_bound(), states, true);
        unsigned* host_errors = reinterpret_cast<unsigned*>(errors_host_.data());
        const cudaStream_t native = stream_.ref().native();
        detail::cuda::check(cudaMemcpyAsync(host_errors, errors_.data(), sizeof(unsigned), cudaMemcpyDeviceToHost, native),
                            "cudaMemcpyAsync");
        detail::cuda::check(cudaMemsetAsync(errors_.data(), 0, sizeof(unsigned), native), "cudaMemsetAsync");
        stream_.ref().synchronize();
        staged_ = 0;
        return *host_errors;
    }

private:
    static constexpr std::size_t max_staged = 1 << 16;  // ids (and as many versions) uploaded per round
    CudaBackend::PinnedBuffer staging_host_ = backend_.allocate_pinned(2 * max_staged * 4);
    CudaBackend::DeviceBuffer staging_device_ = backend_.allocate_device(2 * max_staged * 4);
    CudaBackend::DeviceBuffer errors_ = backend_.allocate_device(sizeof(unsigned));  // zero-filled
    CudaBackend::PinnedBuffer errors_host_ = backend_.allocate_pinned(sizeof(unsigned));
    std::size_t staged_ = 0;
};

}  // namespace

TEST_CASE_TEMPLATE("rows written through the device tables survive every kind of move, read right behind it on the "
                   "device", L, TriPoolLayout, MambaFullLayout, EagerSwaFullLayout) {
    using Alloc = typename Scenario<L>::Alloc;
    Scenario<L> s;
    const auto rounds = static_cast<std::uint32_t>(env_or("UNIKV_CUDA_FUZZ_ROUNDS", 60));
    std::mt19937 rng(static_cast<std::uint32_t>(env_or("UNIKV_CUDA_FUZZ_SEED", 2026)));
    auto coin = [&](unsigned percent) { return rng() % 100 < percent; };
    std::size_t relocated = 0, room = 0;
    for (std::uint32_t round = 0; round < rounds; ++round) {
        const std::uint32_t version = round & 0xFu;
        std::vector<VirtualPage> fresh(1 + rng() % 24);
        std::vector<LivePage> added;
        if (s.alloc_.alloc(fresh)) {
            for (VirtualPage v : fresh) added.push_back({v, Alloc::has_swa, version});
        }
        std::vector<LiveState> added_states;
        if constexpr (Alloc::has_mamba) {
            std::vector<StateId> fresh_states(1 + rng() % 6);
            if (s.alloc_.alloc_state(fresh_states)) {
                for (StateId v : fresh_states) added_states.push_back({v, version});
            }
        }
        s.write(added, added_states);
        s.pages.insert(s.pages.end(), added.begin(), added.end());
        s.states.insert(s.states.end(), added_states.begin(), added_states.end());

        // Where the survivors are now, to count the pages the frees and the move below relocate.
        std::vector<VirtualPage> ids;
        for (const auto& p : s.pages) ids.push_back(p.id);
        std::vector<PhysicalPage> before(ids.size()), after(ids.size());
        s.alloc_.translate_full(ids, before);

        // Frees, tombstones and FULL-only frees of tombstoned pages, then rewrites of some survivors.
        std::vector<VirtualPage> freed, tombstoned, full_freed;
        std::vector<LivePage> kept;
        for (const auto& p : s.pages) {
            if (coin(20)) (p.swa_bound || !Alloc::has_swa ? freed : full_freed).push_back(p.id);
            else if (Alloc::has_swa && p.swa_bound && coin(20)) {
                tombstoned.push_back(p.id);
                kept.push_back({p.id, false, p.version});
            } else kept.push_back(p);
        }
        s.alloc_.free(freed);
        if constexpr (Alloc::has_swa) {
            s.alloc_.free_full(full_freed);
            s.alloc_.free_swa(tombstoned);
        }
        s.pages = kept;
        if constexpr (Alloc::has_mamba) {
            std::vector<StateId> freed_states;
            std::vector<LiveState> kept_states;
            for (const auto& st : s.states) {
                if (coin(25)) freed_states.push_back(st.id);
                else kept_states.push_back(st);
            }
            s.alloc_.free_state(freed_states);
            s.states = kept_states;
        }
        std::vector<LivePage> rewritten;
        for (auto& p : s.pages) {
            if (coin(10)) {
                p.version = version;
                rewritten.push_back(p);
            }
        }
        s.write(rewritten, {});

        switch (rng() % (Alloc::has_float ? 5 : 2)) {
            case 0: (void)s.alloc_.flush(FlushMode::urgent); break;
            case 1: (void)s.alloc_.flush(FlushMode::opportunistic); break;
            case 2:
                if constexpr (Alloc::has_float) (void)s.alloc_.compact_holes(coin(50) ? Side::low : Side::high);
                break;
            default:
                if constexpr (Alloc::has_float) {
                    const std::size_t want = (1 + rng() % 64) * 128;
                    const std::size_t got = s.alloc_.make_room(coin(50) ? Side::low : Side::high, want);
                    if (got >= want) room += got;
                }
        }
        s.alloc_.translate_full(ids, after);
        for (std::size_t i = 0; i < ids.size(); ++i) relocated += after[i] != before[i] && after[i].value() != 0;
        INFO("round ", round, ": ", s.pages.size(), " pages, ", s.states.size(), " states live");
        REQUIRE(s.check_all() == 0);
        REQUIRE(s.alloc_.verify().empty());
    }
    CHECK(relocated > rounds);  // the moves did move live pages
    if (Alloc::has_float) CHECK(room > 0);
    // One synchronization per round (check_all's): the moves, publishes and index staging never waited.
    CHECK(s.backend_.counters().host_synchronizations == rounds);
    MESSAGE("live FULL pages relocated: ", relocated, ", make_room bytes opened: ", room,
            ", host syncs: ", s.backend_.counters().host_synchronizations);
}

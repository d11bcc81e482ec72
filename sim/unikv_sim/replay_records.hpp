#pragma once
/// \file
/// What a replay produces, as plain data: one `StepRecord` per engine step and one `RequestRecord` per finished
/// request, plus the step's work (`StepWork`) the cost model prices. The engine loop (`engine.hpp`) fills them;
/// the metrics, the table, the CSV, the JSON and the plot read them and nothing else, so the two sides meet
/// only here.
///
/// Times are simulated milliseconds (the cost model's clock, starting at the trace's first arrival), except
/// `StepRecord::cache_ns`, which is wall time. Byte counts are the model's real bytes, whatever scale the
/// replay's arena runs at.

#include <array>
#include <cstdint>
#include <vector>

namespace unikv::sim {

/// The work of one engine step, what the cost model turns into simulated time.
struct StepWork {
    std::int64_t prefill_tokens = 0;  ///< prompt tokens computed this step (chunked prefill included)
    std::int64_t decode_tokens = 0;   ///< requests that decoded one token this step
    std::int64_t context_tokens = 0;  ///< cached tokens the step's attention reads (every running request's)
    std::uint64_t bytes_loaded = 0;   ///< host-to-device bytes of the load-backs submitted this step
    std::uint64_t bytes_written = 0;  ///< device-to-host bytes (write-through, write-back, retraction)
    std::uint64_t bytes_fetched = 0;  ///< storage-to-host bytes the requests admitted this step prefetched
    std::uint64_t bytes_stored = 0;   ///< host-to-storage bytes put this step
    friend bool operator==(const StepWork&, const StepWork&) = default;
};

/// Pool index of the per-pool arrays: FULL, SWA, Mamba (the order of `unikv::Component`).
inline constexpr std::size_t pool_count = 3;

/// One engine step.
struct StepRecord {
    std::int32_t instance = 0;  ///< the engine instance that ran it (0 with one instance)
    std::int64_t step = 0;     ///< 0-based, per instance
    double start_ms = 0;       ///< simulated time the step starts
    double duration_ms = 0;    ///< the cost model's price of `work`
    StepWork work{};           ///< what the step computed and moved
    std::int32_t running = 0;  ///< requests running after the step
    std::int32_t waiting = 0;  ///< arrived requests not yet admitted (or retracted and waiting), after the step
    std::int32_t admitted = 0;   ///< requests admitted this step
    std::int32_t refused = 0;    ///< admission refusals this step
    std::int32_t chunked = 0;    ///< admissions cut to the chunk budget this step (their prefill goes on later)
    std::int32_t finished = 0;   ///< requests finished this step
    std::int32_t preempted = 0;  ///< running requests retracted this step
    std::int32_t restored = 0;   ///< retracted requests restored this step
    std::int64_t admitted_prompt_tokens = 0;  ///< prompt tokens of the requests admitted this step
    std::int64_t device_hit_tokens = 0;       ///< of those, served from the device tree
    std::int64_t host_hit_tokens = 0;         ///< of those, loaded back from the host tier
    std::int64_t storage_hit_tokens = 0;      ///< of those, fetched from the storage tier (then loaded back)
    std::uint64_t bytes_compacted = 0;        ///< bytes the allocator moved (compaction) this step
    /// Device pages in use per pool, as a fraction of the pool's capacity in the step's arena; -1 for a pool
    /// the layout lacks.
    std::array<double, pool_count> device_occupancy{-1, -1, -1};
    /// Host pages in use per pool, as a fraction of the host pool; -1 for a pool without host pages.
    std::array<double, pool_count> host_occupancy{-1, -1, -1};
    /// FULL tokens the tree holds on device after the step, and the bytes (at the model's scale) of the SWA rows
    /// and Mamba states it holds beside them: what the retention policies keep per cached token.
    std::int64_t cached_tokens = 0;
    std::uint64_t window_state_bytes = 0;
    std::int64_t cache_ns = 0;  ///< wall time spent in cache calls this step
    /// Field by field, `cache_ns` included (a repeatability check zeroes it first).
    friend bool operator==(const StepRecord&, const StepRecord&) = default;
};

/// One finished request.
struct RequestRecord {
    std::int32_t index = 0;            ///< its position in the trace
    double arrival_ms = 0;             ///< from the trace, times the arrival scale
    double first_token_ms = 0;         ///< end of the step that finished its prefill
    double finish_ms = 0;              ///< end of the step that decoded its last token
    std::int32_t prompt_tokens = 0;    ///< from the trace
    std::int32_t output_tokens = 0;    ///< from the trace
    std::int32_t device_hit_tokens = 0;  ///< prompt tokens served from the device tree at admission
    std::int32_t host_hit_tokens = 0;    ///< prompt tokens loaded back from the host tier at admission
    std::int32_t storage_hit_tokens = 0;  ///< prompt tokens its prefetch fetched from the storage tier, then loaded back
    /// What an infinite cache would have served it (`summarize`), and why the admission served less (they add
    /// up to `limit_tokens - device_hit_tokens - host_hit_tokens - storage_hit_tokens` when that is positive):
    /// the prefix's SWA window or Mamba state missing at a boundary the FULL pages reached, the request that would
    /// have cached the tokens still running when it came (not finished: an infinite cache fed in finishing order
    /// lacks them), held by another instance's cache (device or host: `lost_to_routing`, after `instance`), else
    /// its FULL pages missing (evicted).
    std::int32_t limit_tokens = 0;
    std::int32_t lost_to_swa = 0;
    std::int32_t lost_to_mamba = 0;
    std::int32_t lost_to_concurrency = 0;
    std::int32_t lost_to_full = 0;
    std::int32_t preemptions = 0;        ///< times it was retracted
    double admitted_ms = 0;  ///< start of the step that first admitted it (its first chunk, if chunked)
    std::int32_t instance = 0;  ///< the engine instance the router sent it to
    std::int32_t lost_to_routing = 0;  ///< see `limit_tokens`
    friend bool operator==(const RequestRecord&, const RequestRecord&) = default;
};

/// A whole replay: every instance's steps and requests together, each record naming its instance.
struct ReplayResult {
    std::vector<StepRecord> steps;        ///< in the order they ran (instances interleaved by simulated time)
    std::vector<RequestRecord> requests;  ///< in the order their last steps ran
    /// Requests that could never be admitted (too long for the memory) and were dropped, by trace index.
    std::vector<std::int32_t> dropped;
    std::vector<std::int32_t> dropped_on;  ///< the instance of each of `dropped`
    /// Requests neither finished nor dropped: the replay stopped at `EngineConfig::max_steps` first.
    std::int64_t unfinished = 0;
    double wall_seconds = 0;  ///< wall time of the whole replay
    std::int32_t instances = 1;  ///< engine instances the replay ran
};

}  // namespace unikv::sim

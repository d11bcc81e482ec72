#pragma once
/// \file
/// The replay's engine loop: a trace driven through real `unikv::Cache`s step by step, as SGLang's scheduler
/// drives its cache (reference §6, §7, §8), with simulated time from a cost model. `replay` returns the plain
/// records of `replay_records.hpp`.
///
/// **A cluster**: `ClusterConfig::instances` engine instances, each its own cache (its own device and host
/// memory) and its own simulated clock, behind a router (`router.hpp`), sharing one storage tier when there is
/// one (`ReplaySetup::storage`: each instance attaches a share of it, so one instance fetches what another put).
/// The replay advances them on one time line: before the router places an arrival at time `t` (the trace's
/// arrival time multiplied by `ReplaySetup::arrival_scale`), every instance with work steps until its clock
/// reaches `t`, the instance furthest behind first (ties: the lowest index); the router then asks each instance
/// its queue and, for `prefix`, how much of the prompt its cache holds (`Cache::peek`: no lock, no change). A
/// step never waits for another instance, and the order of steps depends on simulated times only, so a replay
/// is repeatable. One instance is the same loop with a router that has one choice.
///
/// A step's effects (its puts to the shared store, its inserts the router's `peek` reads, the requests it
/// finishes) are visible from the step's start, not its end: another instance whose step starts within that
/// span, and a router placing an arrival within it, see them up to one step early (a step lasts up to a
/// chunk's prefill: about 0.45 s for 8,192 Gemma-3-27B tokens on an H200). Holding them back to the step's end
/// would need each cache call split at simulated times; the approximation flatters the store and the prefix
/// router by at most that much.
///
/// One step:
/// 1. the requests routed to the instance up to its clock wait in its queue (an idle instance's clock jumps to
///    the next arrival routed to it); finished loads and write-throughs are acknowledged (`loading_check`,
///    `writing_check`);
/// 2. `begin_step` with the decode demand (one token per running decode request) and the chunk budget;
/// 3. admission in FIFO order until the first refusal (which ends admission for the step): the chunked
///    request first, then retracted ones, then arrivals. Each request is a `unikv::Sequence` handle driven
///    through the cache (`Cache::admit` for the prompt, `extend` for a chunked one's next chunk, `restore`
///    for a retracted one, which copies its backup back where the prefix it had is still cached and
///    recomputes otherwise); the handle allocates its rows and, with Mamba, its state (a copy of the prefix's);
/// 4. decode: one token per running decode request, one `Cache::decode` for the batch (which evicts for its
///    shortfall and slides each handle's SWA window over its own pages). When it still falls short the newest
///    decode request is preempted (`Cache::retract`: backed up where `Cache::can_retract`, else its rows are
///    dropped and recomputed), requeued, and the rest retry;
/// 5. the forward: queued loads are submitted (`start_loading`) and the compute stream waits each layer
///    (`wait_layer`); the host then waits the compute stream, as an engine waits its forward's sampled
///    tokens, the loads are acknowledged and the loaded prefixes' rows read (`Cache::rows`, which queues their
///    Mamba states' copies), and the host waits again (`sync_for_host`). The simulated forward reads and writes
///    rows (`row_markers.hpp`) through the handles' rows when `check_rows` is set;
/// 6. after the forward: a chunk is checkpointed into the tree (`Cache::checkpoint`: its whole pages, with its
///    state, the request keeping its lock) and waits for its next chunk; with Mamba a finished prefill is
///    checkpointed too (a state at the prompt's end); a finished request is finished (`Cache::finish`: whole
///    pages and state into the tree, the partial tail freed, unlocked); write-throughs are submitted
///    (`start_writing`), then everything queued on the backend executes: the
///    engine runs `HostBackend` in `ExecutionMode::manual` and calls `run_all()` here, so a step's copies
///    complete within the step (whose cost already prices their bytes over the link) and the next step
///    acknowledges them. Copy timing never follows the wall clock, so a replay is repeatable: the same trace
///    and setup give the same records, `cache_ns` and wall time aside. A backend without a manual mode runs
///    as it is;
/// 7. with a storage tier (`ReplaySetup::storage`), the step's puts are waited for (their bytes reported, not
///    priced: a put does not hold up the accelerator); a request is prefetched each time it is asked to be admitted (`Cache::prefetch`, waited for),
///    and what it fetched is priced in the step that admits it and reported as storage hits;
/// 8. `verify()` every `verify_every` steps (a broken line throws), the step's record, and
///    the clock advances by `cost(work)`.
///
/// Token ids: prompt tokens come from the trace (`Trace::prompt_tokens`). A generated token is the token that
/// follows the prompt in its content stream when a later request continues it (`continuations.hpp`: the next
/// turn of a conversation, the next step of an agent, a later Mooncake prompt that extends this one), as long as
/// that later prompt reaches the position; otherwise (and with `continue_outputs` off) token `p` of request
/// `r` gets an id in `[2^30, 2^31)` from `(r, p)`, distinct for every request, cached but never shared. A trace
/// must number its prompt tokens below 2^30.
///
/// Row checks (`check_rows`): every row a step computes gets its marker. At admission, after a load-back
/// and after a restore every row the request attends to is read back (FULL: all of them; SWA: the window;
/// Mamba: its state, the cache's copy of the prefix's checkpoint, then its own state each step). The engine
/// keeps only scheduling fields of its own; the handle keeps the request's tokens, rows and state. A decode step reads the rows of
/// the newest token and one more rotating through the context; a step whose allocations moved pages
/// (compaction) reads every running request's rows again.
///
/// A request that cannot be admitted while nothing else runs, holds memory or loads (too long for the memory,
/// at its decode limit) is dropped (`ReplayResult::dropped`) rather than retried forever.
///
/// Bytes are reported at the model's scale (`ReplaySetup::byte_scale`, see `replay_scale.hpp`); `cache_ns`
/// is the steady-clock time of the step's cache calls only.

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <limits>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include <unikv/backend/execution_mode.hpp>
#include <unikv/backend/host_backend.hpp>
#include <unikv/cache.hpp>
#include <unikv/error.hpp>
#include <unikv/storage/any_storage.hpp>
#include <unikv/storage/shared_storage.hpp>

#include <unikv_sim/continuations.hpp>
#include <unikv_sim/input_error.hpp>
#include <unikv_sim/replay_records.hpp>
#include <unikv_sim/router.hpp>
#include <unikv_sim/row_markers.hpp>
#include <unikv_sim/trace_summary.hpp>
#include <unikv_sim/trace.hpp>

namespace unikv::sim {

/// The engine's scheduling knobs.
struct EngineConfig {
    std::int32_t max_running = 256;    ///< requests running at once (decoding, prefilling or mid-chunk)
    std::int32_t chunk_tokens = 8192;  ///< chunked-prefill budget: prompt tokens per step, all requests together
    bool check_rows = false;           ///< write and read row markers (see the file comment)
    /// Decode the tokens that follow each prompt in its content stream (`continuations.hpp`), so a later turn
    /// finds the earlier one's output cached; false: ids no prompt contains (the replays before issue 22).
    bool continue_outputs = true;
    std::int64_t verify_every = 0;     ///< run `verify()` every this many steps (0: never)
    std::int64_t max_steps = 0;        ///< stop after this many steps, all instances together (0: run the trace)
    std::int64_t progress_every = 1000;  ///< steps between progress callbacks
};

/// What a replay runs on: the cache's configuration (usually `replay_cache_config`), its byte scale and the
/// engine's knobs.
struct ReplaySetup {
    CacheConfig cache{};
    /// The memory scale K the cache configuration runs at (`replay_byte_scale`): reported bytes are
    /// multiplied by it. 1 for a configuration at the model's own bytes.
    std::uint64_t byte_scale = 1;
    EngineConfig engine{};
    ClusterConfig cluster{};
    /// Arrival times are the trace's times this (above 1: a lighter load, below 1: a heavier one).
    double arrival_scale = 1;
    /// A storage tier every instance's cache attaches a share of (it must outlive the replay; the bundle names
    /// `storage = AnyStorage`), or none. Each request is prefetched from it before each admission attempt; the
    /// bytes fetched are priced when the request is admitted.
    SharedStorage<AnyStorage>* storage = nullptr;
    /// The model name of the store namespace.
    std::string_view storage_model{};
};

/// Where a replay stands, for a progress line.
struct ReplayProgress {
    std::int64_t finished = 0;  ///< requests finished or dropped
    std::int64_t total = 0;     ///< requests in the trace
    std::int64_t steps = 0;     ///< steps run
    double simulated_ms = 0;    ///< the simulated clock
};

/// Replays `trace` through `setup.cluster.instances` `Cache<Policies>`s, each on a backend of its own, pricing each
/// step with `cost`
/// (`double(const StepWork&)`, simulated ms, at least 0), calling `progress` every `progress_every` steps.
/// Throws `WrongRow` for a row that does not hold its marker, `std::runtime_error` for a broken byte
/// accounting line (with the step), `logic_error` for a configuration the cache refuses (a memory below the
/// floor) and for a trace whose prompt tokens pass 2^30.
template <class Policies, class Cost>
ReplayResult replay(const Trace& trace, const ReplaySetup& setup, const Cost& cost,
                    const std::function<void(const ReplayProgress&)>& progress = {});

}  // namespace unikv::sim

#include <unikv_sim/detail/engine.inl>

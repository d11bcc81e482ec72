#pragma once
/// \file
/// The figures of one replay (`ReplayFigures`), computed from its records alone (`compute_figures`).
///
/// Conventions:
/// * hit rates are shares of the prompt tokens of the finished requests, counted at each request's admission
///   (device: served from the device tree; host: loaded back from the host tier);
/// * percentiles are **nearest-rank**: the p-th percentile of n samples is the `ceil(p / 100 * n)`-th smallest
///   (so p99 of 50 samples is the largest), 0 for no samples;
/// * TTFT is `first_token_ms - arrival_ms`; the inter-token latency of a request is its mean gap between output
///   tokens, `(finish_ms - first_token_ms) / (output_tokens - 1)` (requests with one output token have none),
///   and its percentiles are over requests;
/// * throughput divides the finished requests' tokens by the simulated span, from the first arrival (0) to the
///   end of the latest step, idle gaps between arrivals included (a trace replayed at its own arrival rate
///   cannot run faster than it arrives);
/// * per-step figures (admitted tokens, running requests, cache time) are over steps, every step weighing the
///   same (with several instances, every instance's steps);
/// * per instance (`instance_figures`), the same figures of its own steps and requests, and its busy share: the
///   simulated time its steps took over the cluster's span. Load balance (`load_balance`) is the busiest
///   instance over the mean, for routed prompt tokens and for busy time (1: even).

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include <unikv_sim/replay_records.hpp>

namespace unikv::sim {

/// p50, p90 and p99 of one quantity.
struct Percentiles {
    double p50 = 0;
    double p90 = 0;
    double p99 = 0;
};

/// The nearest-rank `p`-th percentile of `sorted` (ascending), 0 when it is empty. Precondition: `0 < p <= 100`.
/// O(1).
[[nodiscard]] inline double nearest_rank(const std::vector<double>& sorted, double p) noexcept {
    if (sorted.empty()) return 0;
    const auto rank = static_cast<std::size_t>(std::ceil(p / 100 * static_cast<double>(sorted.size())));
    return sorted[std::clamp<std::size_t>(rank, 1, sorted.size()) - 1];
}

/// p50/p90/p99 of `samples` (sorted in place). O(n log n).
[[nodiscard]] inline Percentiles percentiles(std::vector<double>& samples) {
    std::sort(samples.begin(), samples.end());
    return {nearest_rank(samples, 50), nearest_rank(samples, 90), nearest_rank(samples, 99)};
}

/// Every figure of one replay (see the file comment for the conventions).
struct ReplayFigures {
    std::size_t finished = 0;           ///< requests finished
    std::size_t dropped = 0;            ///< requests too long for the memory, never admitted
    std::int64_t unfinished = 0;        ///< requests still running or waiting when the replay hit its step limit
    std::int64_t steps = 0;             ///< engine steps
    double simulated_seconds = 0;       ///< first arrival to the end of the last step
    double wall_seconds = 0;            ///< the replay's own wall time
    std::int64_t prompt_tokens = 0;     ///< of the finished requests
    std::int64_t output_tokens = 0;     ///< of the finished requests
    std::int64_t device_hit_tokens = 0; ///< prompt tokens served from the device tree
    std::int64_t host_hit_tokens = 0;   ///< prompt tokens loaded back from the host tier
    std::int64_t storage_hit_tokens = 0;  ///< prompt tokens fetched from the storage tier (then loaded back)
    /// Prompt tokens an infinite cache serves, and the causes of what the replay missed of them (`RequestRecord`).
    std::int64_t limit_tokens = 0;
    std::int64_t lost_to_full = 0;
    std::int64_t lost_to_swa = 0;
    std::int64_t lost_to_mamba = 0;
    std::int64_t lost_to_concurrency = 0;
    std::int64_t lost_to_routing = 0;
    double device_hit_rate = 0;         ///< `device_hit_tokens / prompt_tokens`
    double host_hit_rate = 0;           ///< `host_hit_tokens / prompt_tokens`
    double storage_hit_rate = 0;        ///< `storage_hit_tokens / prompt_tokens`
    double admitted_tokens_per_step = 0;  ///< prompt tokens admitted per step, mean
    std::int64_t admitted_tokens_max = 0; ///< the most prompt tokens one step admitted
    std::int64_t refusals = 0;            ///< admission refusals, summed over steps
    std::int64_t chunked = 0;             ///< admissions cut to the chunk budget (their prefill went on later)
    std::int64_t preemptions = 0;         ///< running requests retracted
    std::uint64_t bytes_compacted = 0;    ///< moved inside the arena by compaction
    std::uint64_t bytes_loaded = 0;       ///< host to device
    std::uint64_t bytes_written = 0;      ///< device to host
    std::uint64_t bytes_fetched = 0;      ///< storage to host (prefetches)
    std::uint64_t bytes_stored = 0;       ///< host to storage (puts)
    double cache_us_mean = 0;             ///< wall time in cache calls per step, mean (µs)
    double cache_us_p99 = 0;              ///< the same, p99 (µs)
    double output_tokens_per_s = 0;       ///< simulated throughput, output tokens
    double total_tokens_per_s = 0;        ///< simulated throughput, prompt + output tokens
    Percentiles ttft_ms;                  ///< time to first token
    Percentiles itl_ms;                   ///< inter-token latency (per-request mean gap)
    /// Bytes of SWA rows and Mamba states the tree held per FULL token it held on device, over all steps (what
    /// the retention policies keep; 0 without SWA and Mamba).
    double window_state_bytes_per_token = 0;
    double mean_running = 0;              ///< running requests after a step, mean
    std::int32_t max_running = 0;         ///< the most running requests after a step
    double requests_per_wall_s = 0;       ///< replay speed: finished requests per wall second
    double tokens_per_wall_s = 0;         ///< replay speed: simulated prompt + output tokens per wall second

    /// Hit rate on any tier.
    [[nodiscard]] double hit_rate() const noexcept { return device_hit_rate + host_hit_rate + storage_hit_rate; }
};

/// The figures of `r`. O(steps log steps + requests log requests); allocates the sample vectors.
[[nodiscard]] inline ReplayFigures compute_figures(const ReplayResult& r) {
    ReplayFigures f;
    f.finished = r.requests.size();
    f.dropped = r.dropped.size();
    f.unfinished = r.unfinished;
    f.steps = static_cast<std::int64_t>(r.steps.size());
    f.wall_seconds = r.wall_seconds;
    const auto ratio = [](double a, double b) { return b > 0 ? a / b : 0.0; };

    std::vector<double> cache_us, ttft, itl;
    cache_us.reserve(r.steps.size());
    std::int64_t admitted = 0, running = 0, cached = 0;
    double kept = 0;
    for (const StepRecord& s : r.steps) {
        cached += s.cached_tokens;
        kept += static_cast<double>(s.window_state_bytes);
        admitted += s.admitted_prompt_tokens;
        f.admitted_tokens_max = std::max(f.admitted_tokens_max, s.admitted_prompt_tokens);
        f.refusals += s.refused;
        f.chunked += s.chunked;
        f.preemptions += s.preempted;
        f.bytes_compacted += s.bytes_compacted;
        f.bytes_loaded += s.work.bytes_loaded;
        f.bytes_written += s.work.bytes_written;
        f.bytes_fetched += s.work.bytes_fetched;
        f.bytes_stored += s.work.bytes_stored;
        running += s.running;
        f.max_running = std::max(f.max_running, s.running);
        cache_us.push_back(static_cast<double>(s.cache_ns) / 1e3);
    }
    for (const StepRecord& s : r.steps)
        f.simulated_seconds = std::max(f.simulated_seconds, (s.start_ms + s.duration_ms) / 1e3);
    const double steps = static_cast<double>(r.steps.size());
    f.admitted_tokens_per_step = ratio(static_cast<double>(admitted), steps);
    f.mean_running = ratio(static_cast<double>(running), steps);
    f.window_state_bytes_per_token = ratio(kept, static_cast<double>(cached));
    for (const double c : cache_us) f.cache_us_mean += c;
    f.cache_us_mean = ratio(f.cache_us_mean, steps);
    f.cache_us_p99 = percentiles(cache_us).p99;

    ttft.reserve(r.requests.size());
    itl.reserve(r.requests.size());
    for (const RequestRecord& q : r.requests) {
        f.prompt_tokens += q.prompt_tokens;
        f.output_tokens += q.output_tokens;
        f.device_hit_tokens += q.device_hit_tokens;
        f.host_hit_tokens += q.host_hit_tokens;
        f.storage_hit_tokens += q.storage_hit_tokens;
        f.limit_tokens += q.limit_tokens;
        f.lost_to_full += q.lost_to_full;
        f.lost_to_swa += q.lost_to_swa;
        f.lost_to_mamba += q.lost_to_mamba;
        f.lost_to_concurrency += q.lost_to_concurrency;
        f.lost_to_routing += q.lost_to_routing;
        ttft.push_back(q.first_token_ms - q.arrival_ms);
        if (q.output_tokens > 1) itl.push_back((q.finish_ms - q.first_token_ms) / (q.output_tokens - 1));
    }
    f.device_hit_rate = ratio(static_cast<double>(f.device_hit_tokens), static_cast<double>(f.prompt_tokens));
    f.host_hit_rate = ratio(static_cast<double>(f.host_hit_tokens), static_cast<double>(f.prompt_tokens));
    f.storage_hit_rate = ratio(static_cast<double>(f.storage_hit_tokens), static_cast<double>(f.prompt_tokens));
    f.ttft_ms = percentiles(ttft);
    f.itl_ms = percentiles(itl);
    const auto total = static_cast<double>(f.prompt_tokens + f.output_tokens);
    f.output_tokens_per_s = ratio(static_cast<double>(f.output_tokens), f.simulated_seconds);
    f.total_tokens_per_s = ratio(total, f.simulated_seconds);
    f.requests_per_wall_s = ratio(static_cast<double>(f.finished), f.wall_seconds);
    f.tokens_per_wall_s = ratio(total, f.wall_seconds);
    return f;
}

/// One instance of a cluster replay.
struct InstanceFigures {
    std::int32_t instance = 0;
    ReplayFigures figures;     ///< of its own steps and requests; simulated time is the cluster's span
    double busy_share = 0;     ///< its steps' simulated time over the cluster's span
    std::int64_t routed_prompt_tokens = 0;  ///< prompt tokens of the finished requests routed to it
};

/// `r`'s records split by instance: entry `i` holds instance `i`'s steps, requests and dropped requests, in `r`'s
/// order (its wall time and unfinished count are the whole replay's to give, not an instance's: 0). O(records).
[[nodiscard]] inline std::vector<ReplayResult> split_by_instance(const ReplayResult& r) {
    std::vector<ReplayResult> split(static_cast<std::size_t>(std::max(1, r.instances)));
    for (const StepRecord& s : r.steps) split[static_cast<std::size_t>(s.instance)].steps.push_back(s);
    for (const RequestRecord& q : r.requests) split[static_cast<std::size_t>(q.instance)].requests.push_back(q);
    for (std::size_t d = 0; d < r.dropped.size(); ++d) {
        ReplayResult& part = split[static_cast<std::size_t>(d < r.dropped_on.size() ? r.dropped_on[d] : 0)];
        part.dropped.push_back(r.dropped[d]);
        part.dropped_on.push_back(d < r.dropped_on.size() ? r.dropped_on[d] : 0);
    }
    return split;
}

/// The figures of each instance of `r` (one entry per instance, in order): simulated time and throughput over the
/// cluster's span, no replay speed (the wall time is the cluster's). O(records).
[[nodiscard]] inline std::vector<InstanceFigures> instance_figures(const ReplayResult& r) {
    const std::vector<ReplayResult> split = split_by_instance(r);
    double span = 0;
    for (const StepRecord& s : r.steps) span = std::max(span, s.start_ms + s.duration_ms);
    std::vector<InstanceFigures> out(split.size());
    for (std::size_t i = 0; i < split.size(); ++i) {
        double busy = 0;
        for (const StepRecord& s : split[i].steps) busy += s.duration_ms;
        for (const RequestRecord& q : split[i].requests) out[i].routed_prompt_tokens += q.prompt_tokens;
        out[i].instance = static_cast<std::int32_t>(i);
        ReplayFigures& f = out[i].figures;
        f = compute_figures(split[i]);
        f.simulated_seconds = span / 1e3;
        f.output_tokens_per_s = span > 0 ? static_cast<double>(f.output_tokens) / (span / 1e3) : 0;
        f.total_tokens_per_s = span > 0 ? static_cast<double>(f.prompt_tokens + f.output_tokens) / (span / 1e3) : 0;
        out[i].busy_share = span > 0 ? busy / span : 0;
    }
    return out;
}

/// How evenly a cluster's work spread: the largest instance's over the mean (1: even; N: one instance took all).
struct LoadBalance {
    double prompt_tokens = 1;  ///< prompt tokens of the finished requests routed to each instance
    double busy = 1;           ///< simulated time each instance's steps took
};

/// The load balance of `instances`. O(instances).
[[nodiscard]] inline LoadBalance load_balance(const std::vector<InstanceFigures>& instances) {
    const auto max_over_mean = [&](auto value) {
        double sum = 0, most = 0;
        for (const InstanceFigures& i : instances) {
            sum += value(i);
            most = std::max(most, value(i));
        }
        return sum > 0 ? most * static_cast<double>(instances.size()) / sum : 1.0;
    };
    return {.prompt_tokens = max_over_mean([](const InstanceFigures& i) { return double(i.routed_prompt_tokens); }),
            .busy = max_over_mean([](const InstanceFigures& i) { return i.busy_share; })};
}

}  // namespace unikv::sim

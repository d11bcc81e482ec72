#pragma once
/// \file
/// What the simulator prints: the settings and the trace summary, the replay's figures and the comparison with
/// static splits, as aligned tables for people or as one JSON object for scripts (`--json`); and the per-step
/// CSV (`--csv`), which the plot reads too.

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include <unistd.h>

#include <unikv_sim/byte_size.hpp>
#include <unikv_sim/cost_model.hpp>
#include <unikv_sim/metrics.hpp>
#include <unikv_sim/options.hpp>
#include <unikv_sim/replay_records.hpp>
#include <unikv_sim/trace_summary.hpp>

namespace unikv::sim {

/// Where a trace came from, in words: the file, or the workload and seed.
[[nodiscard]] inline std::string describe_input(const SimOptions& o) {
    if (const auto* file = std::get_if<TraceFile>(&o.input)) return file->path;
    const auto& g = std::get<GeneratorConfig>(o.input);
    return message("generated ", workload_name(g.workload), ", seed ", g.seed);
}

/// The pools of preset `name` with their layer counts, for example
/// `gemma-3-27b: FULL 10 layers, SWA 52 layers (window 1024)`. Throws `InputError` for an unknown name.
[[nodiscard]] inline std::string describe_model(std::string_view name) {
    return with_preset(name, "--model", []<class P>(std::type_identity<P>) {
        const ModelDescription& m = P::model;
        std::string out = message(P::name, ": FULL ", m.full.layers, " layers");
        if (m.swa.layers > 0) out += message(", SWA ", m.swa.layers, " layers (window ", m.swa_window_tokens, ")");
        if (m.mamba.layers > 0) out += message(", Mamba ", m.mamba.layers, " layers");
        return out;
    });
}

/// `v` with a comma between groups of three digits: `61,194,628`.
[[nodiscard]] inline std::string with_commas(std::int64_t v) {
    const std::string digits = std::to_string(v < 0 ? -v : v);
    std::string out = v < 0 ? "-" : "";
    for (std::size_t i = 0; i < digits.size(); ++i) {
        if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
        out += digits[i];
    }
    return out;
}

/// `s` as a JSON string literal, quotes included.
[[nodiscard]] inline std::string json_string(std::string_view s) {
    std::string out = "\"";
    for (const char c : s) {
        if (c == '"' || c == '\\') {
            out += '\\';
            out += c;
        } else if (static_cast<unsigned char>(c) < 0x20) {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
            out += buf;
        } else {
            out += c;
        }
    }
    return out + "\"";
}

/// The offered prefill load of the trace `s` summarizes at arrival scale `scale` over `o`'s instances
/// (`offered_prefill_load`, `o.model`'s cost model); 0 for a trace whose arrivals span no time.
[[nodiscard]] inline double offered_load(const SimOptions& o, const TraceSummary& s, double scale) {
    return with_preset(o.model, "--model", [&]<class P>(std::type_identity<P>) {
        return offered_prefill_load(CostModel::of<P>(), s.prompt_tokens, s.duration_ms * scale / 1e3,
                                    o.cluster.instances);
    });
}

/// Prints the settings and `s` as a table.
inline void print_summary_table(std::FILE* out, const SimOptions& o, const TraceSummary& s, std::int32_t block_tokens) {
    const double seconds = s.duration_ms / 1000;
    std::fprintf(out, "unikv-sim: trace summary\n");
    std::fprintf(out, "  %-22s %s (%d-token blocks)\n", "trace", describe_input(o).c_str(), block_tokens);
    std::fprintf(out, "  %-22s %s over %.1f s (%.2f per s)\n", "requests",
                 with_commas(static_cast<std::int64_t>(s.requests)).c_str(), seconds,
                 seconds > 0 ? static_cast<double>(s.requests) / seconds : 0.0);
    std::fprintf(out, "  %-22s %s (mean %.1f, longest %s)\n", "prompt tokens", with_commas(s.prompt_tokens).c_str(),
                 s.mean_prompt(), with_commas(s.longest_prompt).c_str());
    std::fprintf(out, "  %-22s %s (mean %.1f, longest %s)\n", "output tokens", with_commas(s.output_tokens).c_str(),
                 s.mean_output(), with_commas(s.longest_output).c_str());
    std::fprintf(out, "  %-22s %s tokens\n", "longest request", with_commas(s.longest_request).c_str());
    std::fprintf(out, "  %-22s %s (%s tokens of distinct content at most)\n", "unique blocks",
                 with_commas(s.distinct_blocks).c_str(),
                 with_commas(std::int64_t{s.distinct_blocks} * block_tokens).c_str());
    std::fprintf(out, "  %-22s %.1f%% of prompt tokens (%s; an infinite cache, last prompt token computed)\n",
                 "max prefix hit rate", 100 * s.max_prefix_hit_rate(), with_commas(s.reusable_tokens).c_str());
    if (s.outputs_continued) {
        std::fprintf(out, "  %-22s the tokens that follow each prompt in its stream (%s of %s requests continued by "
                     "a later prompt; --fresh-outputs for ids no prompt holds)\n", "outputs decoded",
                     with_commas(s.continued).c_str(), with_commas(static_cast<std::int64_t>(s.requests)).c_str());
    } else {
        std::fprintf(out, "  %-22s fresh ids no prompt holds (--fresh-outputs)\n", "outputs decoded");
    }
    std::string kept;
    if (o.retention.prompt_ends) kept += "prompt ends";
    if (o.retention.branch_points) kept += kept.empty() ? "branch points" : ", branch points";
    if (o.retention.every_tokens > 0) kept += (kept.empty() ? "every " : ", every ") + with_commas(o.retention.every_tokens) + " tokens";
    std::fprintf(out, "  %-22s %s (--retain, --retain-every)\n", "windows, states kept at",
                 kept.empty() ? "chunk and request ends only" : kept.c_str());
    std::fprintf(out, "  %-22s %s\n", "model", describe_model(o.model).c_str());
    std::fprintf(out, "  %-22s device %s, host %s, write policy %s\n", "memory",
                 format_bytes(o.device_memory_bytes).c_str(), format_bytes(o.host_memory_bytes).c_str(),
                 std::string(write_policy_name(o.write_policy)).c_str());
    if (!o.storage.empty())
        std::fprintf(out, "  %-22s %s, %s%s\n", "storage tier", o.storage.c_str(),
                     format_bytes(o.storage_bytes).c_str(), o.cluster.instances > 1 ? ", shared by every instance" : "");
    std::fprintf(out, "  %-22s %d instance%s (each with the memory above), router %s", "cluster", o.cluster.instances,
                 o.cluster.instances > 1 ? "s" : "", std::string(router_name(o.cluster.router)).c_str());
    if (o.cluster.router == RouterChoice::prefix)
        std::fprintf(out, " (balance threshold %s queued tokens)", with_commas(o.cluster.balance_tokens).c_str());
    std::fprintf(out, "\n  %-22s arrivals x%.3g%s: prefill without reuse offered at %.0f%% of the instances' compute "
                 "peak\n", "load", o.arrival_scale,
                 o.target_load > 0 ? message(" (--target-load ", o.target_load, ")").c_str() : "",
                 100 * offered_load(o, s, o.arrival_scale));
}

/// The settings and `s` as the members of a JSON object (no braces), for `print_summary_json` and the replay's
/// object.
[[nodiscard]] inline std::string summary_json_members(const SimOptions& o, const TraceSummary& s,
                                                      std::int32_t block_tokens) {
    char buf[1024];
    std::snprintf(buf, sizeof buf,
                  "\"block_tokens\": %d, \"requests\": %zu, \"duration_ms\": %.3f, "
                  "\"prompt_tokens\": %lld, \"output_tokens\": %lld, \"mean_prompt_tokens\": %.3f, "
                  "\"mean_output_tokens\": %.3f, \"longest_prompt_tokens\": %d, \"longest_output_tokens\": %d, "
                  "\"longest_request_tokens\": %lld, \"unique_blocks\": %u, \"reusable_prompt_tokens\": %lld, "
                  "\"max_prefix_hit_rate\": %.6f, ",
                  block_tokens, s.requests, s.duration_ms, static_cast<long long>(s.prompt_tokens),
                  static_cast<long long>(s.output_tokens), s.mean_prompt(), s.mean_output(), s.longest_prompt,
                  s.longest_output, static_cast<long long>(s.longest_request), s.distinct_blocks,
                  static_cast<long long>(s.reusable_tokens), s.max_prefix_hit_rate());
    return message("\"trace\": ", json_string(describe_input(o)), ", ", std::string(buf),
                   "\"model\": ", json_string(o.model), ", \"device_memory_bytes\": ", o.device_memory_bytes,
                   ", \"host_memory_bytes\": ", o.host_memory_bytes,
                   ", \"write_policy\": ", json_string(write_policy_name(o.write_policy)),
                   ", \"storage\": ", json_string(o.storage), ", \"storage_bytes\": ", o.storage_bytes,
                   ", \"outputs_continued\": ", s.outputs_continued ? "true" : "false",
                   ", \"continued_requests\": ", s.continued, ", \"instances\": ", o.cluster.instances,
                   ", \"router\": ", json_string(router_name(o.cluster.router)),
                   ", \"balance_tokens\": ", o.cluster.balance_tokens, ", \"arrival_scale\": ", o.arrival_scale,
                   ", \"target_load\": ", o.target_load,
                   ", \"offered_prefill_load\": ", offered_load(o, s, o.arrival_scale));
}

/// Prints the settings and `s` as one JSON object on one line.
inline void print_summary_json(std::FILE* out, const SimOptions& o, const TraceSummary& s, std::int32_t block_tokens) {
    std::fprintf(out, "{%s}\n", summary_json_members(o, s, block_tokens).c_str());
}

/// One replay to report: what it was and its figures.
struct ReportedRun {
    std::string label;    ///< for example `unified` or `static 0.8 (SGLang default)`
    std::string budget;   ///< the budget and its split, in words
    double swa_full_ratio = 0;  ///< the static split's SWA/FULL token ratio; 0 for the unified run
    ReplayFigures figures;
    std::vector<InstanceFigures> instances;  ///< one per instance (`instance_figures`)
    /// The store's write rate per instance (the cost model's `storage_write_bytes_per_s`); 0 without a store.
    double store_write_bytes_per_s = 0;
};

/// The busiest instance's store writes over the span: its bytes stored at `run.store_write_bytes_per_s`, a share
/// of the simulated span (above 1: the store could not keep up, and the replay, which lets puts run beside the
/// forward, flatters it); 0 without a store. O(instances).
[[nodiscard]] inline double store_write_busy(const ReportedRun& run) {
    const ReplayFigures& f = run.figures;
    if (run.store_write_bytes_per_s <= 0 || f.simulated_seconds <= 0) return 0;
    std::uint64_t most = run.instances.empty() ? f.bytes_stored : 0;
    for (const InstanceFigures& i : run.instances) most = std::max(most, i.figures.bytes_stored);
    return static_cast<double>(most) / run.store_write_bytes_per_s / f.simulated_seconds;
}

/// `v` rounded to a whole number, with commas.
[[nodiscard]] inline std::string round_commas(double v) { return with_commas(std::llround(v)); }

/// Prints one replay's figures as a table.
inline void print_replay_table(std::FILE* out, const ReportedRun& run, const TraceSummary& s) {
    const ReplayFigures& f = run.figures;
    std::fprintf(out, "unikv-sim: replay, %s (%s)\n", run.label.c_str(), run.budget.c_str());
    std::fprintf(out, "  %-22s %s finished, %s dropped (too long for the memory), %s unfinished; %s steps\n",
                 "requests", with_commas(static_cast<std::int64_t>(f.finished)).c_str(),
                 with_commas(static_cast<std::int64_t>(f.dropped)).c_str(), with_commas(f.unfinished).c_str(),
                 with_commas(f.steps).c_str());
    if (f.storage_hit_tokens > 0 || f.bytes_stored > 0) {
        std::fprintf(out, "  %-22s %.1f%% device + %.1f%% host + %.1f%% storage = %.1f%% of prompt tokens (max %.1f%%)\n",
                     "token hit rate", 100 * f.device_hit_rate, 100 * f.host_hit_rate, 100 * f.storage_hit_rate,
                     100 * f.hit_rate(), 100 * s.max_prefix_hit_rate());
    } else {
        std::fprintf(out, "  %-22s %.1f%% device + %.1f%% host = %.1f%% of prompt tokens (max %.1f%%)\n",
                     "token hit rate", 100 * f.device_hit_rate, 100 * f.host_hit_rate, 100 * f.hit_rate(),
                     100 * s.max_prefix_hit_rate());
    }
    const auto share = [&](std::int64_t v) { return f.prompt_tokens > 0 ? 100.0 * static_cast<double>(v) / static_cast<double>(f.prompt_tokens) : 0.0; };
    char routing[64] = "";  // a cluster's misses another instance's cache held
    if (run.instances.size() > 1)
        std::snprintf(routing, sizeof routing, ", held by another instance %.1f%%", share(f.lost_to_routing));
    std::fprintf(out, "  %-22s %.1f%% of prompt tokens: FULL pages missing %.1f%%, SWA window %.1f%%, Mamba state "
                 "%.1f%%, still being computed %.1f%%%s\n", "missed of the limit",
                 share(f.limit_tokens - f.device_hit_tokens - f.host_hit_tokens - f.storage_hit_tokens),
                 share(f.lost_to_full), share(f.lost_to_swa), share(f.lost_to_mamba), share(f.lost_to_concurrency),
                 routing);
    std::fprintf(out, "  %-22s %s bytes of SWA rows and Mamba states per cached token\n", "windows, states kept",
                 round_commas(f.window_state_bytes_per_token).c_str());
    std::fprintf(out, "  %-22s %s prompt tokens per step (max %s); %s refusals, %s chunked\n", "admitted",
                 round_commas(f.admitted_tokens_per_step).c_str(), with_commas(f.admitted_tokens_max).c_str(),
                 with_commas(f.refusals).c_str(), with_commas(f.chunked).c_str());
    std::fprintf(out, "  %-22s mean %.1f, max %d; %s preemptions\n", "running requests", f.mean_running,
                 f.max_running, with_commas(f.preemptions).c_str());
    std::fprintf(out, "  %-22s compaction %s; host link %s loaded, %s written\n", "bytes moved",
                 format_bytes_rounded(f.bytes_compacted).c_str(), format_bytes_rounded(f.bytes_loaded).c_str(),
                 format_bytes_rounded(f.bytes_written).c_str());
    if (f.bytes_fetched > 0 || f.bytes_stored > 0)
        std::fprintf(out, "  %-22s %s fetched, %s stored (the busiest instance's writes take %.0f%% of the span at "
                     "%.1f GB/s)\n", "storage tier", format_bytes_rounded(f.bytes_fetched).c_str(),
                     format_bytes_rounded(f.bytes_stored).c_str(), 100 * store_write_busy(run),
                     run.store_write_bytes_per_s / 1e9);
    std::fprintf(out, "  %-22s mean %.1f us, p99 %.1f us (wall time in cache calls)\n", "cache time per step",
                 f.cache_us_mean, f.cache_us_p99);
    std::fprintf(out, "  %-22s %s output tokens/s, %s total tokens/s over %.1f simulated s\n", "throughput",
                 round_commas(f.output_tokens_per_s).c_str(), round_commas(f.total_tokens_per_s).c_str(),
                 f.simulated_seconds);
    std::fprintf(out, "  %-22s p50 %.1f, p90 %.1f, p99 %.1f ms\n", "TTFT", f.ttft_ms.p50, f.ttft_ms.p90,
                 f.ttft_ms.p99);
    std::fprintf(out, "  %-22s p50 %.2f, p90 %.2f, p99 %.2f ms\n", "inter-token latency", f.itl_ms.p50,
                 f.itl_ms.p90, f.itl_ms.p99);
    std::fprintf(out, "  %-22s %.1f s wall: %s requests/s, %s simulated tokens/s\n", "replay speed",
                 f.wall_seconds, round_commas(f.requests_per_wall_s).c_str(),
                 round_commas(f.tokens_per_wall_s).c_str());
}

/// Prints the unified run beside static splits: `runs[0]` is the unified run, `runs[1]` the engine-default
/// split, `runs[2]` the best of the sweep; `sweep` lists every split tried, in order.
inline void print_comparison_table(std::FILE* out, std::span<const ReportedRun> runs,
                                   std::span<const ReportedRun> sweep) {
    std::fprintf(out, "unikv-sim: unified arena against a static split of the same memory (one pool per component)\n");
    std::fprintf(out, "  %-30s %8s %8s %8s %8s %8s %9s %10s %11s\n", "run", "hit", "device", "host", "dropped",
                 "preempt", "running", "TTFT p50", "output/s");
    for (const ReportedRun& r : runs) {
        const ReplayFigures& f = r.figures;
        std::fprintf(out, "  %-30s %7.1f%% %7.1f%% %7.1f%% %8s %8s %9.1f %7.0f ms %11s\n", r.label.c_str(),
                     100 * f.hit_rate(), 100 * f.device_hit_rate, 100 * f.host_hit_rate,
                     with_commas(static_cast<std::int64_t>(f.dropped)).c_str(), with_commas(f.preemptions).c_str(),
                     f.mean_running, f.ttft_ms.p50,
                     round_commas(f.output_tokens_per_s).c_str());
    }
    std::string tried;
    for (const ReportedRun& r : sweep)
        tried += message(tried.empty() ? "" : ", ", r.swa_full_ratio, " -> ",
                         std::llround(1000 * r.figures.hit_rate()) / 10.0, "%",
                         r.figures.dropped > 0 ? message(" (", r.figures.dropped, " dropped)") : std::string());
    std::fprintf(out, "  %-30s %s\n", "sweep (SWA/FULL ratio)", tried.c_str());
    const double unified = runs[0].figures.hit_rate();
    std::fprintf(out, "  %-30s %+.1f points against the default, %+.1f against the best split\n",
                 "hit-rate gap (unified - static)", 100 * (unified - runs[1].figures.hit_rate()),
                 100 * (unified - runs[2].figures.hit_rate()));
}

/// Prints each instance of a cluster run, and the load balance. Prints nothing for one instance. `limit` is what an
/// infinite cache shared by every instance serves of the instance's prompt tokens.
inline void print_instances_table(std::FILE* out, const ReportedRun& run) {
    if (run.instances.size() < 2) return;
    std::fprintf(out, "unikv-sim: instances, %s\n", run.label.c_str());
    std::fprintf(out, "  %-8s %8s %14s %7s %7s %7s %7s %7s %6s %10s %10s %8s %11s %11s\n", "instance", "requests",
                 "prompt tokens", "hit", "device", "host", "storage", "limit", "busy", "TTFT p50", "TTFT p99",
                 "ITL p50", "host link", "storage");
    for (const InstanceFigures& i : run.instances) {
        const ReplayFigures& f = i.figures;
        const double limit = f.prompt_tokens > 0 ? double(f.limit_tokens) / double(f.prompt_tokens) : 0.0;
        std::fprintf(out,
                     "  %-8d %8s %14s %6.1f%% %6.1f%% %6.1f%% %6.1f%% %6.1f%% %5.0f%% %7.0f ms %7.0f ms %5.1f ms %11s %11s\n",
                     i.instance, with_commas(static_cast<std::int64_t>(f.finished)).c_str(),
                     with_commas(i.routed_prompt_tokens).c_str(), 100 * f.hit_rate(), 100 * f.device_hit_rate,
                     100 * f.host_hit_rate, 100 * f.storage_hit_rate, 100 * limit, 100 * i.busy_share, f.ttft_ms.p50,
                     f.ttft_ms.p99, f.itl_ms.p50, format_bytes_rounded(f.bytes_loaded + f.bytes_written).c_str(),
                     format_bytes_rounded(f.bytes_fetched + f.bytes_stored).c_str());
    }
    const LoadBalance b = load_balance(run.instances);
    std::fprintf(out, "  %-22s busiest over mean: %.2f of prompt tokens, %.2f of busy time (1: even)\n",
                 "load balance", b.prompt_tokens, b.busy);
}

/// Prints what each tier buys: `runs` side by side (hit rate per tier, latency, throughput, bytes per link).
inline void print_tiers_table(std::FILE* out, std::span<const ReportedRun> runs) {
    std::fprintf(out, "unikv-sim: what each tier buys (the same trace, load and instances)\n");
    std::fprintf(out, "  %-34s %6s %7s %6s %7s %10s %10s %8s %9s %10s %10s\n", "run", "hit", "device", "host",
                 "storage", "TTFT p50", "TTFT p99", "ITL p50", "tokens/s", "host link", "storage");
    for (const ReportedRun& r : runs) {
        const ReplayFigures& f = r.figures;
        std::fprintf(out, "  %-34s %5.1f%% %6.1f%% %5.1f%% %6.1f%% %7.0f ms %7.0f ms %5.1f ms %9s %10s %10s\n",
                     r.label.c_str(), 100 * f.hit_rate(), 100 * f.device_hit_rate, 100 * f.host_hit_rate,
                     100 * f.storage_hit_rate, f.ttft_ms.p50, f.ttft_ms.p99, f.itl_ms.p50,
                     round_commas(f.total_tokens_per_s).c_str(),
                     format_bytes_rounded(f.bytes_loaded + f.bytes_written).c_str(),
                     format_bytes_rounded(f.bytes_fetched + f.bytes_stored).c_str());
    }
}

/// One replay's figures as a JSON object.
[[nodiscard]] inline std::string figures_json(const ReplayFigures& f) {
    char buf[2560];
    std::snprintf(
        buf, sizeof buf,
        "{\"finished\": %zu, \"dropped\": %zu, \"unfinished\": %lld, \"steps\": %lld, \"simulated_seconds\": %.6f, "
        "\"wall_seconds\": %.6f, \"prompt_tokens\": %lld, \"output_tokens\": %lld, \"device_hit_tokens\": %lld, "
        "\"host_hit_tokens\": %lld, \"device_hit_rate\": %.6f, \"host_hit_rate\": %.6f, \"hit_rate\": %.6f, "
        "\"admitted_tokens_per_step\": %.3f, \"admitted_tokens_max\": %lld, \"refusals\": %lld, \"chunked\": %lld, "
        "\"preemptions\": %lld, \"bytes_compacted\": %llu, \"bytes_loaded\": %llu, \"bytes_written\": %llu, "
        "\"cache_us_per_step_mean\": %.3f, \"cache_us_per_step_p99\": %.3f, \"output_tokens_per_s\": %.3f, "
        "\"total_tokens_per_s\": %.3f, \"ttft_ms\": {\"p50\": %.3f, \"p90\": %.3f, \"p99\": %.3f}, "
        "\"itl_ms\": {\"p50\": %.4f, \"p90\": %.4f, \"p99\": %.4f}, \"mean_running\": %.3f, \"max_running\": %d, "
        "\"requests_per_wall_s\": %.3f, \"tokens_per_wall_s\": %.3f, \"limit_tokens\": %lld, "
        "\"lost_to_full\": %lld, \"lost_to_swa\": %lld, \"lost_to_mamba\": %lld, \"lost_to_concurrency\": %lld, \"lost_to_routing\": %lld, "
        "\"window_state_bytes_per_token\": %.1f, \"storage_hit_tokens\": %lld, \"storage_hit_rate\": %.6f, "
        "\"bytes_fetched\": %llu, \"bytes_stored\": %llu}",
        f.finished, f.dropped, static_cast<long long>(f.unfinished), static_cast<long long>(f.steps),
        f.simulated_seconds, f.wall_seconds, static_cast<long long>(f.prompt_tokens),
        static_cast<long long>(f.output_tokens), static_cast<long long>(f.device_hit_tokens),
        static_cast<long long>(f.host_hit_tokens), f.device_hit_rate, f.host_hit_rate, f.hit_rate(),
        f.admitted_tokens_per_step, static_cast<long long>(f.admitted_tokens_max), static_cast<long long>(f.refusals),
        static_cast<long long>(f.chunked), static_cast<long long>(f.preemptions),
        static_cast<unsigned long long>(f.bytes_compacted), static_cast<unsigned long long>(f.bytes_loaded),
        static_cast<unsigned long long>(f.bytes_written), f.cache_us_mean, f.cache_us_p99, f.output_tokens_per_s,
        f.total_tokens_per_s, f.ttft_ms.p50, f.ttft_ms.p90, f.ttft_ms.p99, f.itl_ms.p50, f.itl_ms.p90, f.itl_ms.p99,
        f.mean_running, f.max_running, f.requests_per_wall_s, f.tokens_per_wall_s,
        static_cast<long long>(f.limit_tokens), static_cast<long long>(f.lost_to_full),
        static_cast<long long>(f.lost_to_swa), static_cast<long long>(f.lost_to_mamba),
        static_cast<long long>(f.lost_to_concurrency), static_cast<long long>(f.lost_to_routing),
        f.window_state_bytes_per_token,
        static_cast<long long>(f.storage_hit_tokens), f.storage_hit_rate, static_cast<unsigned long long>(f.bytes_fetched),
        static_cast<unsigned long long>(f.bytes_stored));
    return buf;
}

/// A reported run as a JSON object: its label, budget, ratio, figures and `store_write_busy`, and with several
/// instances each one's figures (`instance`, `routed_prompt_tokens`, `busy_share`, `figures`) and the load balance.
[[nodiscard]] inline std::string run_json(const ReportedRun& r) {
    std::string out = message("{\"label\": ", json_string(r.label), ", \"budget\": ", json_string(r.budget),
                              ", \"swa_full_ratio\": ", r.swa_full_ratio, ", \"figures\": ", figures_json(r.figures),
                              ", \"store_write_busy\": ", store_write_busy(r));
    if (r.instances.size() > 1) {
        out += ", \"instances\": [";
        for (const InstanceFigures& i : r.instances)
            out += message(i.instance ? ", " : "", "{\"instance\": ", i.instance, ", \"routed_prompt_tokens\": ",
                           i.routed_prompt_tokens, ", \"busy_share\": ", i.busy_share,
                           ", \"figures\": ", figures_json(i.figures), "}");
        const LoadBalance b = load_balance(r.instances);
        out += message("], \"load_balance\": {\"prompt_tokens\": ", b.prompt_tokens, ", \"busy\": ", b.busy, "}");
    }
    return out + "}";
}

/// The CSV columns of the pools `steps` has (a pool with occupancy -1 in the first step is absent).
[[nodiscard]] inline std::array<bool, pool_count> pools_present(std::span<const StepRecord> steps) {
    std::array<bool, pool_count> present{};
    if (!steps.empty())
        for (std::size_t c = 0; c < pool_count; ++c) present[c] = steps.front().device_occupancy[c] >= 0;
    return present;
}

/// Writes one CSV row per step of `steps` to `out`: the step and its instance, time (simulated s, the step's end),
/// running and waiting requests, device and host occupancy per pool the layout has (shares of the pool) and the
/// device's in all (a share of the arena), the cumulative device, host, storage and total hit rates of the prompt
/// tokens admitted so far (by every instance, in step order), the step's admitted prompt tokens, preemptions,
/// bytes loaded, written, fetched and stored, and its cache time (µs). Every `stride`-th step is written (the
/// last one always), so a plot of a long replay stays small. Returns false when writing fails.
inline bool write_steps_csv(std::FILE* out, std::span<const StepRecord> steps, std::size_t stride = 1) {
    constexpr const char* pool_names[pool_count] = {"full", "swa", "mamba"};
    const auto present = pools_present(steps);
    std::fprintf(out, "step,instance,time_s,running,waiting");
    for (const char* tier : {"device", "host"})
        for (std::size_t c = 0; c < pool_count; ++c)
            if (present[c]) std::fprintf(out, ",%s_%s", tier, pool_names[c]);
    std::fprintf(out, ",device_total,device_hit_rate,host_hit_rate,storage_hit_rate,hit_rate,admitted_tokens,"
                      "preempted,bytes_loaded,bytes_written,bytes_fetched,bytes_stored,cache_us\n");
    std::int64_t admitted = 0, device = 0, host = 0, storage = 0;
    for (std::size_t i = 0; i < steps.size(); ++i) {
        const StepRecord& s = steps[i];
        admitted += s.admitted_prompt_tokens;
        device += s.device_hit_tokens;
        host += s.host_hit_tokens;
        storage += s.storage_hit_tokens;
        if (i % stride != 0 && i + 1 != steps.size()) continue;
        const double a = admitted > 0 ? static_cast<double>(admitted) : 1;
        std::fprintf(out, "%lld,%d,%.6f,%d,%d", static_cast<long long>(s.step), s.instance,
                     (s.start_ms + s.duration_ms) / 1e3, s.running, s.waiting);
        double total = 0;
        for (const auto* occupancy : {&s.device_occupancy, &s.host_occupancy})
            for (std::size_t c = 0; c < pool_count; ++c) {
                if (!present[c]) continue;
                std::fprintf(out, ",%.6f", std::max(0.0, (*occupancy)[c]));
                if (occupancy == &s.device_occupancy) total += std::max(0.0, (*occupancy)[c]);
            }
        std::fprintf(out, ",%.6f,%.6f,%.6f,%.6f,%.6f,%lld,%d,%llu,%llu,%llu,%llu,%.3f\n", total, double(device) / a,
                     double(host) / a, double(storage) / a, double(device + host + storage) / a,
                     static_cast<long long>(s.admitted_prompt_tokens), s.preempted,
                     static_cast<unsigned long long>(s.work.bytes_loaded),
                     static_cast<unsigned long long>(s.work.bytes_written),
                     static_cast<unsigned long long>(s.work.bytes_fetched),
                     static_cast<unsigned long long>(s.work.bytes_stored), static_cast<double>(s.cache_ns) / 1e3);
    }
    return std::ferror(out) == 0;
}

/// Throws `InputError` naming `flag` unless the file `path` can be written: its directory exists and takes new
/// files, or the file exists and can be written. Changes nothing on disk.
inline void check_writable(const std::string& path, std::string_view flag) {
    std::error_code ec;
    const std::filesystem::path p(path);
    if (std::filesystem::exists(p, ec)) {
        if (std::filesystem::is_directory(p, ec) || ::access(path.c_str(), W_OK) != 0)
            throw InputError(message(flag, ": cannot write '", path, "'"));
        return;
    }
    const std::filesystem::path dir = p.has_parent_path() ? p.parent_path() : std::filesystem::path(".");
    if (!std::filesystem::is_directory(dir, ec) || ::access(dir.c_str(), W_OK) != 0)
        throw InputError(message(flag, ": cannot write '", path, "': no writable directory '", dir.string(), "'"));
}

/// Writes the CSV of `steps` to the file `path`. Throws `InputError` naming `flag` when the file cannot be
/// written.
inline void write_steps_csv_file(const std::string& path, std::span<const StepRecord> steps, std::string_view flag,
                                 std::size_t stride = 1) {
    std::FILE* f = std::fopen(path.c_str(), "w");
    if (f == nullptr) throw InputError(message(flag, ": cannot write '", path, "'"));
    const bool written = write_steps_csv(f, steps, stride);
    if (std::fclose(f) != 0 || !written) throw InputError(message(flag, ": writing '", path, "' failed"));
}

}  // namespace unikv::sim

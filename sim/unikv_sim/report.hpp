#pragma once
/// \file
/// What the simulator prints: the settings and the trace summary, as an aligned table for people or as one
/// JSON object for scripts (`--json`). The replay's figures join both when the replay lands.

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

#include <unikv_sim/byte_size.hpp>
#include <unikv_sim/options.hpp>
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

/// Prints the settings and `s` as a table.
inline void print_summary_table(std::FILE* out, const SimOptions& o, const TraceSummary& s, std::int32_t block_tokens) {
    const double seconds = s.duration_ms / 1000;
    std::fprintf(out, "unikv-sim: trace summary (the replay through the composed cache is not built yet)\n");
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
    std::fprintf(out, "  %-22s %s\n", "model", describe_model(o.model).c_str());
    std::fprintf(out, "  %-22s device %s, host %s, write policy %s\n", "memory",
                 format_bytes(o.device_memory_bytes).c_str(), format_bytes(o.host_memory_bytes).c_str(),
                 std::string(write_policy_name(o.write_policy)).c_str());
}

/// Prints the settings and `s` as one JSON object on one line.
inline void print_summary_json(std::FILE* out, const SimOptions& o, const TraceSummary& s, std::int32_t block_tokens) {
    std::fprintf(out,
                 "{\"trace\": %s, \"block_tokens\": %d, \"requests\": %zu, \"duration_ms\": %.3f, "
                 "\"prompt_tokens\": %lld, \"output_tokens\": %lld, \"mean_prompt_tokens\": %.3f, "
                 "\"mean_output_tokens\": %.3f, \"longest_prompt_tokens\": %d, \"longest_output_tokens\": %d, "
                 "\"longest_request_tokens\": %lld, \"unique_blocks\": %u, \"reusable_prompt_tokens\": %lld, "
                 "\"max_prefix_hit_rate\": %.6f, \"model\": %s, \"device_memory_bytes\": %llu, "
                 "\"host_memory_bytes\": %llu, \"write_policy\": %s}\n",
                 json_string(describe_input(o)).c_str(), block_tokens, s.requests, s.duration_ms,
                 static_cast<long long>(s.prompt_tokens), static_cast<long long>(s.output_tokens), s.mean_prompt(),
                 s.mean_output(), s.longest_prompt, s.longest_output, static_cast<long long>(s.longest_request),
                 s.distinct_blocks, static_cast<long long>(s.reusable_tokens), s.max_prefix_hit_rate(),
                 json_string(o.model).c_str(), static_cast<unsigned long long>(o.device_memory_bytes),
                 static_cast<unsigned long long>(o.host_memory_bytes),
                 json_string(write_policy_name(o.write_policy)).c_str());
}

}  // namespace unikv::sim

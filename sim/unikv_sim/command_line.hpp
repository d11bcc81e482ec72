#pragma once
/// \file
/// `unikv-sim`'s command line (CLI11), parsed into a `SimOptions`. Only `main.cpp` includes it: CLI11 is a large
/// header, and everything it checks beyond syntax is a plain function of `options.hpp` and `byte_size.hpp`.

#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include <unikv_sim/byte_size.hpp>
#include <unikv_sim/input_error.hpp>
#include <unikv_sim/options.hpp>
#include <unikv_sim/storage_spec.hpp>

namespace unikv::sim {

/// Exit status: the trace or the generator could not give a trace.
inline constexpr int exit_bad_input = 1;
/// Exit status: the command line is wrong.
inline constexpr int exit_bad_command_line = 2;
/// Exit status: an output could not be written (`--csv`, `--plot`; gnuplot missing or failing).
inline constexpr int exit_output_failed = 3;
/// Exit status: the replay found a broken invariant (a wrong row, a byte-accounting line): a bug, reported.
inline constexpr int exit_replay_failed = 4;

/// The result of `parse_command_line`: options to run with, or the status to exit with (0 after `--help`).
struct CommandLine {
    std::optional<SimOptions> options;
    int exit_code = 0;
};

/// Parses `argv`. Prints help to stdout, or an error naming the flag to stderr, and then returns no options.
[[nodiscard]] inline CommandLine parse_command_line(int argc, const char* const* argv) {
    CLI::App app{"unikv-sim: replays an LLM serving trace through the unikv KV cache (unified arena, prefix tree, "
                 "host tier) on the CPU backend.",
                 "unikv-sim"};
    app.footer(
        "unikv-sim reads or generates the trace, prints its summary (with the prefix-hit rate an infinite cache\n"
        "reaches), replays it through unikv::Cache (the preset's layout, its unified budget: SharedSWABudget for\n"
        "FULL+SWA, SharedHybridBudget for FULL+SWA+Mamba, BaseBudget otherwise) with an engine loop, and prints\n"
        "hit rates, admission, preemptions, bytes moved, cache time, simulated throughput and latency. Simulated\n"
        "time comes from a roofline cost model of one H200-class accelerator (sim/unikv_sim/cost_model.hpp).\n\n"
        "--compare-static replays the same trace and memory with a static split, one pool per component, sized\n"
        "as SGLang sizes it: FULL/SWA by --swa-full-tokens-ratio (default 0.8, and the best ratio of a sweep of\n"
        "0.05, 0.1, 0.2, 0.4, 0.8; PartitionedSWABudget), and a Mamba pool of 3 states per running request\n"
        "(PartitionedMambaBudget for FULL+Mamba models). Built for every preset but the FULL-only\n"
        "llama-3.1-8b; both replays run the --write-policy given.\n\n"
        "Write policies: all three run on every preset (a runtime value of the cache; docs/simulator.md).\n\n"
        "--instances N replays N engine instances on one simulated clock, each its own cache with the memory\n"
        "given, behind --router, sharing one --storage tier; --target-load F scales arrivals so that prefilling\n"
        "every prompt without reuse takes F of their compute peak, and --compare-tiers shows what the host and\n"
        "storage tiers buy (docs/simulator.md, \"A cluster\").\n\n"
        "Exit status: 0 done, 1 bad trace or memory too small for a request, 2 bad command line, 3 an output\n"
        "could not be written (--csv, --plot, gnuplot missing), 4 the replay found a broken invariant (a bug).\n");
    // A flag given twice takes its last value, so a script's defaults can be overridden by arguments after them.
    app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
    app.failure_message([](const CLI::App*, const CLI::Error& e) {
        return "unikv-sim: " + std::string(e.what()) + "\nRun with --help for more information.\n";
    });

    std::string trace_path, workload, model = "gemma-3-27b", device = "8GiB", host = "32GiB", policy = "through",
                router = "round-robin";
    GeneratorConfig gen;
    SimOptions o;
    std::vector<std::string> workloads, policies;
    for (const Workload w : all_workloads) workloads.emplace_back(workload_name(w));
    for (const WritePolicyChoice p : all_write_policies) policies.emplace_back(write_policy_name(p));
    std::string presets;
    for (const std::string_view n : preset_names) presets += (presets.empty() ? "" : ", ") + std::string(n);

    auto* trace_opt = app.add_option("--trace", trace_path, "A Mooncake trace (JSON Lines), for example "
                                                            "data/traces/mooncake_synthetic_trace.jsonl");
    auto* gen_opt = app.add_option("--generate", workload, "Generate a workload instead: chat, agent or docqa")
                        ->check(CLI::IsMember(workloads));
    trace_opt->excludes(gen_opt);
    app.add_option("--seed", gen.seed, "Generator seed")->needs(gen_opt)->capture_default_str();
    app.add_option("--requests", gen.requests, "Requests to generate")
        ->needs(gen_opt)
        ->check(CLI::Range(1, 100'000))
        ->capture_default_str();
    app.add_option("--model", model, "Model preset: " + presets)->capture_default_str();
    app.add_option("--device-memory", device, "Device memory for the KV cache, for example 8GiB or 40GB")
        ->capture_default_str();
    app.add_option("--host-memory", host, "Pinned host memory for the host tier")->capture_default_str();
    app.add_option("--write-policy", policy, "Host-tier write policy: through, selective or back")
        ->check(CLI::IsMember(policies))
        ->capture_default_str();
    app.add_flag("--compare-static", o.compare_static, "Also replay a static split of the same memory");
    app.add_flag("--json", o.json, "Print one JSON object instead of the tables (and no progress line)");
    app.add_flag("--fresh-outputs", o.fresh_outputs,
                 "Decode ids no later prompt contains, instead of the tokens that follow each prompt in its content "
                 "stream (the replays before issue 22: a later turn then reuses only the earlier prompts)");
    std::string retain = "all";
    app.add_option("--retain", retain,
                   "Where the cache keeps SWA windows and Mamba states besides chunk and request ends: all (prompt "
                   "ends and branch points), prompt-ends, branch-points or none (docs/cache.md)")
        ->check(CLI::IsMember({"all", "prompt-ends", "branch-points", "none"}))
        ->capture_default_str();
    app.add_option("--retain-every", o.retention.every_tokens,
                   "Also keep them every N prompt tokens (a multiple of the page size; 0: never)")
        ->check(CLI::NonNegativeNumber)
        ->capture_default_str();
    app.add_option("--csv", o.csv_path, "Write per-step occupancy and hit rate to this CSV file");
    app.add_option("--plot", o.plot_path, "Draw occupancy and hit rate over time into this PNG file");
    app.add_option("--max-requests", o.max_requests, "Replay at most this many requests of the trace")
        ->check(CLI::Validator(
            [](std::string& v) {
                return v.find_first_not_of('0') == std::string::npos
                           ? std::string("0 requests replays nothing; give a positive count, or leave it out for the "
                                         "whole trace")
                           : std::string();
            },
            "POSITIVE"));
    std::string storage_size = "1TiB";
    app.add_option("--storage", o.storage,
                   "A storage tier below the host: file:DIR (a FileStorage in DIR, made empty for each run) or "
                   "redis://HOST:PORT (a Redis Cluster node; each run keys its objects apart) (docs/storage.md)");
    app.add_option("--storage-size", storage_size,
                   "The store's capacity in the model's bytes, like --host-memory (a file store's bound; a Redis "
                   "cluster's is its own maxmemory)")
        ->capture_default_str();
    app.add_option("--instances", o.cluster.instances,
                   "Engine instances, each its own cache with the memory given, behind the router")
        ->check(CLI::Range(1, 64))
        ->capture_default_str();
    std::vector<std::string> routers;
    for (const RouterChoice r : all_routers) routers.emplace_back(router_name(r));
    app.add_option("--router", router,
                   "How arrivals are spread over the instances: round-robin, least-loaded (fewest queued prompt "
                   "tokens) or prefix (the instance whose cache holds the longest prefix, unless its queue is "
                   "--balance-tokens longer than the shortest)")
        ->check(CLI::IsMember(routers))
        ->capture_default_str();
    app.add_option("--balance-tokens", o.cluster.balance_tokens,
                   "The prefix router's threshold: queued prompt tokens beyond the least loaded instance's")
        ->check(CLI::NonNegativeNumber)
        ->capture_default_str();
    auto* scale_opt = app.add_option("--arrival-scale", o.arrival_scale,
                                     "Multiply the trace's arrival times by this (2: half the load)")
                          ->check(CLI::Range(1e-6, 1e6))
                          ->capture_default_str();
    auto* load_opt = app.add_option("--target-load", o.target_load,
                                    "Scale arrivals so that prefilling every prompt without reuse takes this share "
                                    "of the instances' compute peak (the cost model's); printed in the summary")
                         ->check(CLI::Range(0.01, 10.0));
    scale_opt->excludes(load_opt);
    app.add_flag("--compare-tiers", o.compare_tiers,
                 "Also replay without the storage tier (when --storage is given) and without the host tier, and "
                 "the static split (SGLang's default ratio) with every tier: what each tier buys");
    app.add_option("--host-link-gbps", o.host_link_gbps,
                   "Host <-> device link of the cost model, GB/s per direction (PCIe 5.0 x16: 64 raw)")
        ->check(CLI::Range(0.001, 1e6))
        ->capture_default_str();

    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        const int code = app.exit(e);
        return {.options = std::nullopt, .exit_code = code == 0 ? 0 : exit_bad_command_line};
    }
    try {
        if (trace_path.empty() && workload.empty())
            throw InputError("give a trace (--trace FILE) or a workload (--generate chat|agent|docqa); see --help");
        if (!trace_path.empty()) {
            o.input = TraceFile{trace_path};
        } else {
            gen.workload = *workload_from_name(workload);  // IsMember checked it
            o.input = gen;
        }
        with_preset(model, "--model", [](auto) { return 0; });
        o.model = model;
        o.device_memory_bytes = parse_bytes(device, "--device-memory");
        o.host_memory_bytes = parse_bytes(host, "--host-memory");
        o.storage_bytes = parse_bytes(storage_size, "--storage-size");
        if (!o.storage.empty()) (void)parse_storage(o.storage);
        o.write_policy = *write_policy_from_name(policy);  // IsMember checked it
        o.cluster.router = *router_from_name(router);       // IsMember checked it
        o.retention.prompt_ends = retain == "all" || retain == "prompt-ends";
        o.retention.branch_points = retain == "all" || retain == "branch-points";
    } catch (const InputError& e) {
        std::fprintf(stderr, "unikv-sim: %s\n", e.what());
        return {.options = std::nullopt, .exit_code = exit_bad_command_line};
    }
    return {.options = std::move(o), .exit_code = 0};
}

}  // namespace unikv::sim

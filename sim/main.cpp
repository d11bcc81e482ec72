// unikv-sim: reads a Mooncake trace or generates a workload, replays it through unikv::Cache with an engine loop
// and a cost model, and reports hit rates, admission, bytes moved, cache time, throughput and latency; with
// --compare-static, beside static FULL/SWA splits of the same memory. See docs/simulator.md.
#include <algorithm>
#include <cstdio>
#include <exception>
#include <new>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

#include <unikv/error.hpp>

#include <unikv_sim/command_line.hpp>
#include <unikv_sim/continuations.hpp>
#include <unikv_sim/generators.hpp>
#include <unikv_sim/metrics.hpp>
#include <unikv_sim/mooncake_reader.hpp>
#include <unikv_sim/plot.hpp>
#include <unikv_sim/replay_run.hpp>
#include <unikv_sim/report.hpp>
#include <unikv_sim/static_split.hpp>
#include <unikv_sim/trace_summary.hpp>

namespace {

using namespace unikv::sim;

Trace load_trace(const SimOptions& o) {
    if (const auto* file = std::get_if<TraceFile>(&o.input))
        return read_mooncake_file(file->path, {.max_requests = o.max_requests});
    GeneratorConfig g = std::get<GeneratorConfig>(o.input);
    if (o.max_requests < static_cast<std::size_t>(g.requests)) g.requests = static_cast<std::int32_t>(o.max_requests);
    return generate(g);
}

// One run: its replay, reported figures and steps (for the CSV and the plot).
struct Run {
    ReportedRun report;
    std::vector<StepRecord> steps;
    BudgetChoice budget = BudgetChoice::unified;
};

// The write rate of the store `spec` runs with (the cost model's, by the store's kind); 0 for none.
double store_write_rate(const SimOptions& o, const RunSpec& spec) {
    if (o.storage.empty() || !spec.host_tier || !spec.storage_tier) return 0;
    return storage_link_for({}, parse_storage(o.storage).kind).storage_write_bytes_per_s;
}

Run run(const Trace& trace, const SimOptions& o, const RunSpec& spec) {
    RunOutput out = with_preset(o.model, "--model", [&]<class P>(std::type_identity<P>) {
        return run_preset<P>(trace, o, spec);
    });
    return {.report = {.label = spec.label,
                       .budget = std::move(out.budget),
                       .swa_full_ratio = spec.swa_full_ratio,
                       .figures = compute_figures(out.result),
                       .instances = instance_figures(out.result),
                       .store_write_bytes_per_s = store_write_rate(o, spec)},
            .steps = std::move(out.result.steps),
            .budget = spec.budget};
}

// The arrival scale `o` asks for: `--target-load`'s, else `--arrival-scale`'s.
double arrival_scale(const SimOptions& o, const TraceSummary& summary) {
    if (o.target_load <= 0) return o.arrival_scale;
    const double load = offered_load(o, summary, 1);
    if (load <= 0)
        throw InputError("--target-load: the trace's arrivals span no time, so no scale of them sets a load; give "
                         "--arrival-scale instead");
    return load / o.target_load;
}

// The label of --compare-tiers' static split: SGLang's default ratio with every tier given.
std::string static_tiers_label(const SimOptions& o) {
    return message("static ", sglang_swa_full_tokens_ratio, o.storage.empty() ? ", device + host" : ", every tier");
}

// The runs of --compare-tiers: the unified arena without the storage tier (when one is given) and without the
// host tier, and the static split at SGLang's default ratio with every tier (a preset without one has none; with
// --compare-static the sweep replays it already).
std::vector<RunSpec> tier_runs(const SimOptions& o) {
    std::vector<RunSpec> out{{.budget = BudgetChoice::unified, .label = "unified, device only", .host_tier = false}};
    if (!o.storage.empty())
        out.push_back({.budget = BudgetChoice::unified, .label = "unified, device + host", .storage_tier = false});
    const bool split =
        with_preset(o.model, "--model", []<class P>(std::type_identity<P>) { return static_split_built<P>; });
    if (split && !o.compare_static)
        out.push_back({.budget = BudgetChoice::static_split,
                       .swa_full_ratio = sglang_swa_full_tokens_ratio,
                       .label = static_tiers_label(o)});
    return out;
}


// The better static split: the one that drops fewer requests (a hit rate over fewer requests is no gain),
// then the higher hit rate.
std::string ratio_label(double ratio, const char* what) { return message("static ", ratio, what); }

}  // namespace

int main(int argc, char** argv) {
    const CommandLine command_line = parse_command_line(argc, argv);
    if (!command_line.options) return command_line.exit_code;
    SimOptions o = *command_line.options;  // the arrival scale is settled once the trace is read
    try {
        with_preset(o.model, "--model", [&]<class P>(std::type_identity<P>) { return check_built<P>(o), 0; });
    } catch (const InputError& e) {
        std::fprintf(stderr, "unikv-sim: %s\n", e.what());
        return exit_bad_command_line;
    }
    try {  // outputs are checked before the replay, not found unwritable after it
        if (!o.csv_path.empty()) check_writable(o.csv_path, "--csv");
        if (!o.plot_path.empty()) {
            check_writable(o.plot_path, "--plot");
            if (!gnuplot_available()) throw InputError(std::string(gnuplot_missing));
        }
    } catch (const InputError& e) {
        std::fprintf(stderr, "unikv-sim: %s\n", e.what());
        return exit_output_failed;
    }

    std::vector<Run> runs;  // the unified run, then the sweep in order
    std::vector<Run> tiers;  // --compare-tiers: the unified run with fewer tiers, the static split with all
    std::size_t best = 0, engine_default = 0;  // indexes into `runs`
    TraceSummary summary;
    std::int32_t block_tokens = 0;
    try {
        const Trace trace = load_trace(o);
        summary = o.fresh_outputs ? summarize(trace) : summarize(trace, continuations(trace));
        block_tokens = trace.block_tokens();
        o.arrival_scale = arrival_scale(o, summary);
        if (!o.json) print_summary_table(stdout, o, summary, block_tokens);
        std::fflush(stdout);
        runs.push_back(run(trace, o, {.budget = BudgetChoice::unified, .label = "unified"}));
        if (o.compare_static) {
            const auto ratios =
                with_preset(o.model, "--model", []<class P>(std::type_identity<P>) { return static_ratios<P>(); });
            for (const double ratio : ratios) {
                runs.push_back(run(trace, o,
                                   {.budget = BudgetChoice::static_split,
                                    .swa_full_ratio = ratio,
                                    .label = ratio_label(ratio, "")}));
                const std::size_t i = runs.size() - 1;
                if (ratio == sglang_swa_full_tokens_ratio) engine_default = i;
            }
            std::vector<ReplayFigures> swept;
            for (std::size_t i = 1; i < runs.size(); ++i) swept.push_back(runs[i].report.figures);
            best = 1 + best_split(swept);
        }
        if (o.compare_tiers) {
            for (const RunSpec& spec : tier_runs(o)) tiers.push_back(run(trace, o, spec));
            if (o.compare_static) {  // the sweep's default split is the tiers' static run
                tiers.push_back(runs[engine_default]);
                tiers.back().report.label = static_tiers_label(o);
            }
        }
    } catch (const InputError& e) {
        std::fprintf(stderr, "unikv-sim: %s\n", e.what());
        return exit_bad_input;
    } catch (const std::bad_alloc& e) {  // this machine's memory, not a bug (unikv::out_of_memory included)
        std::fprintf(stderr, "unikv-sim: the replay ran out of this machine's memory (%s); give less --device-memory "
                             "or --host-memory\n", e.what());
        return exit_bad_input;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "unikv-sim: the replay failed: %s\n", e.what());
        return exit_replay_failed;
    }

    std::vector<ReportedRun> compared;
    if (o.compare_static) {
        compared = {runs[0].report, runs[engine_default].report, runs[best].report};
        compared[1].label = ratio_label(runs[engine_default].report.swa_full_ratio, " (SGLang default)");
        compared[2].label = ratio_label(runs[best].report.swa_full_ratio, " (best of the sweep)");
    }
    std::vector<ReportedRun> sweep;
    for (std::size_t i = 1; i < runs.size(); ++i) sweep.push_back(runs[i].report);

    if (o.json) {
        std::string out =
            "{" + summary_json_members(o, summary, block_tokens) + ", \"replay\": " + run_json(runs[0].report);
        if (o.compare_static) {
            out += ", \"compare_static\": {\"engine\": \"SGLang\", \"default\": " + run_json(compared[1]) +
                   ", \"best\": " + run_json(compared[2]) + ", \"sweep\": [";
            for (std::size_t i = 0; i < sweep.size(); ++i) out += (i ? ", " : "") + run_json(sweep[i]);
            out += message(
                "], \"hit_rate_gap_default\": ", runs[0].report.figures.hit_rate() - compared[1].figures.hit_rate(),
                ", \"hit_rate_gap_best\": ", runs[0].report.figures.hit_rate() - compared[2].figures.hit_rate(), "}");
        }
        if (o.compare_tiers) {
            out += ", \"compare_tiers\": [";
            for (std::size_t i = 0; i < tiers.size(); ++i) out += (i ? ", " : "") + run_json(tiers[i].report);
            out += "]";
        }
        std::printf("%s}\n", out.c_str());
    } else {
        std::printf("\n");
        print_replay_table(stdout, runs[0].report, summary);
        if (runs[0].report.instances.size() > 1) {
            std::printf("\n");
            print_instances_table(stdout, runs[0].report);
        }
        if (o.compare_static) {
            std::printf("\n");
            print_comparison_table(stdout, compared, sweep);
        }
        if (o.compare_tiers) {
            std::vector<ReportedRun> ladder;  // the unified runs from fewest tiers up, then the static split
            for (const Run& t : tiers)
                if (t.budget == BudgetChoice::unified) ladder.push_back(t.report);
            ladder.push_back(runs[0].report);
            ladder.back().label = o.storage.empty() ? "unified, device + host" : "unified, every tier";
            for (const Run& t : tiers)
                if (t.budget != BudgetChoice::unified) ladder.push_back(t.report);
            std::printf("\n");
            print_tiers_table(stdout, ladder);
        }
    }
    std::fflush(stdout);

    try {
        if (!o.csv_path.empty()) write_steps_csv_file(o.csv_path, runs[0].steps, "--csv");
        if (!o.plot_path.empty()) {
            std::vector<PlotRun> plotted{{"unified", runs[0].steps}};
            if (o.compare_static) {
                plotted.push_back({compared[1].label, runs[engine_default].steps});
                if (best != engine_default) plotted.push_back({compared[2].label, runs[best].steps});
            }
            for (const Run& t : tiers) plotted.push_back({t.report.label, t.steps});
            ReplayResult steps_only;  // each instance's steps, for their occupancy
            steps_only.steps = runs[0].steps;
            steps_only.instances = o.cluster.instances;
            const std::vector<ReplayResult> by_instance = split_by_instance(steps_only);
            std::vector<PlotRun> instances;
            if (by_instance.size() > 1)
                for (std::size_t i = 0; i < by_instance.size(); ++i)
                    instances.push_back({message("instance ", i), by_instance[i].steps});
            const std::string cluster =
                o.cluster.instances > 1
                    ? message(", ", o.cluster.instances, " instances, router ", router_name(o.cluster.router))
                    : std::string();
            plot_replay(o.plot_path,
                        message("unikv-sim: ", o.model, ", ", describe_input(o), ", device ",
                                format_bytes(o.device_memory_bytes), ", host ", format_bytes(o.host_memory_bytes),
                                cluster),
                        plotted, instances);
        }
    } catch (const InputError& e) {
        std::fprintf(stderr, "unikv-sim: %s\n", e.what());
        return exit_output_failed;
    }
    return 0;
}

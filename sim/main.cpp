// unikv-sim: reads a Mooncake trace or generates a workload, checks it and prints its summary. The replay through
// the composed cache plugs in where `main` says so; see docs/simulator.md.
#include <cstdio>
#include <variant>

#include <unikv_sim/command_line.hpp>
#include <unikv_sim/generators.hpp>
#include <unikv_sim/mooncake_reader.hpp>
#include <unikv_sim/report.hpp>
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

}  // namespace

int main(int argc, char** argv) {
    const CommandLine command_line = parse_command_line(argc, argv);
    if (!command_line.options) return command_line.exit_code;
    const SimOptions& o = *command_line.options;
    try {
        const Trace trace = load_trace(o);
        const TraceSummary summary = summarize(trace);
        if (o.json) {
            print_summary_json(stdout, o, summary, trace.block_tokens());
        } else {
            print_summary_table(stdout, o, summary, trace.block_tokens());
        }
        // The replay plugs in here: it builds the cache for preset `o.model` (`with_preset`) over
        // `o.device_memory_bytes` and `o.host_memory_bytes`, whose arena refuses a memory that cannot hold one
        // request of `summary.longest_request` tokens (make_arena_spec names the floor), then runs the engine
        // loop over `trace` and adds its figures, --csv and --plot to the report.
    } catch (const InputError& e) {
        std::fprintf(stderr, "unikv-sim: %s\n", e.what());
        return exit_bad_input;
    }
    bool replay_only = false;
    const auto refuse = [&](bool asked, const char* what) {
        if (!asked) return;
        std::fprintf(stderr, "unikv-sim: %s comes with the replay through the composed cache; not done\n", what);
        replay_only = true;
    };
    refuse(o.compare_static, "--compare-static");
    refuse(!o.csv_path.empty(), "--csv");
    refuse(!o.plot_path.empty(), "--plot");
    return replay_only ? exit_replay_only : 0;
}

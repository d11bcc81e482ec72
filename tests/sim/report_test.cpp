// The simulator's outputs: the cost model against hand arithmetic, the figures of hand-made replay records,
// the JSON (parsed back), the per-step CSV, the static split's sizing, the progress line and the gnuplot plot.
#include <doctest/doctest.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <simdjson.h>

#include <unikv/presets.hpp>

#include <unikv_sim/cost_model.hpp>
#include <unikv_sim/metrics.hpp>
#include <unikv_sim/plot.hpp>
#include <unikv_sim/progress.hpp>
#include <unikv_sim/report.hpp>
#include <unikv_sim/static_split.hpp>

namespace report_test {

using namespace unikv::sim;

// What `fill` writes into a temporary file, read back.
template <class F>
std::string written(F&& fill) {
    std::FILE* f = std::tmpfile();
    REQUIRE(f != nullptr);
    fill(f);
    std::rewind(f);
    std::string out;
    char buf[4096];
    for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) out.append(buf, n);
    std::fclose(f);
    return out;
}

StepRecord step(std::int64_t i, double start, double duration, std::int32_t running, std::int64_t admitted,
                std::int64_t device_hit, std::int64_t host_hit) {
    StepRecord s;
    s.step = i;
    s.start_ms = start;
    s.duration_ms = duration;
    s.running = running;
    s.admitted_prompt_tokens = admitted;
    s.device_hit_tokens = device_hit;
    s.host_hit_tokens = host_hit;
    return s;
}

// Four requests and three steps with round numbers.
ReplayResult hand_made_replay() {
    ReplayResult r;
    r.steps = {step(0, 0, 100, 2, 1000, 0, 0), step(1, 100, 50, 3, 600, 300, 100), step(2, 400, 100, 1, 0, 0, 0)};
    r.steps[0].refused = 1;
    r.steps[0].chunked = 1;
    r.steps[1].preempted = 2;
    r.steps[1].storage_hit_tokens = 40;  // request 3's
    r.steps[1].bytes_compacted = 4096;
    r.steps[1].work.bytes_loaded = 1 << 20;
    r.steps[2].work.bytes_written = 3 << 20;
    r.steps[0].cache_ns = 1000;
    r.steps[1].cache_ns = 5000;
    r.steps[2].cache_ns = 3000;
    for (auto& s : r.steps) s.device_occupancy = {0.5, 0.25, -1}, s.host_occupancy = {0.125, 0.0625, -1};
    // index, arrival, first token, finish, prompt, output, device hit, host hit, storage hit, limit
    r.requests = {{0, 0, 100, 400, 500, 4, 0, 0, 0, 0},
                  {1, 0, 100, 150, 500, 1, 0, 0, 0, 0},
                  {2, 90, 150, 500, 400, 11, 300, 100, 0, 1},
                  {3, 95, 150, 160, 200, 2, 0, 0, 40, 0}};
    r.dropped = {7};
    r.unfinished = 2;
    r.wall_seconds = 0.5;
    return r;
}

}  // namespace report_test

using namespace report_test;

TEST_CASE("the cost model prices decode by HBM bytes, prefill by FLOPs and loads by the host link") {
    using unikv::presets::Gemma3_27B;
    const CostModel gemma = CostModel::of<Gemma3_27B>();
    // Gemma-3-27B: FULL 10 layers x 16 heads x (128 + 128) x 2 bytes = 81,920 B/token; SWA 52 layers: 425,984.
    CHECK(gemma.full_bytes_per_token() == 81920);
    CHECK(gemma.swa_bytes_per_token() == 425984);
    // Decode of 10 requests over 100,000 context tokens: all 54.032e9 weight bytes, 100,000 FULL rows and at
    // most 10 windows of 1,024 SWA rows, at 4.8e12 B/s = 13.872 ms (compute: 10 * 2 * 27.016e9 / 989e12 =
    // 0.55 ms, below it).
    const StepWork decode{.decode_tokens = 10, .context_tokens = 100000};
    CHECK(gemma(decode) == doctest::Approx((54.032e9 + 100000.0 * 81920 + 10240.0 * 425984) / 4.8e12 * 1e3));
    CHECK(gemma(decode) == doctest::Approx(13.8721).epsilon(1e-5));
    CHECK(gemma.compute_seconds(decode) * 1e3 == doctest::Approx(0.54633).epsilon(1e-4));
    // A context shorter than the windows reads each SWA row once.
    CHECK(gemma.memory_seconds({.decode_tokens = 10, .context_tokens = 5000}) ==
          doctest::Approx((54.032e9 + 5000.0 * (81920 + 425984)) / 4.8e12));
    // Prefill of 8,192 tokens: 8192 * 2 * 27.016e9 / 989e12 = 447.55 ms, compute-bound.
    const StepWork prefill{.prefill_tokens = 8192, .context_tokens = 8192};
    CHECK(gemma(prefill) == doctest::Approx(447.5532).epsilon(1e-5));
    // 55 GB loaded at 55 GB/s dominates a small step; a write of the same size on the other direction does not
    // add to it (full duplex).
    CHECK(gemma({.decode_tokens = 1, .context_tokens = 10, .bytes_loaded = 55'000'000'000}) == doctest::Approx(1000));
    CHECK(gemma({.decode_tokens = 1, .context_tokens = 10, .bytes_loaded = 55'000'000'000,
                 .bytes_written = 55'000'000'000}) == doctest::Approx(1000));
    const CostModel slow_link = CostModel::of<Gemma3_27B>({.host_link_bytes_per_s = 11e9});
    CHECK(slow_link({.decode_tokens = 1, .bytes_written = 55'000'000'000}) == doctest::Approx(5000));
    CHECK(gemma(StepWork{}) == 0);

    // MoE: one decode token of gpt-oss-120b touches its 5.13e9 active parameters at the checkpoint's bytes per
    // parameter (60.8 GiB / 116.83e9), not all the weights.
    const CostModel oss = CostModel::of<unikv::presets::GptOss120B>();
    const double oss_row = 18.0 * 8 * 128 * 2;  // FULL and SWA alike: 18 layers x 8 heads x (64 + 64) x 2
    CHECK(oss({.decode_tokens = 1, .context_tokens = 4096}) ==
          doctest::Approx((5.13e9 * 60.8 * (1u << 30) / 116.83e9 + 4096 * oss_row + 128 * oss_row) / 4.8e12 * 1e3));
    // Mamba: every decoding request reads and writes its state once. Jamba-v0.1: 28 layers x (conv 3 x 8192 x 2
    // + temporal 8192 x 16 x 4) = 16,056,320 B; 4 tokens touch min(52e9, 4 x 12e9) parameters.
    const CostModel jamba = CostModel::of<unikv::presets::JambaV01>();
    CHECK(jamba({.decode_tokens = 4, .context_tokens = 8000}) ==
          doctest::Approx((48e9 * 2 + 8000.0 * 4 * 8 * 256 * 2 + 4 * 2 * 16056320.0) / 4.8e12 * 1e3));

    // The storage link: a fetch waits for the store's latency and read side; puts run beside the forward.
    const CostModel stored = CostModel::of<Gemma3_27B>(unikv::sim::storage_link_for({}, unikv::sim::StorageKind::file));
    CHECK(stored({.decode_tokens = 1, .bytes_fetched = 7'000'000'000}) == doctest::Approx(1000.1));
    CHECK(stored({.decode_tokens = 1, .bytes_stored = 400'000'000'000}) == gemma({.decode_tokens = 1}));
    // The offered prefill load: 1,000 s of arrivals carrying 18.3M prompt tokens (1,000 s of one H200's compute
    // at 2 x 27.016e9 FLOPs per token) load 4 instances to a quarter; no span, no load.
    const double tokens_per_s = 989e12 / (2 * 27.016e9);
    const auto prompt = static_cast<std::int64_t>(1000 * tokens_per_s);
    CHECK(unikv::sim::offered_prefill_load(gemma, prompt, 1000, 4) == doctest::Approx(0.25).epsilon(1e-6));
    CHECK(unikv::sim::offered_prefill_load(gemma, prompt, 0, 4) == 0);
}

TEST_CASE("nearest-rank percentiles") {
    std::vector<double> hundred;
    for (int i = 100; i >= 1; --i) hundred.push_back(i);
    const Percentiles p = percentiles(hundred);
    CHECK(p.p50 == 50);
    CHECK(p.p90 == 90);
    CHECK(p.p99 == 99);
    std::vector<double> ten{10, 9, 8, 7, 6, 5, 4, 3, 2, 1};
    const Percentiles q = percentiles(ten);
    CHECK(q.p50 == 5);
    CHECK(q.p90 == 9);
    CHECK(q.p99 == 10);  // ceil(9.9) = 10th of 10
    std::vector<double> none;
    CHECK(percentiles(none).p99 == 0);
}

TEST_CASE("the figures of hand-made records") {
    const ReplayFigures f = compute_figures(hand_made_replay());
    CHECK(f.finished == 4);
    CHECK(f.dropped == 1);
    CHECK(f.steps == 3);
    CHECK(f.prompt_tokens == 1600);
    CHECK(f.output_tokens == 18);
    CHECK(f.device_hit_rate == doctest::Approx(300.0 / 1600));
    CHECK(f.host_hit_rate == doctest::Approx(100.0 / 1600));
    CHECK(f.storage_hit_rate == doctest::Approx(40.0 / 1600));
    CHECK(f.hit_rate() == doctest::Approx(440.0 / 1600));
    CHECK(f.admitted_tokens_per_step == doctest::Approx(1600.0 / 3));
    CHECK(f.admitted_tokens_max == 1000);
    CHECK(f.refusals == 1);
    CHECK(f.chunked == 1);
    CHECK(f.unfinished == 2);
    CHECK(f.preemptions == 2);
    CHECK(f.bytes_compacted == 4096);
    CHECK(f.bytes_loaded == 1u << 20);
    CHECK(f.bytes_written == 3u << 20);
    CHECK(f.cache_us_mean == doctest::Approx(3));
    CHECK(f.cache_us_p99 == 5);
    CHECK(f.simulated_seconds == doctest::Approx(0.5));  // the last step ends at 500 ms
    CHECK(f.output_tokens_per_s == doctest::Approx(36));
    CHECK(f.total_tokens_per_s == doctest::Approx(3236));
    // TTFT: 100, 100, 60, 55 -> p50 is the 2nd smallest (60), p90 and p99 the 4th (100).
    CHECK(f.ttft_ms.p50 == 60);
    CHECK(f.ttft_ms.p90 == 100);
    // Inter-token gaps: (400-100)/3 = 100, (500-150)/10 = 35, (160-150)/1 = 10; the one-token request has none.
    CHECK(f.itl_ms.p50 == doctest::Approx(35));
    CHECK(f.itl_ms.p99 == doctest::Approx(100));
    CHECK(f.mean_running == doctest::Approx(2));
    CHECK(f.max_running == 3);
    CHECK(f.requests_per_wall_s == doctest::Approx(8));
    CHECK(f.tokens_per_wall_s == doctest::Approx(3236));
    const ReplayFigures empty = compute_figures(ReplayResult{});
    CHECK(empty.hit_rate() == 0);
    CHECK(empty.output_tokens_per_s == 0);
}

TEST_CASE("a cluster's records split by instance: figures over the cluster's span, load balance, JSON") {
    ReplayResult r = hand_made_replay();  // steps 0 and 2 on instance 0, step 1 on instance 1; requests 2, 3 on 1
    r.instances = 2;
    r.steps[1].instance = 1;
    r.requests[2].instance = r.requests[3].instance = 1;
    r.dropped_on = {1};
    r.steps[1].work.bytes_stored = 1'000'000'000;  // instance 1's puts
    const auto split = split_by_instance(r);
    REQUIRE(split.size() == 2);
    CHECK(split[0].steps.size() == 2);
    CHECK(split[1].requests.size() == 2);
    CHECK(split[1].dropped == std::vector<std::int32_t>{7});
    const std::vector<InstanceFigures> each = instance_figures(r);
    REQUIRE(each.size() == 2);
    // The span is the cluster's (500 ms); instance 1 ran one 50 ms step and finished 600 prompt tokens.
    CHECK(each[1].figures.simulated_seconds == doctest::Approx(0.5));
    CHECK(each[1].busy_share == doctest::Approx(0.1));
    CHECK(each[0].busy_share == doctest::Approx(0.4));
    CHECK(each[1].routed_prompt_tokens == 600);
    CHECK(each[1].figures.dropped == 1);
    CHECK(each[1].figures.total_tokens_per_s == doctest::Approx((600.0 + 13) / 0.5));
    CHECK(each[1].figures.wall_seconds == 0);
    const LoadBalance b = load_balance(each);
    CHECK(b.prompt_tokens == doctest::Approx(1000.0 * 2 / 1600));
    CHECK(b.busy == doctest::Approx(0.4 * 2 / 0.5));
    const ReportedRun run{.label = "unified", .budget = "SharedSWABudget", .swa_full_ratio = 0,
                          .figures = compute_figures(r), .instances = each, .store_write_bytes_per_s = 4e9};
    // 1 GB at 4 GB/s over the 0.5 s span: the store's write side is busy half the time for instance 1.
    CHECK(store_write_busy(run) == doctest::Approx(0.5));
    simdjson::dom::parser parser;
    simdjson::dom::element doc;
    REQUIRE(parser.parse(run_json(run)).get(doc) == simdjson::SUCCESS);
    CHECK(std::int64_t(doc["instances"].at(1)["routed_prompt_tokens"]) == 600);
    CHECK(std::int64_t(doc["instances"].at(1)["figures"]["storage_hit_tokens"]) == 40);
    CHECK(double(doc["load_balance"]["busy"]) == doctest::Approx(1.6));
    CHECK(double(doc["store_write_busy"]) == doctest::Approx(0.5));
}

TEST_CASE("the JSON of a run parses back to its figures") {
    const ReportedRun run{.label = "static 0.2 \"best\"", .budget = "PartitionedSWABudget", .swa_full_ratio = 0.2,
                          .figures = compute_figures(hand_made_replay()), .instances = {}};
    const std::string text = run_json(run);
    simdjson::dom::parser parser;
    simdjson::dom::element doc;
    REQUIRE(parser.parse(text).get(doc) == simdjson::SUCCESS);
    CHECK(std::string_view(doc["label"]) == "static 0.2 \"best\"");
    CHECK(double(doc["swa_full_ratio"]) == 0.2);
    CHECK(std::int64_t(doc["figures"]["finished"]) == 4);
    CHECK(std::int64_t(doc["figures"]["unfinished"]) == 2);
    CHECK(std::int64_t(doc["figures"]["chunked"]) == 1);
    CHECK(double(doc["figures"]["hit_rate"]) == doctest::Approx(440.0 / 1600));
    CHECK(std::int64_t(doc["figures"]["storage_hit_tokens"]) == 40);
    CHECK(double(doc["figures"]["ttft_ms"]["p50"]) == 60);
    CHECK(std::uint64_t(doc["figures"]["bytes_written"]) == 3u << 20);
}

TEST_CASE("the per-step CSV has a column per present pool and cumulative hit rates") {
    const ReplayResult r = hand_made_replay();
    const std::string csv = written([&](std::FILE* f) { CHECK(write_steps_csv(f, r.steps)); });
    CHECK(csv ==
          "step,instance,time_s,running,waiting,device_full,device_swa,host_full,host_swa,device_total,"
          "device_hit_rate,host_hit_rate,storage_hit_rate,hit_rate,admitted_tokens,preempted,bytes_loaded,"
          "bytes_written,bytes_fetched,bytes_stored,cache_us\n"
          "0,0,0.100000,2,0,0.500000,0.250000,0.125000,0.062500,0.750000,0.000000,0.000000,0.000000,0.000000,1000,0,"
          "0,0,0,0,1.000\n"
          "1,0,0.150000,3,0,0.500000,0.250000,0.125000,0.062500,0.750000,0.187500,0.062500,0.025000,0.275000,600,2,"
          "1048576,0,0,0,5.000\n"
          "2,0,0.500000,1,0,0.500000,0.250000,0.125000,0.062500,0.750000,0.187500,0.062500,0.025000,0.275000,0,0,0,"
          "3145728,0,0,3.000\n");
    // A stride keeps every stride-th step and the last, with the hit rates still cumulative over all steps.
    const std::string thin = written([&](std::FILE* f) { CHECK(write_steps_csv(f, r.steps, 2)); });
    CHECK(thin.find("\n1,") == std::string::npos);
    CHECK(thin.find("\n2,0,0.500000,1,0,0.500000,0.250000,0.125000,0.062500,0.750000,0.187500,") != std::string::npos);
}

TEST_CASE("the static split solves SGLang's sizing over the arena's entries") {
    using unikv::presets::Gemma3_27B;
    const unikv::ArenaConfig arena = unikv::arena_config<Gemma3_27B>({.arena_bytes = 1ull << 30, .page_size = {16}});
    const auto mask = unikv::ComponentMask::of(unikv::Component::full).with(unikv::Component::swa);
    const unikv::ArenaSpec spec = unikv::make_arena_spec(arena, mask);
    const std::size_t f = spec[unikv::Component::full].entry_bytes, s = spec[unikv::Component::swa].entry_bytes;
    CHECK(f == 81920);
    CHECK(s == 425984);
    const double usable = double(spec.arena_bytes - spec.sink_floor_bytes);
    for (const double ratio : static_ratio_sweep) {
        CAPTURE(ratio);
        const unikv::BudgetConfig b = static_split(arena, mask, ratio);
        const double full_tokens = usable / (double(f) + ratio * double(s));
        CHECK(b.full_partition_pages == std::int64_t(full_tokens) / 16);
        CHECK(b.swa_partition_pages == std::int64_t(ratio * full_tokens) / 16);
        // The partitions fill the arena to within a page of each pool.
        const double used = double(b.full_partition_pages * 16) * f + double(b.swa_partition_pages * 16) * s;
        CHECK(used <= usable);
        CHECK(used > usable - 16.0 * double(f + s));
    }
    // 0.8 over 1 GiB less the sink (one SWA page, 16 x 425,984 B): 1,066,926,080 B / (81,920 + 0.8 x 425,984)
    // B per FULL token = 2,524.0 FULL tokens -> 157 pages, and 0.8 x 2,524.0 = 2,019.2 SWA tokens -> 126 pages.
    CHECK(spec.sink_floor_bytes == 16 * 425984);
    CHECK(static_split(arena, mask, 0.8).full_partition_pages == 157);
    CHECK(static_split(arena, mask, 0.8).swa_partition_pages == 126);
    CHECK(static_split(arena, mask, 0.8, 96).mamba_partition_pages == 0);  // no Mamba pool: no states
}

TEST_CASE("the tri-pool's static split takes SGLang's state pool off the top and bounds Mamba to it") {
    using unikv::presets::SyntheticTriHybrid;
    const unikv::ArenaConfig arena =
        unikv::arena_config<SyntheticTriHybrid>({.arena_bytes = 16ull << 30, .page_size = {16}});  // 96 states: 1.3 GB
    const auto mask = unikv::layout_components_v<SyntheticTriHybrid::layout>;
    const unikv::ArenaSpec spec = unikv::make_arena_spec(arena, mask);
    const unikv::BudgetConfig b = static_split(arena, mask, 0.8, 96);
    CHECK(b.mamba_partition_pages == 96);
    const auto bytes = [&](unikv::Component c, std::int64_t n) { return double(n) * double(spec[c].page_bytes); };
    const double states = bytes(unikv::Component::mamba, 96);
    const double kv =
        bytes(unikv::Component::full, b.full_partition_pages) + bytes(unikv::Component::swa, b.swa_partition_pages);
    const double usable = double(spec.arena_bytes - spec.sink_floor_bytes);
    CHECK(states + kv <= usable);
    const double two_pages =
        2.0 * double(spec[unikv::Component::full].page_bytes + spec[unikv::Component::swa].page_bytes);
    CHECK(states + kv > usable - two_pages);
    CHECK(static_split(arena, mask, 0.8).full_partition_pages > b.full_partition_pages);  // the states' bytes came off
}

TEST_CASE("the best split drops the fewest requests, then hits the most") {
    const auto figures = [](std::size_t dropped, double device, double host) {
        ReplayFigures f;
        f.dropped = dropped;
        f.device_hit_rate = device;
        f.host_hit_rate = host;
        return f;
    };
    // A sweep like the README's at 80 GiB: the highest hit rate (index 2) drops more than index 4.
    const std::vector<ReplayFigures> sweep{figures(3, 0.010, 0.010), figures(2, 0.010, 0.012),
                                           figures(5, 0.010, 0.015), figures(2, 0.005, 0.010),
                                           figures(1, 0.005, 0.010)};
    CHECK(best_split(sweep) == 4);
    // Equal drops: the higher hit rate, the first of equals.
    CHECK(best_split(std::vector<ReplayFigures>{figures(0, 0.01, 0.0), figures(0, 0.02, 0.005),
                                                figures(0, 0.015, 0.01)}) == 1);
    CHECK(best_split(std::vector<ReplayFigures>{figures(0, 0.01, 0.0), figures(0, 0.01, 0.0)}) == 0);
    CHECK_THROWS_AS((void)best_split(std::vector<ReplayFigures>{}), unikv::logic_error);
}

TEST_CASE("the progress line is silent for 3 s, then reports rate and ETA") {
    using namespace std::chrono_literals;
    const auto t0 = ProgressLine::clock::time_point{} + 1h;
    const std::string log = written([&](std::FILE* f) {
        ProgressLine p(f, "unified", 1000, false, t0);
        p.update(100, 50, 1000, t0 + 2s);   // quiet period
        p.update(400, 200, 9000, t0 + 4s);  // 100 req/s, 600 left
        p.update(450, 220, 9500, t0 + 6s);  // under 5 s since the last line
        p.update(900, 400, 20000, t0 + 9s);
    });
    CHECK(log == "unikv-sim: unified: 400/1000 requests, 200 steps, 9.0 s simulated, 100 req/s, ETA 6 s\n"
                 "unikv-sim: unified: 900/1000 requests, 400 steps, 20.0 s simulated, 100 req/s, ETA 1 s\n");
    const std::string tty = written([&](std::FILE* f) {
        ProgressLine p(f, "u", 10, true, t0);
        p.update(5, 1, 0, t0 + 5s);
    });
    CHECK(tty.size() == 102);  // padded to 100, `\r`, and the newline that ends it
    CHECK(tty.substr(100) == "\r\n");
}

TEST_CASE("the plot draws a PNG with gnuplot, or says which package is missing") {
    const ReplayResult r = hand_made_replay();
    const PlotRun runs[] = {{"unified", r.steps}, {"static 0.8", r.steps}};
    const std::string script = gnuplot_script("/o/x.png", "t", runs, {}, pools_present(r.steps));
    CHECK(script.find("'run0.csv' using 'time_s':'device_swa'") != std::string::npos);
    CHECK(script.find("'run0.csv' using 'time_s':'host_full'") != std::string::npos);
    CHECK(script.find("mamba") == std::string::npos);
    CHECK(script.find("'run1.csv' using 'time_s':'hit_rate' with lines lw 1.5 title 'static 0.8'") !=
          std::string::npos);
    CHECK(script.find("(column('device_hit_rate')+column('host_hit_rate')) with lines lw 1 dt 3 title 'unified: "
                      "device + host'") != std::string::npos);
    CHECK(script.find("inst0.csv") == std::string::npos);
    // A cluster's first panel: each instance's device occupancy.
    const PlotRun instances[] = {{"instance 0", r.steps}, {"instance 1", r.steps}};
    const std::string cluster = gnuplot_script("/o/x.png", "t", runs, instances, pools_present(r.steps));
    CHECK(cluster.find("'inst1.csv' using 'time_s':'device_total' with lines lw 1 title 'instance 1: device'") !=
          std::string::npos);
    CHECK(cluster.find("'run0.csv' using 'time_s':'device_swa'") == std::string::npos);
    if (!gnuplot_available()) {
        MESSAGE("gnuplot is not installed: only the script was checked");
        return;
    }
    const auto png = std::filesystem::temp_directory_path() / "unikv_report_test_plot.png";
    std::filesystem::remove(png);
    plot_replay(png.string(), "hand-made", runs, instances);
    std::ifstream in(png, std::ios::binary);
    char magic[8] = {};
    in.read(magic, 8);
    CHECK(std::string(magic + 1, 3) == "PNG");
    std::filesystem::remove(png);
}

#pragma once
/// \file
/// `--plot FILE.png`: occupancy per pool and hit rate over simulated time, drawn by gnuplot (Debian
/// `gnuplot-nox`). The simulator writes each run's per-step CSV (`write_steps_csv`) and a gnuplot script into a
/// fresh temporary directory, runs `gnuplot` on it, and removes the directory once the PNG is drawn (it stays,
/// named in the error, when gnuplot fails). The top panel shows the first run's device occupancy per pool
/// (solid) and host occupancy (dashed), or for a cluster each instance's device occupancy (the whole arena); the
/// bottom panel the cumulative hit rate of every run, and for the first run what its device, device and host,
/// and every tier (storage included) served.

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include <unikv_sim/input_error.hpp>
#include <unikv_sim/replay_records.hpp>
#include <unikv_sim/report.hpp>

namespace unikv::sim {

/// One run of the plot: a legend label and its steps.
struct PlotRun {
    std::string label;
    std::span<const StepRecord> steps;
};

/// `s` quoted for a POSIX shell.
[[nodiscard]] inline std::string shell_quote(std::string_view s) {
    std::string out = "'";
    for (const char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return out + "'";
}

/// `s` as a gnuplot single-quoted string (a quote is doubled).
[[nodiscard]] inline std::string gnuplot_quote(std::string_view s) {
    std::string out = "'";
    for (const char c : s) out += c == '\'' ? std::string("''") : std::string(1, c);
    return out + "'";
}

/// True when a `gnuplot` program is on the PATH.
[[nodiscard]] inline bool gnuplot_available() { return std::system("command -v gnuplot >/dev/null 2>&1") == 0; }

/// The message for a missing gnuplot, naming the package.
inline constexpr std::string_view gnuplot_missing =
    "--plot draws with gnuplot, which is not installed; install the Debian package gnuplot-nox "
    "(apt-get install gnuplot-nox, or scripts/install-deps.sh)";

/// The gnuplot script that draws `runs` (data files `run0.csv`, `run1.csv`, ... beside it) and the first run's
/// `instances` (`inst0.csv`, ...; none for one instance) into `png`, titled `title`. `present` names the pools of
/// the first run.
[[nodiscard]] inline std::string gnuplot_script(const std::string& png, std::string_view title,
                                                std::span<const PlotRun> runs, std::span<const PlotRun> instances,
                                                const std::array<bool, pool_count>& present) {
    constexpr const char* pools[pool_count] = {"full", "swa", "mamba"};
    constexpr const char* names[pool_count] = {"FULL", "SWA", "Mamba"};
    constexpr const char* colors[pool_count] = {"#1f77b4", "#ff7f0e", "#2ca02c"};
    double end_s = 0;  // one time axis for both panels: the longest run's
    for (const PlotRun& r : runs)
        for (const StepRecord& s : r.steps) end_s = std::max(end_s, (s.start_ms + s.duration_ms) / 1e3);
    // noenhanced: a file name's underscores are text, not subscripts.
    std::string gp = message(
        "set terminal pngcairo noenhanced size 1100,820 font ',10'\nset output ", gnuplot_quote(png),
        "\nset datafile separator ','\nset grid\nset key outside right top\n"
        // Fixed margins, so both panels share one time axis whatever their legends' widths.
        "set lmargin at screen 0.07\nset rmargin at screen 0.66\n"
        "set multiplot layout 2,1 title ",
        gnuplot_quote(title), "\nset xlabel 'simulated time (s)'\nset xrange [0:", end_s > 0 ? end_s : 1, "]\n");
    const char* occupancy =
        instances.size() > 1 ? "device occupancy (share of the arena)" : "occupancy (share of the pool)";
    gp += message("set ylabel '", occupancy, "'\nset yrange [0:1.05]\nplot ");
    if (instances.size() > 1) {
        for (std::size_t i = 0; i < instances.size(); ++i)
            gp += message(i ? ", " : "", "'inst", i, ".csv' using 'time_s':'device_total' with lines lw 1 title ",
                          gnuplot_quote(instances[i].label + ": device"));
    } else {
        bool first = true;
        for (const char* tier : {"device", "host"})
            for (std::size_t c = 0; c < pool_count; ++c) {
                if (!present[c]) continue;
                gp += message(first ? "" : ", ", "'run0.csv' using 'time_s':'", tier, "_", pools[c],
                              "' with lines lw 1.5 lc rgb '", colors[c], "' dt ", tier[0] == 'd' ? 1 : 2, " title '",
                              tier, " ", names[c], "'");
                first = false;
            }
    }
    gp += "\nset ylabel 'cumulative token hit rate'\nset yrange [0:*]\nplot ";
    for (std::size_t i = 0; i < runs.size(); ++i) {
        gp += message(i ? ", " : "", "'run", i, ".csv' using 'time_s':'hit_rate' with lines lw 1.5 title ",
                      gnuplot_quote(i == 0 ? runs[i].label + ": every tier" : runs[i].label));
        if (i == 0)
            gp += message(", 'run0.csv' using 'time_s':(column('device_hit_rate')+column('host_hit_rate')) with "
                          "lines lw 1 dt 3 title ", gnuplot_quote(runs[i].label + ": device + host"),
                          ", 'run0.csv' using 'time_s':'device_hit_rate' with lines lw 1 dt 2 title ",
                          gnuplot_quote(runs[i].label + ": device"));
    }
    return gp + "\nunset multiplot\n";
}

/// Draws `runs` and the first run's `instances` into the PNG `png_path` (see the file comment). Throws
/// `InputError` naming `--plot` when gnuplot is missing, a file cannot be written, or gnuplot fails (with its
/// message). Precondition: `runs` is not empty.
inline void plot_replay(const std::string& png_path, std::string_view title, std::span<const PlotRun> runs,
                        std::span<const PlotRun> instances = {}) {
    if (!gnuplot_available()) throw InputError(std::string(gnuplot_missing));
    namespace fs = std::filesystem;
    std::error_code ec;
    const fs::path png = fs::absolute(png_path, ec);
    std::string dir_template = (fs::temp_directory_path(ec) / "unikv-sim-plot.XXXXXX").string();
    if (ec || ::mkdtemp(dir_template.data()) == nullptr)
        throw InputError("--plot: cannot create a temporary directory for gnuplot's data");
    const fs::path dir = dir_template;
    constexpr std::size_t max_points = 4000;  // per run: enough for a 1100-pixel plot, fast to draw
    for (std::size_t i = 0; i < runs.size(); ++i)
        write_steps_csv_file((dir / message("run", i, ".csv")).string(), runs[i].steps, "--plot",
                             runs[i].steps.size() / max_points + 1);
    for (std::size_t i = 0; i < instances.size(); ++i)
        write_steps_csv_file((dir / message("inst", i, ".csv")).string(), instances[i].steps, "--plot",
                             instances[i].steps.size() / max_points + 1);
    const std::string script = gnuplot_script(png.string(), title, runs, instances, pools_present(runs[0].steps));
    const fs::path script_path = dir / "plot.gp";
    if (std::FILE* f = std::fopen(script_path.c_str(), "w"); f == nullptr ||
                                                             std::fputs(script.c_str(), f) < 0 ||
                                                             std::fclose(f) != 0)
        throw InputError(message("--plot: cannot write '", script_path.string(), "'"));
    const fs::path errors = dir / "gnuplot.err";
    const std::string command = message("cd ", shell_quote(dir.string()), " && gnuplot plot.gp 2>",
                                        shell_quote(errors.string()));
    if (std::system(command.c_str()) != 0) {
        std::string why;
        if (std::FILE* f = std::fopen(errors.c_str(), "r")) {
            char buf[512];
            const std::size_t n = std::fread(buf, 1, sizeof buf - 1, f);
            why.assign(buf, n);
            std::fclose(f);
        }
        throw InputError(message("--plot: gnuplot failed drawing '", png.string(), "' (script and data kept in ",
                                 dir.string(), "): ", why));
    }
    fs::remove_all(dir, ec);
}

}  // namespace unikv::sim

#pragma once
/// \file
/// The progress line of a long replay, on stderr: requests finished of the total, replay rate (requests per
/// wall second), simulated time and ETA. Silent for the first 3 s, so short replays print nothing. On a
/// terminal it rewrites one line (`\r`, at most 5 times a second); otherwise (a log, a pipe) it prints a line
/// every 5 s. `main` shows none under `--json`, whose readers want stdout and stderr quiet.

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>

#include <unistd.h>

namespace unikv::sim {

/// One replay's progress reporter (see the file comment). Not thread-safe: the replay's thread calls it.
class ProgressLine {
public:
    using clock = std::chrono::steady_clock;

    /// A reporter for a replay called `label` of `total` requests, writing to `out` (a terminal or not, as
    /// `isatty` says of it).
    ProgressLine(std::FILE* out, std::string label, std::int64_t total)
        : ProgressLine(out, std::move(label), total, ::isatty(::fileno(out)) == 1, clock::now()) {}

    /// The same with the terminal test and the start time given (for tests).
    ProgressLine(std::FILE* out, std::string label, std::int64_t total, bool terminal, clock::time_point start)
        : out_(out), label_(std::move(label)), total_(total), terminal_(terminal), start_(start), last_(start) {}

    ProgressLine(const ProgressLine&) = delete;
    ProgressLine& operator=(const ProgressLine&) = delete;
    /// Ends the line on a terminal.
    ~ProgressLine() { finish(); }

    /// Reports `finished` requests, `steps` steps and `simulated_ms` at wall time `now`; prints when due. O(1).
    void update(std::int64_t finished, std::int64_t steps, double simulated_ms, clock::time_point now = clock::now()) {
        const double elapsed = seconds(now - start_);
        if (elapsed < quiet_seconds) return;
        if (any_ && seconds(now - last_) < (terminal_ ? terminal_period : log_period)) return;
        last_ = now;
        std::fputs(line(finished, steps, simulated_ms, elapsed).c_str(), out_);
        std::fputs(terminal_ ? "\r" : "\n", out_);
        std::fflush(out_);
        printed_ = any_ = true;
    }

    /// The text of one report: `label: 1,200/3,993 requests, 48,213 steps, 310.2 s simulated, 402 req/s,
    /// ETA 7 s`, padded on a terminal so a shorter line covers a longer one.
    [[nodiscard]] std::string line(std::int64_t finished, std::int64_t steps, double simulated_ms,
                                   double elapsed) const {
        const double rate = elapsed > 0 ? static_cast<double>(finished) / elapsed : 0;
        char eta[32] = "ETA --";
        if (rate > 0) std::snprintf(eta, sizeof eta, "ETA %.0f s", static_cast<double>(total_ - finished) / rate);
        char buf[256];
        std::snprintf(buf, sizeof buf,
                      "unikv-sim: %s: %lld/%lld requests, %lld steps, %.1f s simulated, %.0f req/s, %s", label_.c_str(),
                      static_cast<long long>(finished), static_cast<long long>(total_), static_cast<long long>(steps),
                      simulated_ms / 1e3, rate, eta);
        std::string out = buf;
        if (terminal_ && out.size() < 100) out.resize(100, ' ');
        return out;
    }

    /// Ends a terminal line that was printed (idempotent).
    void finish() {
        if (terminal_ && printed_) std::fputc('\n', out_);
        printed_ = false;
    }

    static constexpr double quiet_seconds = 3;     ///< no line before this
    static constexpr double terminal_period = 0.2;  ///< between rewrites on a terminal
    static constexpr double log_period = 5;        ///< between lines otherwise

private:
    static double seconds(clock::duration d) { return std::chrono::duration<double>(d).count(); }

    std::FILE* out_;
    std::string label_;
    std::int64_t total_;
    bool terminal_;
    clock::time_point start_;
    clock::time_point last_;
    bool printed_ = false;  ///< a terminal line is open
    bool any_ = false;      ///< a line was printed
};

}  // namespace unikv::sim

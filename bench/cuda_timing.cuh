#pragma once
// Timing of the CUDA benchmarks: CUDA events around the measured call and around its floor, queued behind a
// spin kernel that keeps the GPU busy while the host prepares the call, so the events time device work alone;
// the host time of the measured call is taken separately with a steady clock. The timer keeps the totals and
// writes the counters every CUDA benchmark reports. `envelope_sizes` is the envelope sweep of the copy and
// transfer benchmarks, so their rows compare size for size.
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdint>

#include <unikv/backend/cuda_backend.cuh>

namespace bench_cuda {

// Spins one thread until the GPU's global timer has advanced `ns` nanoseconds.
template <int Unused = 0>
__global__ void spin_kernel(unsigned long long ns) {
    unsigned long long start = 0, now = 0;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    do {
        __nanosleep(1000);
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    } while (now - start < ns);
}

struct Timing {
    double ours_ms = 0;   ///< device time of the measured call
    double floor_ms = 0;  ///< device time of its floor
    double host_ms = 0;   ///< host time spent queueing the measured call
};

class EventTimer {
public:
    /// `busy_us`: the first spin; it doubles whenever it proves too short.
    explicit EventTimer(unsigned busy_us) : busy_ns_(busy_us * 1000ull) {
        for (cudaEvent_t& e : events_) unikv::detail::cuda::check(cudaEventCreate(&e), "cudaEventCreate");
    }
    EventTimer(const EventTimer&) = delete;
    EventTimer& operator=(const EventTimer&) = delete;
    ~EventTimer() {
        for (cudaEvent_t e : events_) cudaEventDestroy(e);
    }

    /// Queues a spin, then `ours()` and `floor()` on `stream` between events; waits for them. When the spin had
    /// ended before `ours()` returned (the host's queueing would then be in the device time), the sample is
    /// counted in `late()` and the spin doubles for the next call.
    template <class Ours, class Floor>
    Timing measure(cudaStream_t stream, Ours&& ours, Floor&& floor) {
        using unikv::detail::cuda::check;
        spin_kernel<><<<1, 1, 0, stream>>>(busy_ns_);
        check(cudaGetLastError(), "spin_kernel");
        check(cudaEventRecord(events_[0], stream), "cudaEventRecord");
        const auto host_start = std::chrono::steady_clock::now();
        ours();
        const auto host_end = std::chrono::steady_clock::now();
        if (cudaEventQuery(events_[0]) != cudaErrorNotReady) {
            ++late_;
            busy_ns_ *= 2;
        }
        check(cudaEventRecord(events_[1], stream), "cudaEventRecord");
        floor();
        check(cudaEventRecord(events_[2], stream), "cudaEventRecord");
        check(cudaEventSynchronize(events_[2]), "cudaEventSynchronize");
        const Timing t{elapsed_ms(0, 1), elapsed_ms(1, 2),
                       std::chrono::duration<double, std::milli>(host_end - host_start).count()};
        total_.ours_ms += t.ours_ms;
        total_.floor_ms += t.floor_ms;
        total_.host_ms += t.host_ms;
        ++samples_;
        return t;
    }

    /// Writes the counters of every sample so far: `rate` (`units` over our device time, in G per second),
    /// x_floor (the floor's device time / ours), late (samples whose queueing outlasted the spin, so their
    /// device time includes some host time) and host_us (host time per call).
    void report(benchmark::State& state, const char* rate, double units) const {
        state.counters[rate] = units / (total_.ours_ms / 1e3) / 1e9;
        state.counters["x_floor"] = total_.floor_ms / total_.ours_ms;
        state.counters["late"] = late_;
        state.counters["host_us"] = samples_ > 0 ? total_.host_ms * 1e3 / samples_ : 0;
    }

private:
    [[nodiscard]] double elapsed_ms(int from, int to) const {
        float ms = 0;
        unikv::detail::cuda::check(cudaEventElapsedTime(&ms, events_[from], events_[to]), "cudaEventElapsedTime");
        return ms;
    }
    cudaEvent_t events_[3]{};
    unsigned long long busy_ns_;
    int late_ = 0;
    Timing total_{};
    int samples_ = 0;
};

/// The envelope sizes the copy and transfer benchmarks run at (4 KiB to 1 MiB), in milliseconds of manual
/// (event) time.
inline void envelope_sizes(benchmark::internal::Benchmark* b) {
    b->ArgName("envelope_bytes");
    for (std::int64_t bytes : {4096, 16384, 65536, 262144, 1048576}) b->Arg(bytes);
    b->Unit(benchmark::kMillisecond)->MinTime(0.05)->UseManualTime();
}

}  // namespace bench_cuda

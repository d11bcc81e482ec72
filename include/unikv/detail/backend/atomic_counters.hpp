#pragma once
/// \file
/// `atomic_counters`: the counts behind `BackendCounters`, kept by every backend. Relaxed atomics: worker
/// threads (host) and any caller thread bump them with relaxed adds (a count orders nothing), and tests read
/// a snapshot once the work is done.

#include <atomic>
#include <cstdint>

#include <unikv/backend/counters.hpp>

namespace unikv::detail {

struct atomic_counters {
    std::atomic<std::uint64_t> host_synchronizations{0};
    std::atomic<std::uint64_t> stream_waits{0};
    std::atomic<std::uint64_t> copies_queued{0};
    std::atomic<std::uint64_t> bytes_copied{0};
    std::atomic<std::uint64_t> bytes_streamed{0};

    /// The counts now.
    [[nodiscard]] BackendCounters snapshot() const noexcept {
        return {host_synchronizations.load(), stream_waits.load(), copies_queued.load(), bytes_copied.load(),
                bytes_streamed.load()};
    }
};

}  // namespace unikv::detail

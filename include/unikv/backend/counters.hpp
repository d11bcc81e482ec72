#pragma once
/// \file
/// `BackendCounters`: what a backend counts so tests can prove that a hot path synchronized nothing.

#include <cstdint>

namespace unikv {

/// Counts since the backend was constructed. Every backend fills the first four.
struct BackendCounters {
    std::uint64_t host_synchronizations = 0;  ///< host blocks on an event or a stream
    std::uint64_t stream_waits = 0;           ///< stream-waits-event dependencies queued
    std::uint64_t copies_queued = 0;          ///< page copies and fills queued
    std::uint64_t bytes_copied = 0;           ///< bytes written by executed copies and fills (host backend)
    /// Of `bytes_copied`, those a host copy wrote with non-temporal stores (its stream's burst reached
    /// `streaming_copy_threshold`); always 0 on CUDA.
    std::uint64_t bytes_streamed = 0;
};

}  // namespace unikv

#pragma once
/// \file
/// `ExecutionMode`: how `HostBackend` executes the work queued on its streams.

namespace unikv {

/// How a `HostBackend` executes queued work.
enum class ExecutionMode {
    /// A worker thread per stream executes its queue in order, like a GPU would.
    asynchronous,
    /// Nothing executes until the test calls `run_next` / `run_all`, or a host synchronization needs it (it then
    /// runs exactly the work it depends on). Driven from one thread at a time: it is a deterministic test tool.
    manual,
};

}  // namespace unikv

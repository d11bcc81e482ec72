#pragma once
/// \file
/// Detection of tree results that were dropped before the caller acted on them: an action list that was never
/// drained (pages the allocator never frees) or a lock receipt destroyed while it still holds locks (a lock
/// that is never released). Both are caller bugs that leak capacity silently, so the library reports them
/// through a process-wide handler. The default handler prints a line to stderr and, when `UNIKV_ASSERT` is
/// enabled, aborts; tests install their own handler to count reports without aborting.

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include <unikv/config.hpp>

namespace unikv {

/// What was dropped.
enum class Dropped : std::uint8_t {
    actions,  ///< a `TreeActions` list destroyed with actions and without `mark_drained()`
    receipt,  ///< a `LockReceipt` destroyed while it still held locks
};

/// Called once per dropped result. Must not throw (it runs in destructors).
using DroppedHandler = void (*)(Dropped) noexcept;

class LockReceipt;
class TreeActions;

namespace detail {

inline void default_dropped_handler(Dropped what) noexcept {
    std::fprintf(stderr, "unikv: %s\n",
                 what == Dropped::actions ? "a tree action list was destroyed without being drained"
                                          : "a lock receipt was destroyed while still holding locks");
#if UNIKV_ASSERTS_ENABLED
    std::abort();
#endif
}

inline std::atomic<DroppedHandler>& dropped_handler_slot() noexcept {
    static std::atomic<DroppedHandler> slot{&default_dropped_handler};
    return slot;
}

inline std::atomic<std::uint64_t>& dropped_counter() noexcept {
    static std::atomic<std::uint64_t> count{0};
    return count;
}

/// Reports a dropped result: counts it and calls the installed handler. Only the two results that can be
/// dropped report, so user code cannot inject reports.
class DropReport {
    friend class ::unikv::LockReceipt;
    friend class ::unikv::TreeActions;

    static void report(Dropped what) noexcept {
        dropped_counter().fetch_add(1, std::memory_order_relaxed);
        dropped_handler_slot().load(std::memory_order_acquire)(what);
    }
};

}  // namespace detail

/// Installs `handler` (nullptr restores the default) and returns the previous one.
inline DroppedHandler set_dropped_handler(DroppedHandler handler) noexcept {
    return detail::dropped_handler_slot().exchange(handler ? handler : &detail::default_dropped_handler,
                                                   std::memory_order_acq_rel);
}

/// How many dropped results were reported in this process so far.
[[nodiscard]] inline std::uint64_t dropped_count() noexcept {
    return detail::dropped_counter().load(std::memory_order_relaxed);
}

}  // namespace unikv

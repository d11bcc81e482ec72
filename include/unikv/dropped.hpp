#pragma once
/// \file
/// Detection of results that must be consumed and were dropped instead: a tree action list never executed, a
/// lock receipt destroyed while holding locks, a pending reservation neither submitted nor cancelled, a live
/// retraction backup neither restored nor discarded, a load-back ticket neither committed nor rolled back. Each
/// is a caller bug that would leak capacity silently, so the library reports every one of them through one
/// process-wide handler. The default handler prints a line to stderr naming what was dropped and, when
/// `UNIKV_ASSERT` is enabled, aborts, unless an exception is propagating: a result dropped while the stack
/// unwinds was dropped by that error (a misuse found while an action list drains, say), and the exception is
/// the report that must reach the caller. Tests install their own handler to count reports without aborting.
///
/// Only the five results themselves report (`detail::DropReport` befriends them), so user code cannot
/// inject reports. What happens to the dropped resources is the result's own business (see `Dropped`).

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>

#include <unikv/config.hpp>

namespace unikv {

/// What was dropped without being consumed.
enum class Dropped : std::uint8_t {
    actions,  ///< a `TreeActions` list destroyed with actions and without `mark_executed()` (its pages leak)
    receipt,  ///< a `LockReceipt` destroyed while it still held locks (they are never released)
    /// A pending `Reservation` destroyed without being submitted or cancelled. Its pages are cancelled once
    /// reported (so moves of its pool are no longer blocked) and the allocator's `unconsumed_reservations()`
    /// counts it.
    reservation,
    /// A live `RetractionBackup` destroyed without `restore` or `discard`. It has no pool to free into, so its
    /// host pages stay allocated until the host pool goes.
    retraction_backup,
    /// A `LoadBackTicket` destroyed while still holding allocations, neither `commit()`ed nor `rollback()`ed.
    /// Its allocations are rolled back once reported, so no count changes.
    load_ticket,
};

/// Called once per dropped result, before the result cleans up what it can. Must not throw (it runs in
/// destructors).
using DroppedHandler = void (*)(Dropped) noexcept;

class LockReceipt;
class TreeActions;
class RetractionBackup;
template <class Alloc>
class LoadBackTicket;

namespace detail {

class reservation_registry;

/// The default handler's line for `what`.
[[nodiscard]] constexpr const char* dropped_message(Dropped what) noexcept {
    switch (what) {
        case Dropped::actions: return "a tree action list was destroyed without being executed";
        case Dropped::receipt: return "a lock receipt was destroyed while still holding locks";
        case Dropped::reservation:
            return "a reservation was destroyed without being submitted or cancelled; its pages were cancelled";
        case Dropped::retraction_backup:
            return "a retraction backup was destroyed without restore or discard; its host pages stay allocated";
        case Dropped::load_ticket:
            return "a load-back ticket was destroyed without commit or rollback; it was rolled back";
    }
    return "an unknown result was dropped";
}

inline void default_dropped_handler(Dropped what) noexcept {
    const bool unwinding = std::uncaught_exceptions() > 0;
    std::fprintf(stderr, "unikv: %s%s\n", dropped_message(what),
                 unwinding ? " (by an exception, which goes on to the caller)" : "");
#if UNIKV_ASSERTS_ENABLED
    if (!unwinding) std::abort();
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

/// Reports a dropped result: counts it and calls the installed handler. Only the results that can be dropped
/// report, so user code cannot inject reports.
class DropReport {
    friend class ::unikv::LockReceipt;
    friend class ::unikv::TreeActions;
    friend class ::unikv::RetractionBackup;
    template <class Alloc>
    friend class ::unikv::LoadBackTicket;
    friend class reservation_registry;

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

/// How many dropped results (of every kind) were reported in this process so far.
[[nodiscard]] inline std::uint64_t dropped_count() noexcept {
    return detail::dropped_counter().load(std::memory_order_relaxed);
}

}  // namespace unikv

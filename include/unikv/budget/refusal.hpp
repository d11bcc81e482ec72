#pragma once
/// \file
/// Why a budget or an admission said no: `AdmissionRefusal`, a plain value a scheduler can log (`to_string`)
/// and a test can compare, and `BudgetCheck`, the result of a budget's checks. A refusal is an expected
/// outcome, never an exception.

#include <cstdint>
#include <string>

#include <unikv/component.hpp>

namespace unikv {

/// What stopped an admission.
enum class RefusalCause : std::uint8_t {
    no_room,          ///< the budget (with what eviction can reclaim) cannot hold the request's pages
    chunk_exhausted,  ///< the step's chunked-prefill budget has less than one page left
    load_back_short,  ///< the budget held, but the load-back's own allocation stayed short (rolled back)
    /// an earlier load-back in flight copies part of the request's prefix: acknowledge it (`loading_check`) and
    /// admit again; no pages are missing
    loading,
    /// the request's tokens need more FULL pages than the pool can ever hold (the whole arena, or its static
    /// partition): it can never be admitted (shorten it, lower its `max_new_tokens`, or give the cache memory)
    never_fits,
};

/// "no room", "chunk exhausted", "load-back short", "loading" or "never fits".
[[nodiscard]] constexpr const char* to_string(RefusalCause c) noexcept {
    switch (c) {
        case RefusalCause::no_room: return "no room";
        case RefusalCause::chunk_exhausted: return "chunk exhausted";
        case RefusalCause::load_back_short: return "load-back short";
        case RefusalCause::loading: return "loading";
        case RefusalCause::never_fits: return "never fits";
    }
    return "unknown";
}

/// Why a request was not admitted, in pages of the pool that fell short (Mamba: state slots), as seen when it was
/// refused.
/// The three breakdowns say where the missing pages are: reclaimable by eviction (unlocked tree data), held by
/// in-flight transfers, or held by locks (running requests, pins, loads awaiting their ack).
struct AdmissionRefusal {
    RefusalCause cause = RefusalCause::no_room;
    /// The pool that fell short (FULL for `chunk_exhausted`) and its pages missing beyond what the budget can
    /// give (`chunk_exhausted`: 1; `loading`: 0). The counts below are in pages of `missing.component`.
    Pages missing{};
    /// Pages that eviction could still free (the tree's evictable size).
    std::int64_t pages_reclaimable = 0;
    /// Pages (in the short pool's page bytes) that transfers hold: unbound reservation pages of loads in flight,
    /// and the holes of the other pools while moves are blocked, which compaction would otherwise return.
    std::int64_t pages_in_flight = 0;
    /// Pages held by locks (the tree's protected size).
    std::int64_t pages_locked = 0;

    /// Tokens of the short pool (Mamba: states) that the step charged before this request: the pending decode
    /// tokens `begin_step` was given and the admissions since. A step whose `begin_step` was skipped keeps
    /// charging, and this names it. Budget refusals fill it (0: nothing pre-charged); a refusal of the cache's
    /// own reclaim, which counts pages to make free, leaves it 0.
    std::int64_t precharged = 0;

    friend constexpr bool operator==(const AdmissionRefusal&, const AdmissionRefusal&) = default;
};

/// One line for a scheduler's log, e.g. "no room: swa short by 3 pages (reclaimable 0, in flight 2, locked 10)",
/// with "; 96 tokens pre-charged this step" when the step charged some, and "never fits: full short by 3 pages
/// even with the pool empty" for a request no cache state admits. Allocates (cold path).
[[nodiscard]] inline std::string to_string(const AdmissionRefusal& r) {
    std::string out = to_string(r.cause);
    out += ": ";
    out += to_string(r.missing.component);
    out += " short by " + std::to_string(r.missing.count) + " pages";
    if (r.cause == RefusalCause::never_fits) return out + " even with the pool empty";
    out += " (reclaimable " + std::to_string(r.pages_reclaimable) + ", in flight " +
           std::to_string(r.pages_in_flight) + ", locked " + std::to_string(r.pages_locked) + ")";
    if (r.precharged > 0) {
        out += "; " + std::to_string(r.precharged) +
               (r.missing.component == Component::mamba ? " states" : " tokens") + " pre-charged this step";
    }
    return out;
}

/// The result of a budget check: fits, or the refusal that explains why not.
struct [[nodiscard]] BudgetCheck {
    bool fits = true;
    /// Meaningful when `fits` is false.
    AdmissionRefusal refusal{};
    /// A refusal.
    [[nodiscard]] static constexpr BudgetCheck refused(const AdmissionRefusal& r) noexcept { return {false, r}; }
    explicit constexpr operator bool() const noexcept { return fits; }
};

}  // namespace unikv

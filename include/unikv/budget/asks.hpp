#pragma once
/// \file
/// What admission asks a budget (reference §6.1, §6.2): the step's inputs (`StepDemand`: the mixed batch's
/// pending decode tokens and the chunked-prefill budget), a prefill to select (`PrefillAsk`, answered by a
/// `Selection`), a load-back to prepare (`LoadBackAsk`), and the runtime configuration of the budgets
/// (`BudgetConfig`). Named fields, token counts unless stated.

#include <cstdint>
#include <limits>

#include <unikv/budget/refusal.hpp>
#include <unikv/component.hpp>
#include <unikv/pools/results.hpp>

namespace unikv {

/// The inputs of one scheduling step, given to `begin_step`.
struct StepDemand {
    /// Tokens the running decode requests of the mixed batch add this step (one each): pre-charged to every
    /// budgeted pool before any prefill is admitted.
    std::int32_t decode_tokens = 0;
    /// The step's chunked-prefill budget: prefill tokens all admissions of the step may extend together. A
    /// request whose extension exceeds what is left is cut to whole pages of it (`PrefillAsk::chunked`).
    std::int32_t chunk_tokens = std::numeric_limits<std::int32_t>::max();
};

/// A prefill as selection sees it: the request's cached prefix, what it extends this step, and its decode.
struct PrefillAsk {
    /// Tokens cached for the request (device hit plus a host hit about to be loaded).
    std::int32_t prefix_length = 0;
    /// Tokens it prefills this step (cut to the chunk budget when `chunked`).
    std::int32_t extend = 0;
    /// Tokens it may decode once its prefill is done (0 while chunked: no decode this step).
    std::int32_t max_new = 0;
    /// True when `extend` was cut to the chunk budget: later steps prefill the rest.
    bool chunked = false;
};

/// What selection decided: the prefill as admitted (possibly cut to the chunk budget), or why not.
struct [[nodiscard]] Selection {
    BudgetCheck check;
    /// The prefill to admit (meaningful when `check` fits).
    PrefillAsk ask;
    explicit constexpr operator bool() const noexcept { return check.fits; }
};

/// A load-back to prepare once the host match is pinned (`prepare_load_back`).
struct LoadBackAsk {
    /// FULL tokens the step will allocate with the load: the FULL rows the load adds, the extension, its
    /// decode and one page of rounding. The FULL rows come from the load-back plan when the budget asks for it
    /// (`load_back_needs_full_tokens`), else the host hit length (an upper bound).
    std::int32_t full_tokens = 0;
    /// Tokens the request prefills this step.
    std::int32_t extend = 0;
    /// Tokens it may decode (0 while chunked).
    std::int32_t max_new = 0;
    /// Host-only SWA tokens within the last window (the SWA rows the load reserves).
    std::int32_t swa_host_hit = 0;
    /// State slots the load adds (1 when its plan has a Mamba step; from the plan, so 0 for budgets that do
    /// not ask for it).
    std::int32_t load_states = 0;
};

/// What a budget answers a load-back (`prepare_load_back`): whether it fits, and the pages the cache must make
/// free now, before the load is queued (a queued load blocks page moves until its ack, so the step's
/// allocations must not need any). The cache reclaims `demand` by relieving the pools of `pools`; an empty
/// mask asks for nothing.
struct [[nodiscard]] Reclaim {
    BudgetCheck check;
    /// Pages per pool (Mamba: states) to have free once the load is queued (meaningful when `pools` is not empty).
    CapacityDemand demand{};
    /// The pools relief may evict from.
    ComponentMask pools{};
    explicit constexpr operator bool() const noexcept { return check.fits; }
};

/// Runtime configuration of a budget (each reads its own fields).
struct BudgetConfig {
    /// `PartitionedSWABudget`: the static FULL partition, in pages.
    std::int64_t full_partition_pages = 0;
    /// `PartitionedSWABudget`: the static SWA partition, in pages.
    std::int64_t swa_partition_pages = 0;
    /// `PartitionedSWABudget` over a layout with Mamba: the static state pool, in states (0: the states share
    /// the arena unbounded).
    std::int64_t mamba_partition_pages = 0;
};

}  // namespace unikv

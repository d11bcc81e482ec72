#pragma once
/// \file
/// Admission of one waiting request into the step (reference §6.2): `try_admit(cache, budget, request)`.
///
/// Order, which matters:
/// 1. match the prompt (host hits included where the cache serves them), stopping one token short: the last
///    token is always computed, its forward gives the first new token;
/// 2. select with the last device node pinned (a device lock, so the prefix the request reuses is not counted
///    as evictable): `budget.check_prefill`, which cuts the extension to the chunk budget; a device hit keeps
///    that pin as the request's lock, a host hit releases it;
/// 3. for a host hit, pin the host match (device and host locks on the best node) for the whole block: count
///    the FULL rows the load adds from the tree's load-back plan, only when the budget asks for them
///    (`load_back_needs_full_tokens`; otherwise the host hit length stands for them and the tree is not
///    walked), `budget.prepare_load_back` (the shared budgets evict and compact here, before anything is
///    queued), then `cache.load_back`, which takes both pins over until the ack;
/// 4. charge the budget (`reserve`) and lock the request's node for it (a device hit: the selection pin).
/// So an admission matches once and takes at most four locks (a host hit: the selection pin, the two pins the
/// load keeps, the request's lock; a device hit: one). Every pin is released on refusal and when a call throws
/// (the exception propagates). A refusal is a value that says why (`AdmissionRefusal`).
///
/// The cache is any type with the calls used here: `match`, `lock`, `unlock`, `load_back(node, host, device)`,
/// `load_back_plan`, `page_size`, `capacity` (the budget's view) and `reclaim` (what a budget asks to have free
/// before a load-back is queued); `Cache` has them all. Neither the budget nor the admission keeps a
/// reference to it.

#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <utility>

#include <unikv/budget/asks.hpp>
#include <unikv/budget/capacity_view.hpp>
#include <unikv/budget/refusal.hpp>
#include <unikv/component.hpp>
#include <unikv/detail/budget/capacity.hpp>
#include <unikv/detail/tree/held_lock.hpp>
#include <unikv/error.hpp>
#include <unikv/tree/handles.hpp>
#include <unikv/tree/keys.hpp>
#include <unikv/tree/options.hpp>
#include <unikv/tree/results.hpp>

namespace unikv {

/// A waiting request.
struct AdmitRequest {
    /// Its prompt: the tokens it must have cached or computed before it decodes (at least one). The tokens
    /// must outlive the call.
    TokenKey prompt;
    /// Tokens it may decode.
    std::int32_t max_new_tokens = 0;
};

/// What `try_admit` decided. Move-only (it carries the request's lock).
struct [[nodiscard]] Admission {
    /// True when the request joins the step.
    bool admitted = false;
    /// Why not (meaningful when not admitted).
    AdmissionRefusal refusal{};
    /// The node its cached prefix ends at (the root on a miss), locked by `lock`.
    NodeRef node{};
    /// Prompt tokens the cache serves: the device hit plus a loaded host hit (served once the load is
    /// acknowledged, `load_id`). The request's own rows start here.
    std::int32_t prefix_length = 0;
    /// Tokens it prefills this step.
    std::int32_t extend_length = 0;
    /// Tokens it may decode (0 while chunked).
    std::int32_t max_new_tokens = 0;
    /// True when the extension was cut, to the step's chunk budget or (under Mamba) at a point where the cache keeps
    /// a state (`CacheCore::checkpoint_stop`): the rest comes in later steps.
    bool chunked = false;
    /// The queued load-back (`Cache::loading_check` reports it), 0 when nothing is loaded.
    std::uint64_t load_id = 0;
    /// Tokens of `prefix_length` the load-back brings from the host (0 for a device hit).
    std::int32_t host_length = 0;
    /// Prompt tokens whose FULL pages the tree holds on device along the matched path, whether or not the other
    /// components serve them (whole pages): where the prompt leaves the cached path.
    std::int32_t cached_length = 0;
    /// Tokens after `prefix_length` whose FULL pages the device holds (up to `cached_length`) but the prefix does
    /// not serve, for want of an SWA window at a boundary beyond the prefix (the state was there or the layout
    /// has none) ...
    std::int32_t missing_window = 0;
    /// ... or of a Mamba state (a window too, where both were missing).
    std::int32_t missing_state = 0;
    /// The request's device lock on `node` (empty when refused): unlock it when the request is done with it.
    LockReceipt lock;

    explicit operator bool() const noexcept { return admitted; }
};

namespace detail {

// A temporary lock on `node` for the length of one admission phase. The root needs none: it is never evicted.
template <class Cache>
LockReceipt pin_receipt(Cache& cache, NodeRef node, Tier tier) {
    return node.is_root() ? LockReceipt{} : cache.lock(node, {.tier = tier});
}

// The budget's answer to `ask` (`Budget::prepare_load_back` over the cache's view), realized: what it asks to
// have free is reclaimed by the cache (`reclaim`: evictions and compaction), or refused when that runs out.
template <class Cache, class Budget>
BudgetCheck prepare_load_back(Cache& cache, Budget& budget, const LoadBackAsk& ask) {
    const Reclaim r = budget.prepare_load_back(cache.capacity(), ask);
    if (!r || r.pools.empty()) return r.check;
    return cache.reclaim(r.demand, r.pools);
}

inline Admission refused(const AdmissionRefusal& why) {
    Admission out;
    out.refusal = why;
    return out;
}

// An earlier load in flight copies `c` of the prefix: nothing is short, the request waits for its ack.
inline Admission refused_while_loading(Component c) {
    return refused({.cause = RefusalCause::loading, .missing = {c, 0}});
}

}  // namespace detail

/// Admits `request` into the step `budget` describes, or says why not (see the file comment). On success the
/// request's node is locked for it (`Admission::lock`), the budget is charged, and a host hit is queued for
/// load-back (`load_id`). A request whose prompt and decode need more FULL pages than the pool can ever hold (the
/// whole arena, or its partition) is refused `never_fits` before anything else. Throws `logic_error` for an empty prompt or a negative
/// `max_new_tokens`, and whatever the cache throws; every pin is released either way and nothing is charged.
///
/// Cost: one match (O(prompt + depth)), at most four locks (O(depth + window nodes) each; one for a device
/// hit), the budget's checks (O(pools) capacity queries; a refusal O(pools * log pages) more); with a host hit
/// the load-back plan (O(depth), shared budgets only), the budget's reclaim (evictions and compaction, only
/// when short) and the load-back (O(pages)). Allocation-free in steady state except the load-back's record in the cache.
template <class Cache, class Budget>
Admission try_admit(Cache& cache, Budget& budget, const AdmitRequest& request) {
    const auto input = static_cast<std::int32_t>(request.prompt.tokens.size());
    UNIKV_EXPECTS(input >= 1, "try_admit: the prompt is empty; a request computes at least one token");
    UNIKV_EXPECTS(request.max_new_tokens >= 0, "try_admit: max_new_tokens is ", request.max_new_tokens,
                  "; give the decode limit (0 or more)");
    const std::int32_t page = cache.page_size(Component::full);
    // Every token of the request stays in FULL until it finishes: a charge (the budgets' FULL charge of the whole
    // prompt) past what the pool can ever hold is past any eviction.
    const PoolCapacity full = cache.capacity()[Component::full];
    const std::int64_t charge = detail::ceil_page(input, page) + page + request.max_new_tokens;
    if (const Pages need = full.pages_for(charge); need.count > full.most()) {
        return detail::refused(
            {.cause = RefusalCause::never_fits, .missing = {need.component, need.count - full.most()}});
    }
    const MatchResult m = cache.match({request.prompt.tokens.first(static_cast<std::size_t>(input - 1)),
                                       request.prompt.ns});
    const bool host_hit = m.host_hit_length > 0;
    const std::int32_t prefix = host_hit ? m.best_length : m.device_length;
    // A Mamba state exists only at a forward's end: the chunk stops where the cache keeps one (`RetainPoints`).
    const std::int32_t stop = cache.checkpoint_stop(prefix, input, m.full_length);
    const PrefillAsk wanted{.prefix_length = prefix,
                            .extend = stop - prefix,
                            .max_new = stop < input ? 0 : request.max_new_tokens,
                            .chunked = stop < input};
    // A device hit's selection pin is kept as the request's lock; a host hit's goes before the host pins.
    detail::held_lock<Cache> kept(cache, detail::pin_receipt(cache, m.device_node, Tier::device));
    const CapacityView view = cache.capacity();  // with the pin: the reused prefix is not counted as evictable
    const Selection selected = budget.check_prefill(view, wanted);
    if (!selected) return detail::refused(selected.check.refusal);
    if (host_hit && !kept.receipt().empty()) cache.unlock(kept.release());
    const PrefillAsk& ask = selected.ask;

    std::uint64_t load_id = 0;
    if (host_hit) {
        detail::held_lock<Cache> host_pin(cache, detail::pin_receipt(cache, m.best_node, Tier::host));
        detail::held_lock<Cache> device_pin(cache, detail::pin_receipt(cache, m.best_node, Tier::device));
        LoadBackAsk load{.extend = ask.extend, .max_new = ask.max_new, .swa_host_hit = m.swa_host_hit_length};
        std::int32_t full_rows = m.host_hit_length;
        if constexpr (Budget::load_back_needs_full_tokens) {
            full_rows = 0;
            for (const LoadBackStep& s : cache.load_back_plan(m.best_node)) {
                if (s.loading) return detail::refused_while_loading(s.component);  // before any reclaim
                if (s.component == Component::full) full_rows += s.length;
                if (s.component == Component::mamba) load.load_states = 1;
            }
        }
        load.full_tokens = full_rows + ask.extend + ask.max_new + page;
        if (const BudgetCheck prepared = detail::prepare_load_back(cache, budget, load); !prepared) {
            return detail::refused(prepared.refusal);
        }
        const auto start = cache.load_back(m.best_node, host_pin.receipt(), device_pin.receipt());
        using Status = typename std::remove_cvref_t<decltype(start)>::Status;
        if (start.status == Status::loading) return detail::refused_while_loading(Component::full);
        if (!start && start.status != Status::device_hit) {
            return detail::refused(
                detail::refusal_of(cache.capacity(), RefusalCause::load_back_short, start.failure.missing));
        }
        load_id = start.id;
    }
    budget.reserve(view, ask);  // reads the view's geometry only, which no call above changes
    const std::int32_t unusable = std::max(0, m.full_length - ask.prefix_length);
    std::int32_t no_window = 0;
    if constexpr (!Cache::has_mamba) {
        no_window = unusable;
    } else if constexpr (Cache::has_swa) {
        no_window = std::clamp(m.swa_branching_length - ask.prefix_length, 0, unusable);
    }
    const NodeRef node = host_hit ? m.best_node : m.device_node;
    LockReceipt lock = kept.receipt().empty() ? cache.lock(node, {.tier = Tier::device}) : kept.release();
    return Admission{.admitted = true,
                     .refusal = {},
                     .node = node,
                     .prefix_length = ask.prefix_length,
                     .extend_length = ask.extend,
                     .max_new_tokens = ask.max_new,
                     .chunked = ask.chunked,
                     .load_id = load_id,
                     .host_length = load_id != 0 ? ask.prefix_length - m.device_length : 0,
                     .cached_length = m.full_length,
                     .missing_window = no_window,
                     .missing_state = unusable - no_window,
                     .lock = std::move(lock)};
}

}  // namespace unikv

#pragma once
/// \file
/// `LoadBackTicket`: the device side of one load-back, from a tree's load-back plan to the transfer queue.
///
/// `prepare_load_back(alloc, plan, relieve)` allocates in the one order that is safe (reference §7, §11 rule 2):
/// 1. FULL virtual pages for every FULL step (`alloc_full`: their SWA entries are tombstones);
/// 2. one SWA reservation of only the missing window rows (the plan's SWA steps), bound at once under the
///    steps' FULL pages (`alloc_physical`, `bind_swa`); the pending reservation blocks every move of the SWA
///    pool until its load is registered, so no later allocation can move it;
/// 3. the Mamba checkpoint slot (`alloc_state`). In the tri-pool a full Mamba end would need the floating SWA
///    pool to move, which the pending reservation refuses: the state allocation fails (and the whole load
///    rolls back) unless evicting a checkpoint frees a slot. The reservation never moves.
/// A pool that falls short is relieved and retried: `relieve(shortfall)` (the allocation's result, naming the
/// pool, the pages missing and why) evicts for it and says whether it freed anything; the allocation is retried
/// while it did (`detail::with_relief`). Any failure rolls back everything this load allocated (reservation cancelled, FULL
/// pages and the state freed), so every count is as before.
///
/// The ticket owns what it allocated and must be consumed, like a `Reservation`: `commit()` hands it to the
/// transfer queue, whose acknowledgement then commits the plan to the tree (`commit_load_back`) or, for a
/// failed copy, frees it; `rollback()` gives it back (a caller that cannot queue the load, an exception on the
/// way). A failed ticket holds nothing and counts as consumed. A ticket destroyed while it still holds
/// allocations is a caller bug the library detects: it is reported as `Dropped::load_ticket` (`dropped.hpp`: by
/// default a line on stderr, and an abort when asserts are enabled) and then rolled back, so nothing leaks
/// either way. It refers to the allocator, so it lives within one call of its owner (prepare, queue), never
/// across a move of the allocator.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include <unikv/component.hpp>
#include <unikv/detail/transfer/with_relief.hpp>
#include <unikv/dropped.hpp>
#include <unikv/error.hpp>
#include <unikv/ids.hpp>
#include <unikv/pools/reservation.hpp>
#include <unikv/pools/results.hpp>
#include <unikv/tree/results.hpp>

namespace unikv {

/// What a committed load-back owns until its acknowledgement: the destinations of the plan's steps.
struct LoadBackDestinations {
    /// FULL pages of every FULL step, step after step (`full_of(step)` slices them).
    std::vector<VirtualPage> full;
    /// Offset into `full` of each FULL step, in plan order (other steps: not used).
    std::vector<std::uint32_t> full_offset;
    /// The SWA reservation, bound under the SWA steps' FULL pages (empty without SWA steps).
    Reservation swa;
    /// The Mamba slot of the Mamba step (none without one).
    StateId state{};
};

/// Why `prepare_load_back` failed: the pool that stayed short once its relief freed nothing more, and by how much.
struct LoadBackShortfall {
    Shortfall shortfall = Shortfall::none;
    Pages missing{};
};

/// The device allocations of one load-back (see the file comment). Move-only; must be committed or rolled back
/// (a failed ticket holds nothing): one dropped while holding allocations is reported and rolled back.
template <class Alloc>
class [[nodiscard]] LoadBackTicket {
public:
    /// An empty ticket on `alloc`.
    explicit LoadBackTicket(Alloc& alloc) noexcept : alloc_(&alloc) {}
    LoadBackTicket(const LoadBackTicket&) = delete;
    LoadBackTicket& operator=(const LoadBackTicket&) = delete;
    /// Takes over `other`'s allocations; `other` becomes empty.
    LoadBackTicket(LoadBackTicket&& other) noexcept
        : alloc_(other.alloc_), dest_(std::exchange(other.dest_, {})), failure_(other.failure_) {}
    LoadBackTicket& operator=(LoadBackTicket&&) = delete;
    /// Reports `Dropped::load_ticket` when the ticket still holds allocations, then rolls them back.
    ~LoadBackTicket() {
        if (!holds()) return;
        detail::DropReport::report(Dropped::load_ticket);
        rollback();
    }

    /// True when every allocation of the plan succeeded.
    explicit operator bool() const noexcept { return !failure_.has_value(); }
    /// Why it failed (meaningful when false).
    [[nodiscard]] LoadBackShortfall failure() const noexcept { return failure_.value_or(LoadBackShortfall{}); }
    /// The destinations allocated so far.
    [[nodiscard]] const LoadBackDestinations& destinations() const noexcept { return dest_; }

    /// Hands the allocations to the transfer queue and consumes the ticket (it then holds nothing).
    /// Precondition: the ticket succeeded (`logic_error` otherwise, nothing changes).
    [[nodiscard]] LoadBackDestinations commit() {
        UNIKV_EXPECTS(!failure_.has_value(), "LoadBackTicket::commit: the load-back failed and was rolled back");
        return std::exchange(dest_, {});
    }

    /// Undoes every allocation the ticket holds and consumes it: cancels the reservation (bound FULL pages get
    /// their tombstone back), frees the FULL pages and the state, so every count of the allocator is as before
    /// `prepare_load_back`. A no-op on a ticket that holds nothing (failed, committed, rolled back, moved from).
    /// Never throws: the ids were allocated by this ticket, so the allocator accepts them. O(pages).
    void rollback() noexcept {
        if (dest_.swa) alloc_->cancel(std::move(dest_.swa));
        if (!dest_.full.empty()) alloc_->free(dest_.full);
        if constexpr (Alloc::has_mamba) {
            if (dest_.state.is_valid()) alloc_->free_state(std::span<const StateId>(&dest_.state, 1));
        }
        dest_ = {};
    }

private:
    template <class A, class Relieve>
    friend LoadBackTicket<A> prepare_load_back(A& alloc, std::span<const LoadBackStep> plan, Relieve&& relieve);

    // True while something allocated is neither committed nor rolled back.
    [[nodiscard]] bool holds() const noexcept {
        return !dest_.full.empty() || !dest_.swa.empty() || dest_.state.is_valid();
    }

    void fail(Shortfall s, Pages missing) {
        failure_ = LoadBackShortfall{.shortfall = s, .missing = missing};
        rollback();
    }

    Alloc* alloc_;
    LoadBackDestinations dest_;
    std::optional<LoadBackShortfall> failure_;
};

/// Allocates the device side of `plan` (a tree's `load_back_plan`) in the safe order of the file comment,
/// relieving a pool that falls short with `relieve(const R& shortfall) -> bool` (`R`: `AllocResult` or
/// `ReserveResult`) and retrying while it frees something. Returns a ticket that converts to false when
/// a pool stayed short (then it holds nothing: everything was rolled back); a ticket that converts to true must
/// be committed or rolled back. Throws `logic_error` for a plan the allocator cannot take (an SWA or Mamba step
/// without that pool), with nothing allocated; what `relieve` (or the allocator) throws propagates after
/// everything allocated so far is rolled back, without a drop report. O(pages).
template <class Alloc, class Relieve>
LoadBackTicket<Alloc> prepare_load_back(Alloc& alloc, std::span<const LoadBackStep> plan, Relieve&& relieve) {
    LoadBackTicket<Alloc> ticket(alloc);
    // A throw (from `relieve`, or a plan the allocator refuses) is no drop: what was allocated goes back before
    // it propagates.
    try {
        LoadBackDestinations& d = ticket.dest_;
        std::int64_t full_pages = 0;
        std::int64_t swa_pages = 0;
        bool wants_state = false;
        for (const LoadBackStep& s : plan) {
            const auto pages = static_cast<std::int64_t>(s.host.size());
            if (s.component == Component::full) full_pages += pages;
            if (s.component == Component::swa) {
                UNIKV_EXPECTS(Alloc::has_swa, "prepare_load_back: an SWA step for an allocator without an SWA pool");
                swa_pages += pages;
            }
            if (s.component == Component::mamba) {
                UNIKV_EXPECTS(Alloc::has_mamba,
                              "prepare_load_back: a Mamba step for an allocator without a Mamba pool");
                wants_state = true;
            }
        }
        d.full_offset.assign(plan.size(), 0);
        if (full_pages > 0) {
            // The ticket holds only what was allocated, so a throw from `relieve` rolls back nothing it does not own.
            const AllocResult r = detail::with_relief(
                [&] {
                    d.full.resize(static_cast<std::size_t>(full_pages));
                    const AllocResult got = alloc.alloc_full(d.full);
                    if (!got) d.full.clear();  // keeps the capacity: the retry does not allocate
                    return got;
                },
                relieve);
            if (!r) {
                ticket.fail(r.shortfall, r.missing);
                return ticket;
            }
        }
        // FULL pages of each step: its own for a FULL step; the node's resident pages, or those of the plan's
        // FULL step on the same node, for an SWA step.
        std::uint32_t at = 0;
        for (std::size_t i = 0; i < plan.size(); ++i) {
            if (plan[i].component != Component::full) continue;
            d.full_offset[i] = at;
            at += static_cast<std::uint32_t>(plan[i].host.size());
        }
        if constexpr (Alloc::has_swa) {
            if (swa_pages > 0) {
                auto r = detail::with_relief(
                    [&] { return alloc.alloc_physical(Component::swa, static_cast<std::int32_t>(swa_pages)); },
                    relieve);
                if (!r) {
                    ticket.fail(r.shortfall, r.missing);
                    return ticket;
                }
                (void)(d.swa = std::move(r.reservation));  // nvcc: the assignment returns a [[nodiscard]] type
                std::size_t first = 0;
                for (std::size_t i = 0; i < plan.size(); ++i) {
                    const LoadBackStep& s = plan[i];
                    if (s.component != Component::swa) continue;
                    std::span<const VirtualPage> under = s.full_pages;
                    if (under.empty()) {  // loaded by this plan's FULL step on the same node
                        for (std::size_t j = 0; j < i; ++j) {
                            if (plan[j].component == Component::full && plan[j].node == s.node) {
                                under = std::span<const VirtualPage>(d.full).subspan(d.full_offset[j],
                                                                                     plan[j].host.size());
                            }
                        }
                    }
                    UNIKV_EXPECTS(under.size() == s.host.size(), "prepare_load_back: the SWA step of a node has ",
                                  s.host.size(), " host pages but ", under.size(), " FULL pages to bind them under");
                    alloc.bind_swa(under, d.swa, first);
                    first += under.size();
                }
            }
        }
        if constexpr (Alloc::has_mamba) {
            if (wants_state) {
                const AllocResult r = detail::with_relief(
                    [&] {
                        const AllocResult got = alloc.alloc_state(std::span<StateId>(&d.state, 1));
                        if (!got) d.state = StateId{};  // as for FULL: nothing unowned while `relieve` runs
                        return got;
                    },
                    relieve);
                if (!r) {
                    ticket.fail(r.shortfall, r.missing);
                    return ticket;
                }
            }
        }
    } catch (...) {
        ticket.rollback();
        throw;
    }
    return ticket;
}

}  // namespace unikv

#pragma once
// Definitions of `CacheCore` (cache.hpp): load-back, write-through, eviction with write-back, retraction.

#include <algorithm>
#include <utility>

#include <unikv/detail/tree/held_lock.hpp>

namespace unikv::detail::cache {

// ---- load-back -------------------------------------------------------------------------------------------

template <class P>
void CacheCore<P>::copy_plan(std::span<const LoadBackStep> plan) {
    plan_.assign(plan.begin(), plan.end());
    plan_under_.clear();
    for (Component c : all_components) plan_host_[c].clear();
    for (const LoadBackStep& s : plan) {
        plan_host_[s.component].insert(plan_host_[s.component].end(), s.host.begin(), s.host.end());
        plan_under_.insert(plan_under_.end(), s.full_pages.begin(), s.full_pages.end());
    }
    // Re-point the steps at the copies (the buffers are filled: no reallocation below).
    per_component<std::size_t> at{};
    std::size_t under = 0;
    for (LoadBackStep& s : plan_) {
        s.host = std::span<const HostPage>(plan_host_[s.component]).subspan(at[s.component], s.host.size());
        at[s.component] += s.host.size();
        s.full_pages = std::span<const VirtualPage>(plan_under_).subspan(under, s.full_pages.size());
        under += s.full_pages.size();
    }
}

template <class P>
LoadBackStart CacheCore<P>::load_back(NodeRef node) {
    // Released on every way out, a throw included, unless the queued load takes them.
    detail::held_lock<tree_type> host(tree_, tree_.lock(node, {.tier = Tier::host}));
    detail::held_lock<tree_type> device(tree_, tree_.lock(node, {.tier = Tier::device}));
    return load_back(node, host.receipt(), device.receipt());
}

template <class P>
LoadBackStart CacheCore<P>::load_back(NodeRef node, LockReceipt& host, LockReceipt& device) {
    const auto pins = [&](const LockReceipt& r, Tier tier) {
        if (r.empty() || r.node() != node || r.tier() != tier) return false;
        for (const Component c : all_components) {
            if (tree_type::components::mask.has(c) && !r.holds(c)) return false;
        }
        return true;
    };
    UNIKV_EXPECTS(pins(host, Tier::host) && pins(device, Tier::device), "load_back: the receipts handed over must ",
                  "lock the node itself, a host-tier and a device-tier lock of every component (lock(node, {.tier ",
                  "= ...}) with the default components)");
    copy_plan(tree_.load_back_plan(node));
    if (plan_.empty()) return {.status = LoadBackStart::Status::device_hit};
    if (swa_bound_by_load(plan_under_)) {  // a second load would bind over the first one's rows
        return {.status = LoadBackStart::Status::loading};
    }
    const auto relief = [&](const auto& r) {  // an AllocResult or a ReserveResult
        return relieve({.shortfall = r.shortfall, .component = r.component, .pages_short = r.pages_short});
    };
    LoadBackTicket ticket = prepare_load_back(alloc_, std::span<const LoadBackStep>(plan_), relief);
    // A failed ticket holds nothing; a successful one is committed below, or rolled back if queueing throws.
    if (!ticket) return {.status = LoadBackStart::Status::short_of_pages, .failure = ticket.failure()};
    Loading load{.id = next_load_, .node = node, .device = {}, .host = {}, .steps = {}, .dest = {}, .swa_under = {}};
    try {
        const LoadBackDestinations& d = ticket.destinations();
        load.steps.reserve(plan_.size());
        std::uint32_t under = 0;
        for (std::size_t i = 0; i < plan_.size(); ++i) {
            const LoadBackStep& s = plan_[i];
            load.steps.push_back({.node = s.node,
                                  .component = s.component,
                                  .start = s.start,
                                  .full_offset = d.full_offset[i],
                                  .under_offset = under,
                                  .pages = static_cast<std::uint32_t>(s.host.size()),
                                  .resident = !s.full_pages.empty()});
            under += static_cast<std::uint32_t>(s.full_pages.size());
        }
        load.swa_under = plan_under_;
        TransferRequest request{.full = d.full, .full_host = plan_host_[Component::full]};
        if (d.swa) {
            request.swa_reserved = d.swa.pages();
            request.swa_host = plan_host_[Component::swa];
        }
        if (d.state.is_valid()) {
            request.mamba = std::span<const StateId>(&d.state, 1);
            request.mamba_host = plan_host_[Component::mamba];
        }
        loads_.reserve(loads_.size() + 1);  // nothing below throws once the load is queued
        ctl_.queue_load(alloc_, request, {.kind = CacheTag::Kind::load, .id = load.id});
    } catch (...) {
        ticket.rollback();  // nothing was queued: the allocations go back (a throw is no drop)
        throw;
    }
    load.dest = ticket.commit();
    load.device = std::move(device);
    load.host = std::move(host);
    loads_.push_back(std::move(load));
    return {.status = LoadBackStart::Status::queued, .id = next_load_++};
}

// The tree commits a load at its ack, so until then a node being loaded still looks SWA-evicted to the next
// match and the next commit.
template <class P>
bool CacheCore<P>::swa_bound_by_load(std::span<const VirtualPage> pages) {
    if constexpr (allocator_type::has_swa) {
        if (loads_.empty() || pages.empty()) return false;
        bound_.resize(pages.size());
        alloc_.translate_swa(pages, std::span<PhysicalPage>(bound_));
        return std::any_of(bound_.begin(), bound_.end(), [](PhysicalPage p) { return p.value() != 0; });
    } else {
        return false;
    }
}

template <class P>
void CacheCore<P>::release(Loading& load) noexcept {
    // FULL pages free the SWA rows bound under them; SWA rows bound under resident FULL pages go alone.
    if (!load.dest.full.empty()) alloc_.free(load.dest.full);
    if constexpr (allocator_type::has_swa) {
        if (!load.swa_under.empty()) alloc_.free_swa(load.swa_under);
    }
    if constexpr (allocator_type::has_mamba) {
        if (load.dest.state.is_valid()) alloc_.free_state(std::span<const StateId>(&load.dest.state, 1));
    }
}

// The tree may have changed under the load while its copy ran: a match or an insert split one of its nodes (the
// lower part keeps the node's ref, the upper part is new), or another load or an insert put some of its data on
// device. So the commit follows the tree's plan of the node now: each step takes the slice of this load's
// destinations at its token positions, a step this load did not copy is left alone, and every destination no
// step took is freed. SWA rows count as committed only where they are bound under the node's FULL pages now.
template <class P>
void CacheCore<P>::commit(Loading& load) {
    const std::int32_t page = tree_.config().page_size.tokens;
    const std::size_t full_count = load.dest.full.size();
    taken_.assign(full_count + load.swa_under.size(), 0);  // destination FULL pages, then `swa_under`
    constexpr std::uint8_t swa_committed = 3;  // a FULL destination whose SWA rows the tree took too
    bool state_taken = false;
    const auto all_taken = [&](std::size_t from, std::size_t n) {
        return std::all_of(taken_.begin() + static_cast<std::ptrdiff_t>(from),
                           taken_.begin() + static_cast<std::ptrdiff_t>(from + n), [](std::uint8_t t) { return t != 0; });
    };
    for (const LoadBackStep& now : tree_.load_back_plan(load.node)) {  // valid across commit_load_back
        const auto covers = [&](const Step& s) {
            if (s.component != now.component) return false;
            if (s.component == Component::mamba) return s.node == now.node;  // a split leaves the state below
            return s.start <= now.start &&
                   now.start + now.length <= s.start + static_cast<std::int32_t>(s.pages) * page;
        };
        const auto from = std::find_if(load.steps.begin(), load.steps.end(), covers);
        if (from == load.steps.end()) continue;  // this load did not copy it
        const auto skip = static_cast<std::size_t>((now.start - from->start) / page);
        const auto n = static_cast<std::size_t>(now.length / page);
        LoadedValue value{};
        if (now.component == Component::full) {
            const std::size_t at = from->full_offset + skip;
            value.pages = std::span<const VirtualPage>(load.dest.full).subspan(at, n);
            std::fill_n(taken_.begin() + static_cast<std::ptrdiff_t>(at), n, std::uint8_t{1});
        } else if (now.component == Component::swa) {
            if (from->resident) {
                // Bound under resident FULL pages: they must still be the node's.
                const std::size_t at = from->under_offset + skip;
                if (!std::equal(now.full_pages.begin(), now.full_pages.end(),
                                load.swa_under.begin() + static_cast<std::ptrdiff_t>(at))) {
                    continue;
                }
                std::fill_n(taken_.begin() + static_cast<std::ptrdiff_t>(full_count + at), n, std::uint8_t{1});
            } else {
                // Bound under this load's FULL pages of the node's range.
                const auto full = std::find_if(load.steps.begin(), load.steps.end(), [&](const Step& s) {
                    return s.component == Component::full && s.start <= now.start &&
                           now.start + now.length <= s.start + static_cast<std::int32_t>(s.pages) * page;
                });
                if (full == load.steps.end()) continue;
                const std::size_t at = full->full_offset + static_cast<std::size_t>((now.start - full->start) / page);
                if (!now.full_pages.empty()) {
                    // The node's FULL rows came to the device another way meanwhile (an earlier load, an insert):
                    // move the loaded SWA rows under its pages (a page-table write); the FULL pages go below.
                    // A later load in flight may have bound its own SWA rows there: it commits them, these go.
                    if (swa_bound_by_load(now.full_pages)) continue;
                    if constexpr (allocator_type::has_swa) {
                        alloc_.transfer_swa(now.full_pages, std::span<const VirtualPage>(load.dest.full).subspan(at, n));
                    }
                } else if (!all_taken(at, n)) {
                    continue;
                } else {
                    std::fill_n(taken_.begin() + static_cast<std::ptrdiff_t>(at), n, swa_committed);
                }
            }
        } else {
            value.state = load.dest.state;
            state_taken = true;
        }
        tree_.commit_load_back(now.node, now.component, value);
    }
    // What no step took: FULL pages go with the SWA rows bound under them; SWA rows under resident pages alone.
    spare_.clear();
    for (std::size_t i = 0; i < full_count; ++i) {
        if (taken_[i] == 0) spare_.push_back(load.dest.full[i]);
    }
    if (!spare_.empty()) alloc_.free(spare_);
    if constexpr (allocator_type::has_swa) {
        spare_.clear();
        for (std::size_t i = 0; i < load.swa_under.size(); ++i) {
            if (taken_[full_count + i] == 0) spare_.push_back(load.swa_under[i]);
        }
        if (!spare_.empty()) alloc_.free_swa(spare_);
        // SWA rows this load bound under FULL pages the tree took, where no SWA step took them: a split moved
        // the window's first node past them, so the tree keeps those pages SWA-evicted and the rows must go.
        spare_.clear();
        for (const Step& s : load.steps) {
            if (s.component != Component::swa || s.resident) continue;
            const auto full = std::find_if(load.steps.begin(), load.steps.end(), [&](const Step& f) {
                return f.component == Component::full && f.start <= s.start &&
                       s.start + static_cast<std::int32_t>(s.pages) * page <= f.start + static_cast<std::int32_t>(f.pages) * page;
            });
            UNIKV_ASSERT(full != load.steps.end());  // a non-resident SWA step binds under this load's FULL pages
            const std::size_t at = full->full_offset + static_cast<std::size_t>((s.start - full->start) / page);
            for (std::size_t k = at; k < at + s.pages; ++k) {
                if (taken_[k] == 1) spare_.push_back(load.dest.full[k]);
            }
        }
        if (!spare_.empty()) alloc_.free_swa(spare_);
    }
    if constexpr (allocator_type::has_mamba) {
        if (!state_taken && load.dest.state.is_valid()) alloc_.free_state(std::span<const StateId>(&load.dest.state, 1));
    }
}

template <class P>
std::span<const LoadDone> CacheCore<P>::loading_check() {
    // Every ack is marked before any load is finished, so a commit that throws loses none.
    for (const auto& ack : ctl_.loading_check()) {
        const auto it =
            std::find_if(loads_.begin(), loads_.end(), [&](const Loading& l) { return l.id == ack.tag.id; });
        UNIKV_ASSERT(it != loads_.end());
        it->acked = true;
        it->succeeded = ack.succeeded;
    }
    for (std::size_t i = 0; i < loads_.size();) {
        if (!loads_[i].acked) {
            ++i;
            continue;
        }
        Loading load = std::move(loads_[i]);  // forgotten whatever happens below
        loads_.erase(loads_.begin() + static_cast<std::ptrdiff_t>(i));
        const detail::held_lock<tree_type> host(tree_, std::move(load.host));
        const detail::held_lock<tree_type> device(tree_, std::move(load.device));
        if (load.succeeded) {
            commit(load);
        } else {
            release(load);
        }
        load_acked_.push_back({.id = load.id, .node = load.node, .committed = load.succeeded});
    }
    done_.swap(load_acked_);
    load_acked_.clear();
    return done_;
}

template <class P>
TransferRequest CacheCore<P>::d2h(const HostActions& work, const TreeAction& a, std::span<const HostPage> host) {
    // Member by member: nvcc's front end rejects designated initializers naming the Mamba members here.
    TransferRequest copy{};
    if (a.component == Component::full) {
        copy.full = work.pages(a);
        copy.full_host = host;
    } else if (a.component == Component::swa) {
        copy.swa = work.pages(a);
        copy.swa_host = host;
    } else {
        copy.mamba = work.states(a);
        copy.mamba_host = host;
    }
    return copy;
}

// ---- write-through ---------------------------------------------------------------------------------------

template <class P>
bool CacheCore<P>::write_through(const HostActions& work, const TreeAction& a) {
    const Component c = a.component;
    // The lock first: nothing is allocated yet if it throws, and the rows stay put while host room is made.
    detail::held_lock<tree_type> device(
        tree_, tree_.lock(a.node, {.tier = Tier::device, .components = ComponentMask::of(Component::full).with(c)}));
    write_host_.resize(work.copy_pages(a));
    if (!host_room(c, write_host_)) {
        tree_.skip_write_through(a.node, c);
        return false;
    }
    writes_.reserve(writes_.size() + 1);  // the record below must not throw once the copy is queued
    try {
        ctl_.queue_write(alloc_, d2h(work, a, write_host_),
                         {.kind = CacheTag::Kind::write_through, .id = next_write_});
    } catch (...) {
        host_.free(c, write_host_);
        throw;
    }
    // Queued: the record holds the lock until the ack, whatever throws below (the copy reads the rows).
    writes_.push_back({.id = next_write_++, .node = a.node, .component = c, .device = device.release()});
    try {
        tree_.set_host(a.node, c, write_host_);
    } catch (...) {
        // The copy still writes the pages: they are freed at its ack unless the tree took them (cold path).
        Writing& w = writes_.back();
        w.hosted = !tree_.node_info(a.node).host[c].empty();
        if (!w.hosted) w.orphan.assign(write_host_.begin(), write_host_.end());
        throw;
    }
    writes_.back().hosted = true;
    return true;
}

template <class P>
void CacheCore<P>::mark_writes(std::span<const typename controller_type::ack_type> acks) noexcept {
    std::size_t k = 0;
    while (k < writes_.size() && writes_[k].acked) ++k;
    for (const auto& ack : acks) {
        if (ack.tag.kind != CacheTag::Kind::write_through) continue;
        UNIKV_ASSERT(k < writes_.size());
        Writing& w = writes_[k++];
        UNIKV_ASSERT(w.id == ack.tag.id);
        w.acked = true;
        w.succeeded = ack.succeeded;
    }
}

template <class P>
void CacheCore<P>::finish_writes() {
    std::size_t k = 0;
    const auto forget = [&] { writes_.erase(writes_.begin(), writes_.begin() + static_cast<std::ptrdiff_t>(k)); };
    try {
        for (; k < writes_.size() && writes_[k].acked; ++k) {
            Writing& w = writes_[k];
            if (!w.succeeded && w.hosted && !w.dropped) {
                // Before the unlock: the host copy never held the rows, and they must not be evicted first.
                EvictResult dropped = tree_.drop_host(w.node, w.component);
                w.dropped = true;
                run_actions(dropped);
            }
            if (!w.orphan.empty()) {
                host_.free(w.component, w.orphan);
                w.orphan.clear();
            }
            write_acked_.push_back(
                {.id = w.id, .node = w.node, .component = w.component, .committed = w.succeeded && w.hosted});
            tree_.unlock(std::move(w.device));  // last: a retry after a throw above still holds the lock
        }
    } catch (...) {
        forget();
        throw;
    }
    forget();
}

template <class P>
std::span<const WriteDone> CacheCore<P>::check_writes() {
    UNIKV_EXPECTS(open_backups_ == 0, "writing_check: an eviction run with ", open_backups_,
                  " backups is open; finish_evict it first");
    mark_writes(ctl_.writing_check());
    finish_writes();
    write_done_.swap(write_acked_);
    write_acked_.clear();
    return write_done_;
}

template <class P>
std::span<const WriteDone> CacheCore<P>::writing_check() {
    const std::span<const WriteDone> acks = check_writes();
    if (settled_.empty()) [[likely]] return acks;
    settled_.insert(settled_.end(), acks.begin(), acks.end());
    reported_.swap(settled_);
    settled_.clear();
    return reported_;
}

template <class P>
void CacheCore<P>::settle_writes() {
    if (writes_in_flight() == 0) return;
    (void)start_writing();
    ctl_.stream().synchronize();
    const std::span<const WriteDone> acks = check_writes();
    settled_.insert(settled_.end(), acks.begin(), acks.end());
}

// ---- eviction --------------------------------------------------------------------------------------------

template <class P>
typename CacheCore<P>::WriteBackRun CacheCore<P>::start_evict(Component component, std::int64_t amount) {
    const EvictBackups mode = backs_up_on_evict(host_writes_) ? EvictBackups::on : EvictBackups::off;
    EvictResult result = tree_.evict(component, amount, {.write_back = mode});
    WriteBackRun run(exec_.execute(alloc_, result));
    run.freed_ = result.device_freed;
    free_host(run.work_);  // first: the room it gives back may take a backup
    for (const TreeAction& a : run.work_.actions()) {
        if (a.kind != ActionKind::backup) continue;
        typename WriteBackRun::Backup& b = run.backups_.emplace_back();
        b.node = a.node;
        b.component = a.component;
        b.host.resize(run.work_.copy_pages(a));
        const HostRequest request{.component = a.component, .out = b.host};
        if (!host_.alloc(std::span(&request, 1))) {
            b.host.clear();  // no room: recorded as no copy
            continue;
        }
        ctl_.queue_write(alloc_, d2h(run.work_, a, b.host),
                         {.kind = CacheTag::Kind::write_back, .id = run.backups_.size() - 1});
        ++run.copies_;
    }
    if (run.copies_ > 0) (void)ctl_.start_writing(alloc_, host_);
    open_backups_ = run.copies_;
    return run;
}

template <class P>
Eviction CacheCore<P>::finish_evict(WriteBackRun&& run) {
    WriteBackRun done = std::move(run);
    Eviction out{.freed = done.freed_};
    open_backups_ = 0;
    // Only a write-back policy asks for backups, and it queues no write-throughs: the drain meets backups alone.
    if (backs_up_on_evict(host_writes_)) {
        if (done.copies_ > 0) {
            for (const auto& ack : ctl_.drain_writes()) {
                UNIKV_ASSERT(ack.tag.kind == CacheTag::Kind::write_back);
                if (ack.succeeded) continue;
                typename WriteBackRun::Backup& b = done.backups_[static_cast<std::size_t>(ack.tag.id)];
                host_.free(b.component, b.host);  // the copy failed: it must not become a host value
                b.host.clear();
            }
        }
    }
    // The copies are done: the rows they read can go, and first, since what `finish_backup` frees may include
    // them (a failed FULL backup drops the node whose SWA rows the eviction already gave up).
    exec_.complete(alloc_, std::move(done.work_));
    for (typename WriteBackRun::Backup& b : done.backups_) {
        ++(b.host.empty() ? out.dropped : out.backed_up);
        EvictResult follow = tree_.finish_backup(b.node, b.component, b.host);
        for (Component c : all_components) out.freed[c] += follow.device_freed[c];
        run_actions(follow);
    }
    return out;
}

template <class P>
std::int64_t CacheCore<P>::evict_host(Component component, std::int64_t amount) {
    EvictResult result = tree_.evict_host(component, amount);
    const std::int64_t freed = result.host_freed_of(component);
    run_actions(result);
    return freed;
}

// ---- retraction ------------------------------------------------------------------------------------------

template <class P>
RetractionRequest CacheCore<P>::retraction_of(const RequestRows& rows) const {
    return RetractionRequest{
        .own = rows.own, .prefix_tokens = rows.prefix_tokens, .seq_len = rows.seq_len, .window_tokens = window_tokens()};
}

template <class P>
RetractionBackup CacheCore<P>::backup(const RequestRows& request) {
    static_assert(check_cache_retraction<P>());
    if constexpr (!can_retract) {
        return RetractionBackup{};
    } else {
        settle_writes();
        return retract(alloc_, host_, ctl_, retraction_of(request),
                       [this](const HostAllocResult& r) { return relieve_host(r); });
    }
}

template <class P>
bool CacheCore<P>::restore(RetractionBackup& backup, const RequestRows& fresh) {
    static_assert(check_cache_retraction<P>());
    if constexpr (!can_retract) {
        return false;
    } else {
        return unikv::restore(alloc_, host_, ctl_, backup, retraction_of(fresh));
    }
}


}  // namespace unikv::detail::cache

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
    if (std::any_of(plan_.begin(), plan_.end(), [](const LoadBackStep& s) { return s.loading; })) {
        return {.status = LoadBackStart::Status::loading};  // an earlier load copies part of it: wait for its ack
    }
    const auto relief = [&](const auto& r) {  // an AllocResult or a ReserveResult
        return relieve({.shortfall = r.shortfall, .missing = r.missing});
    };
    LoadBackTicket ticket = prepare_load_back(alloc_, std::span<const LoadBackStep>(plan_), relief);
    // A failed ticket holds nothing; a successful one is committed below, or rolled back if queueing throws.
    if (!ticket) return {.status = LoadBackStart::Status::short_of_pages, .failure = ticket.failure()};
    const LoadBackDestinations& d = ticket.destinations();
    // The tree records the load before it is queued (from `plan_`, or afresh where the relief above split the
    // path) and forgets it again if queueing throws; the ticket then gives the destinations back.
    bool recorded = false;
    try {
        tree_.begin_load(node, next_load_, {.pages = d.full, .state = d.state}, plan_);
        recorded = true;
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
        ctl_.queue_load(alloc_, request, {.kind = CacheTag::Kind::load, .id = next_load_});
    } catch (...) {
        if (recorded) {  // hands back the ticket's own destinations (the rollback frees them); allocates nothing
            (void)tree_.finish_load(next_load_, false, [](auto, auto) {});
        }
        ticket.rollback();
        throw;
    }
    LoadBackDestinations dest = ticket.commit();
    alloc_.hold(dest.full);  // the tree's from now on: what it does not install comes back as leftovers
    if constexpr (has_mamba) {
        if (dest.state.is_valid()) alloc_.hold(std::span<const StateId>(&dest.state, 1));
    }
    Ticket& t = loads_.emplace_back();
    t.tag = {.kind = CacheTag::Kind::load, .id = next_load_};
    t.node = node;
    t.device = std::move(device);
    t.host = std::move(host);
    (void)(t.swa = std::move(dest.swa));  // nvcc: the assignment returns a [[nodiscard]] type
    return {.status = LoadBackStart::Status::queued, .id = next_load_++};
}

template <class P>
void CacheCore<P>::free_leftovers(const LoadLeftovers& left) {
    if (!left.full.empty()) alloc_.free(left.full, Holder::tree);
    if constexpr (allocator_type::has_swa) {
        if (!left.swa.empty()) alloc_.free_swa(left.swa, Holder::tree);
    }
    if constexpr (allocator_type::has_mamba) {
        if (left.state.is_valid()) alloc_.free_state(std::span<const StateId>(&left.state, 1), Holder::tree);
    }
}

template <class P>
std::span<const LoadDone> CacheCore<P>::loading_check() {
    // Every ack is marked before any load is finished, so a finish that throws loses none.
    mark(loads_, ctl_.loading_check());
    for (std::size_t i = 0; i < loads_.size();) {
        if (!loads_[i].acked) {
            ++i;
            continue;
        }
        load_acked_.reserve(load_acked_.size() + 1);
        finish(loads_[i]);  // a throw keeps the ticket: its finish is idempotent, the next check goes on
        load_acked_.push_back({.id = loads_[i].tag.id, .node = loads_[i].node, .committed = loads_[i].succeeded});
        loads_.erase(loads_.begin() + static_cast<std::ptrdiff_t>(i));
    }
    done_.swap(load_acked_);
    load_acked_.clear();
    return done_;
}

// ---- tickets ---------------------------------------------------------------------------------------------

template <class P>
void CacheCore<P>::mark(std::vector<Ticket>& lane, std::span<const typename controller_type::ack_type> acks) noexcept {
    for (const auto& ack : acks) {
        const auto it = std::find_if(lane.begin(), lane.end(), [&](const Ticket& t) {
            return !t.acked && t.tag.kind == ack.tag.kind && t.tag.id == ack.tag.id;
        });
        UNIKV_ASSERT(it != lane.end());
        it->acked = true;
        it->succeeded = ack.succeeded;
    }
}

template <class P>
void CacheCore<P>::finish(Ticket& t) {
    UNIKV_ASSERT(t.acked);
    switch (t.tag.kind) {
    case CacheTag::Kind::load:
        // The tree installs what is still missing (idempotent across a throw) and hands back the rest. Once it
        // has, a throw while freeing (a broken allocator invariant) leaks the rest but finishes the ticket.
        if (!t.installed) {
            const LoadLeftovers left = tree_.finish_load(t.tag.id, t.succeeded, [&](auto kept, auto incoming) {
                if constexpr (allocator_type::has_swa) alloc_.transfer_swa(kept, incoming);
            });
            t.installed = true;
            free_leftovers(left);
        }
        break;
    case CacheTag::Kind::write_through:
        if (!t.succeeded && t.hosted && !t.undone) {
            // Before the unlock: the host copy never held the rows, and they must not be evicted first.
            EvictResult dropped = tree_.drop_host(t.node, t.component);
            t.undone = true;
            run_actions(dropped);
        }
        if (!t.host_pages.empty()) {  // a `set_host` that threw before the tree took them
            host_.free(t.component, t.host_pages);
            t.host_pages.clear();
        }
        if (t.succeeded && t.hosted && !t.stored) {  // the host copy holds the rows now: the store gets them too
            t.stored = true;
            if (host_mode_ == HostMode::buffer_only) {
                stage_for_store(t);
            } else {
                store_host_copy(t.node, t.component);
            }
        }
        break;
    case CacheTag::Kind::write_back:
        if (!t.succeeded && !t.host_pages.empty()) {
            host_.free(t.component, t.host_pages);  // the copy failed: it must not become a host value
            t.host_pages.clear();
        }
        return;  // recorded with the tree by `finish_evict`, once the rows the copies read are freed
    case CacheTag::Kind::retraction:
        UNIKV_ASSERT(false);  // drained within `backup` / `restore`: never a ticket
        return;
    case CacheTag::Kind::store_put:
    case CacheTag::Kind::prefetch:
        UNIKV_ASSERT(false);  // the store acknowledges these: `finish_store`
        return;
    }
    // Last: a retry after a throw above still holds the locks.
    if (!t.device.empty()) tree_.unlock(std::move(t.device));
    if (!t.host.empty()) tree_.unlock(std::move(t.host));
    if (t.tag.kind == CacheTag::Kind::load && t.succeeded && host_mode_ == HostMode::buffer_only) drop_staged(t.node);
}

template <class P>
void CacheCore<P>::abandon(Ticket& t) noexcept {
    if (t.swa && !t.swa.submitted()) alloc_.cancel(std::move(t.swa));
    if (!t.device.empty()) tree_.unlock(std::move(t.device));
    if (!t.host.empty()) tree_.unlock(std::move(t.host));
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
    // Queued: the ticket holds the lock until the ack, whatever throws below (the copy reads the rows).
    Ticket& t = writes_.emplace_back();
    t.tag = {.kind = CacheTag::Kind::write_through, .id = next_write_++};
    t.node = a.node;
    t.component = c;
    t.device = device.release();
    try {
        tree_.set_host(a.node, c, write_host_);
    } catch (...) {
        // The copy still writes the pages: they are freed at its ack unless the tree took them (cold path).
        Ticket& w = writes_.back();
        w.hosted = !tree_.node_info(a.node).host[c].empty();
        if (!w.hosted) w.host_pages.assign(write_host_.begin(), write_host_.end());
        throw;
    }
    writes_.back().hosted = true;
    return true;
}

template <class P>
void CacheCore<P>::finish_writes() {
    std::size_t k = 0;
    const auto forget = [&] { writes_.erase(writes_.begin(), writes_.begin() + static_cast<std::ptrdiff_t>(k)); };
    try {
        for (; k < writes_.size() && writes_[k].acked; ++k) {
            Ticket& w = writes_[k];
            finish(w);
            write_acked_.push_back(
                {.id = w.tag.id, .node = w.node, .component = w.component, .committed = w.succeeded && w.hosted});
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
    mark(writes_, ctl_.writing_check());
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
typename CacheCore<P>::WriteBackRun CacheCore<P>::start_evict(Pages pages) {
    const EvictBackups mode = backs_up_on_evict(host_writes_) ? EvictBackups::on : EvictBackups::off;
    EvictResult result = tree_.evict(pages.component, tree_units(pages), {.write_back = mode});
    WriteBackRun run(exec_.execute(alloc_, result));
    run.pages_freed_ = pages_of(result.device_freed);
    free_host(run.work_);  // first: the room it gives back may take a backup
    // Every ticket is in `writes_` before its copy is queued, so a throw leaves none unrecorded; the run is open
    // (no `writing_check`) as long as any backup waits to be recorded by `finish_evict`.
    const auto backups = static_cast<std::size_t>(std::count_if(
        run.work_.actions().begin(), run.work_.actions().end(), [](const TreeAction& a) { return a.kind == ActionKind::backup; }));
    writes_.reserve(writes_.size() + backups);
    open_backups_ = backups;
    for (const TreeAction& a : run.work_.actions()) {
        if (a.kind != ActionKind::backup) continue;
        Ticket& b = writes_.emplace_back();
        b.tag = {.kind = CacheTag::Kind::write_back, .id = writes_.size()};
        b.acked = true;  // until its copy is queued: a throw below leaves nothing to wait for
        b.node = a.node;
        b.component = a.component;
        b.host_pages.resize(run.work_.copy_pages(a));
        const HostRequest request{.component = a.component, .out = b.host_pages};
        bool room = false;
        try {
            room = static_cast<bool>(host_.alloc(std::span(&request, 1)));
        } catch (...) {
            b.host_pages.clear();  // holds no page it does not own
            throw;
        }
        if (!room) {
            b.host_pages.clear();  // no room: recorded as no copy
            continue;
        }
        try {
            ctl_.queue_write(alloc_, d2h(run.work_, a, b.host_pages), b.tag);
        } catch (...) {
            host_.free(a.component, b.host_pages);  // not queued: recorded as no copy
            b.host_pages.clear();
            throw;
        }
        b.acked = false;
        ++run.copies_;
    }
    if (run.copies_ > 0) (void)ctl_.start_writing(alloc_, host_);
    return run;
}

template <class P>
Eviction CacheCore<P>::finish_evict(WriteBackRun&& run) {
    WriteBackRun done = std::move(run);
    Eviction out{.pages_freed = done.pages_freed_};
    open_backups_ = 0;
    // Only a write-back policy asks for backups, and it queues no write-throughs: the lane holds backups alone.
    const bool backups_run = backs_up_on_evict(host_writes_);
    if (backups_run) {
        if (done.copies_ > 0) mark(writes_, ctl_.drain_writes());
        for (Ticket& b : writes_) finish(b);  // a failed copy's host pages go: it must not become a host value
    }
    // The copies are done: the rows they read can go, and first, since what `finish_backup` frees may include
    // them (a failed FULL backup drops the node whose SWA rows the eviction already gave up).
    exec_.complete(alloc_, std::move(done.work_));
    if (!backups_run) return out;
    std::vector<Ticket> backups = std::move(writes_);  // forgotten whatever throws below (not recovered)
    writes_.clear();
    for (Ticket& b : backups) {
        ++(b.host_pages.empty() ? out.dropped : out.backed_up);
        EvictResult follow = tree_.finish_backup(b.node, b.component, b.host_pages);
        const per_component<std::int64_t> freed = pages_of(follow.device_freed);
        for (Component c : all_components) out.pages_freed[c] += freed[c];
        run_actions(follow);
    }
    // Every backup is recorded (the tree takes calls again): the new host copies go to the store.
    if constexpr (has_storage) {
        for (const Ticket& b : backups)
            if (!b.host_pages.empty()) store_host_copy(b.node, b.component);
    }
    return out;
}

template <class P>
Pages CacheCore<P>::evict_host(Pages pages) {
    EvictResult result = tree_.evict_host(pages.component, tree_units(pages));
    const Pages freed{pages.component, pages_of(result.host_freed)[pages.component]};
    run_actions(result);
    return freed;
}

// ---- retraction ------------------------------------------------------------------------------------------

template <class P>
RetractionRequest CacheCore<P>::retraction_of(const RequestRows& rows) const {
    return RetractionRequest{.own = rows.own,
                             .prefix_tokens = rows.prefix_tokens,
                             .seq_len = rows.seq_len,
                             .window_tokens = rows.window_tokens > 0 ? rows.window_tokens : window_tokens()};
}

template <class P>
RetractionBackup CacheCore<P>::backup(const RequestRows& request) {
    static_assert(check_cache_retraction<P>());
    if constexpr (!can_retract) {
        return RetractionBackup{};
    } else {
        settle_writes();
        return unikv::retract(alloc_, host_, ctl_, retraction_of(request),
                       [this](const HostAllocResult& r) { return relieve_host(r); },
                       CacheTag{.kind = CacheTag::Kind::retraction, .id = 0});
    }
}

template <class P>
bool CacheCore<P>::restore(RetractionBackup& backup, const RequestRows& fresh) {
    static_assert(check_cache_retraction<P>());
    if constexpr (!can_retract) {
        return false;
    } else {
        return unikv::restore(alloc_, host_, ctl_, backup, retraction_of(fresh),
                              CacheTag{.kind = CacheTag::Kind::retraction, .id = 0});
    }
}


}  // namespace unikv::detail::cache

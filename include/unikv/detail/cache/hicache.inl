#pragma once
// Definitions of `HiCache` (cache/hicache.hpp).

#include <algorithm>

#include <unikv/detail/budget/capacity.hpp>
#include <unikv/detail/transfer/with_relief.hpp>
#include <unikv/detail/tree/held_lock.hpp>

namespace unikv {

template <class P>
HiCache<P>::HiCache(backend_type& backend, const ArenaConfig& arena, const HostConfig& host, const TreeConfig& tree,
                    stream_ref stream)
    : host_writes_(checked(host).write),
      host_mode_(host.mode),
      host_hits_(host.mode == HostMode::cache ? HostHits::include : HostHits::exclude),
      alloc_(backend, arena, stream),
      host_(backend, alloc_.spec(), host, stream),
      tree_(tree_config(tree, host_writes_)),
      ctl_(backend) {}

template <class P>
HiCache<P>::~HiCache() {
    // The tree goes with the cache: release the locks so they are not reported as dropped. Nothing is freed
    // here, and the controller (destroyed first) finishes the copies before the memory behind them goes. A load
    // still queued is never submitted: its reservation is cancelled, not dropped.
    for (Writing& w : writes_) tree_.unlock(std::move(w.device));
    for (Loading& l : loads_) {
        if (l.dest.swa && !l.dest.swa.submitted()) alloc_.cancel(std::move(l.dest.swa));
        tree_.unlock(std::move(l.device));
        tree_.unlock(std::move(l.host));
    }
}

template <class P>
const HostConfig& HiCache<P>::checked(const HostConfig& host) {
    const HostWrites& w = check_host_writes(host.write);
    if constexpr (is_no_host_tier_v<typename P::host_pools>) {
        UNIKV_EXPECTS(w.policy == WritePolicy::none, "HiCache: the write policy is ", write_policy_name(w.policy),
                      ", which copies device data to the host tier, but host_pools is NoHostTier; give "
                      "HostConfig::write = {.policy = WritePolicy::none} for a device-only cache, or give it host "
                      "pools (SeparateHostPools, PageEnvelopeHost<>)");
    }
    UNIKV_EXPECTS(host.mode == HostMode::cache || host.mode == HostMode::buffer_only, "HiCache: HostConfig::mode is ",
                  static_cast<unsigned>(host.mode), ", not a HostMode; use HostMode::cache or HostMode::buffer_only");
    UNIKV_EXPECTS(host.mode != HostMode::buffer_only || !allocator_type::has_mamba,
                  "HiCache: HostMode::buffer_only stages FULL and SWA pages for the storage tier, but the layout has "
                  "a Mamba pool, whose running states are not staged; use HostConfig::mode = HostMode::cache");
    return host;
}

template <class P>
TreeConfig HiCache<P>::tree_config(TreeConfig tree, const HostWrites& writes) {
    const std::uint32_t policy = write_through_threshold(writes);
    UNIKV_EXPECTS(tree.write_through_threshold == 0 || tree.write_through_threshold == policy,
                  "HiCache: TreeConfig::write_through_threshold is ", tree.write_through_threshold,
                  " but the write policy's is ", policy, "; leave it 0, the cache sets it from HostConfig::write");
    tree.write_through_threshold = policy;
    return tree;
}

template <class P>
CacheInsert HiCache<P>::insert(TokenKey key, const InsertValues& values) {
    InsertResult r = tree_.insert(key, values);
    CacheInsert out{.node = r.node, .prefix_length = r.prefix_length, .first_write = next_write_};
    HostActions work = exec_.execute(alloc_, r);
    free_host(work);
    const std::span<const TreeAction> actions = work.actions();
    std::size_t i = 0;
    try {
        for (; i < actions.size(); ++i) {
            const TreeAction& a = actions[i];
            UNIKV_ASSERT(a.kind != ActionKind::backup);  // insert never asks for a write-back
            if (a.kind != ActionKind::write_through) continue;
            ++(write_through(work, a) ? out.writes : out.skipped);
        }
    } catch (...) {
        // Nothing stays pending: a pending node could never be evicted. The write that threw may have got
        // past `set_host` (cold path: ask the tree; a write pending holds its node, so the handle is live).
        for (; i < actions.size(); ++i) {
            const TreeAction& a = actions[i];
            if (a.kind == ActionKind::write_through && tree_.contains(a.node) &&
                tree_.node_info(a.node).write_through_pending[a.component])
                tree_.skip_write_through(a.node, a.component);
        }
        exec_.complete(alloc_, std::move(work));
        throw;
    }
    exec_.complete(alloc_, std::move(work));
    return out;
}

template <class P>
template <class Result>
void HiCache<P>::run_actions(Result& result) {
    HostActions work = exec_.execute(alloc_, result);
    for (const TreeAction& a : work.actions()) {
        UNIKV_EXPECTS(a.kind == ActionKind::free_host, "HiCache: the tree asked for a ", to_string(a.component),
                      " copy outside an eviction or an insert");
    }
    free_host(work);
    exec_.complete(alloc_, std::move(work));
}

template <class P>
void HiCache<P>::free_host(const HostActions& work) {
    for (const TreeAction& a : work.actions()) {
        if (a.kind == ActionKind::free_host) host_.free(a.component, work.host_pages(a));
    }
}

template <class P>
TransferRequest HiCache<P>::d2h(const HostActions& work, const TreeAction& a, std::span<const HostPage> host) {
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
bool HiCache<P>::host_room(Component component, std::span<HostPage> out) {
    const HostRequest request{.component = component, .out = out};
    return static_cast<bool>(detail::with_relief([&] { return host_.alloc(std::span(&request, 1)); },
                                                 [&](const HostAllocResult& r) { return relieve_host(r); }));
}

template <class P>
bool HiCache<P>::write_through(const HostActions& work, const TreeAction& a) {
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
                         {.kind = HiCacheTag::Kind::write_through, .id = next_write_});
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
void HiCache<P>::mark_writes(std::span<const typename controller_type::ack_type> acks) noexcept {
    std::size_t k = 0;
    while (k < writes_.size() && writes_[k].acked) ++k;
    for (const auto& ack : acks) {
        if (ack.tag.kind != HiCacheTag::Kind::write_through) continue;
        UNIKV_ASSERT(k < writes_.size());
        Writing& w = writes_[k++];
        UNIKV_ASSERT(w.id == ack.tag.id);
        w.acked = true;
        w.succeeded = ack.succeeded;
    }
}

template <class P>
void HiCache<P>::finish_writes() {
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
std::span<const WriteDone> HiCache<P>::writing_check() {
    UNIKV_EXPECTS(open_backups_ == 0, "HiCache::writing_check: an eviction run with ", open_backups_,
                  " backups is open; finish_evict it first");
    mark_writes(ctl_.writing_check());
    finish_writes();
    write_done_.swap(write_acked_);
    write_acked_.clear();
    return write_done_;
}

// ---- load-back -------------------------------------------------------------------------------------------

template <class P>
void HiCache<P>::copy_plan(std::span<const LoadBackStep> plan) {
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
LoadBackStart HiCache<P>::load_back(NodeRef node) {
    // Released on every way out, a throw included, unless the queued load takes them.
    detail::held_lock<tree_type> host(tree_, tree_.lock(node, {.tier = Tier::host}));
    detail::held_lock<tree_type> device(tree_, tree_.lock(node, {.tier = Tier::device}));
    return load_back(node, host.receipt(), device.receipt());
}

template <class P>
LoadBackStart HiCache<P>::load_back(NodeRef node, LockReceipt& host, LockReceipt& device) {
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
        ctl_.queue_load(alloc_, request, {.kind = HiCacheTag::Kind::load, .id = load.id});
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
bool HiCache<P>::swa_bound_by_load(std::span<const VirtualPage> pages) {
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
void HiCache<P>::release(Loading& load) noexcept {
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
void HiCache<P>::commit(Loading& load) {
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
std::span<const LoadDone> HiCache<P>::loading_check() {
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

// ---- eviction --------------------------------------------------------------------------------------------

template <class P>
typename HiCache<P>::WriteBackRun HiCache<P>::start_evict(Component component, std::int64_t amount) {
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
                         {.kind = HiCacheTag::Kind::write_back, .id = run.backups_.size() - 1});
        ++run.copies_;
    }
    if (run.copies_ > 0) (void)ctl_.start_writing(alloc_, host_);
    open_backups_ = run.copies_;
    return run;
}

template <class P>
Eviction HiCache<P>::finish_evict(WriteBackRun&& run) {
    WriteBackRun done = std::move(run);
    Eviction out{.freed = done.freed_};
    open_backups_ = 0;
    // Only a write-back policy asks for backups, and it queues no write-throughs: the drain meets backups alone.
    if (backs_up_on_evict(host_writes_)) {
        if (done.copies_ > 0) {
            for (const auto& ack : ctl_.drain_writes()) {
                UNIKV_ASSERT(ack.tag.kind == HiCacheTag::Kind::write_back);
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
std::int64_t HiCache<P>::evict_host(Component component, std::int64_t amount) {
    EvictResult result = tree_.evict_host(component, amount);
    const std::int64_t freed = result.host_freed_of(component);
    run_actions(result);
    return freed;
}

// ---- relief ----------------------------------------------------------------------------------------------

template <class P>
bool HiCache<P>::relieve(const AllocResult& short_of, ComponentMask pools) {
    const ArenaSpec& spec = alloc_.spec();
    const auto missing_bytes = static_cast<std::int64_t>(spec[short_of.component].page_bytes) * short_of.pages_short;
    const auto evicted = [&](Component c) {
        if (!spec[c].present || tree_.evictable_size(c) == 0) return false;
        const auto page_bytes = static_cast<std::int64_t>(spec[c].page_bytes);
        const std::int64_t pages = (missing_bytes + page_bytes - 1) / page_bytes;
        make_backup_room(c, pages);
        const Eviction ev = evict(c, pages * page_size(c));
        return ev.freed[Component::full] + ev.freed[Component::swa] + ev.freed[Component::mamba] > 0;
    };
    if (evicted(short_of.component)) return true;
    if (short_of.shortfall != Shortfall::room) return false;
    for (const Component c : all_components) {
        if (c != short_of.component && pools.has(c) && evicted(c)) return true;
    }
    return false;
}

template <class P>
BudgetCheck HiCache<P>::reclaim(const CapacityDemand& d, ComponentMask pools) {
    const AllocResult r = detail::with_relief([&] { return alloc_.ensure_capacity(d); },
                                              [&](const AllocResult& short_of) { return relieve(short_of, pools); });
    if (r) return {};
    return BudgetCheck::refused(detail::refusal_of(capacity(), RefusalCause::no_room, r.component, r.pages_short));
}

template <class P>
bool HiCache<P>::relieve_host(const HostAllocResult& short_of) {
    if (short_of.shortfall != HostShortfall::capacity) return false;
    return evict_host(short_of.component, std::int64_t{short_of.pages_short} * page_size(short_of.component)) > 0;
}

// A FULL eviction backs up FULL pages and the SWA windows under them (at most as many pages), an SWA eviction
// SWA windows; a Mamba eviction's states are backed up when there is room. Locked host copies (a pinned host
// match among them) stay.
template <class P>
void HiCache<P>::make_backup_room(Component c, std::int64_t pages) {
    if (!backs_up_on_evict(host_writes_)) return;
    for (const Component k : {Component::full, Component::swa}) {
        if (!alloc_.spec()[k].present || c == Component::mamba || (k == Component::full && c != k)) continue;
        const std::int64_t missing = pages - host_.available(k);
        if (missing > 0) (void)evict_host(k, missing * page_size(k));
    }
}

// ---- inspection ------------------------------------------------------------------------------------------

template <class P>
std::vector<std::string> HiCache<P>::verify() const {
    std::vector<std::string> out = alloc_.verify();
    for (std::string& line : tree_.verify()) out.push_back("tree: " + std::move(line));
    for (std::string& line : host_.verify()) out.push_back("host: " + std::move(line));
    return out;
}

}  // namespace unikv

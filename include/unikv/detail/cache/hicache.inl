#pragma once
// Definitions of `HiCache` (cache/hicache.hpp).

#include <algorithm>

namespace unikv {

template <class P>
HiCache<P>::HiCache(backend_type& backend, const ArenaConfig& arena, const HostConfig& host, const TreeConfig& tree,
                    stream_ref stream)
    : alloc_(backend, arena, stream), host_(backend, alloc_.spec(), host, stream), tree_(tree), ctl_(backend) {}

template <class P>
CacheInsert HiCache<P>::insert(TokenKey key, const InsertValues& values) {
    InsertResult r = tree_.insert(key, values);
    const CacheInsert out{.node = r.node, .prefix_length = r.prefix_length};
    run_actions(r);
    return out;
}

template <class P>
template <class Result>
void HiCache<P>::run_actions(Result& result) {
    HostActions work = exec_.execute(alloc_, result);
    for (const TreeAction& a : work.actions()) {
        UNIKV_EXPECTS(a.kind == ActionKind::free_host, "HiCache: the tree asked for a ", to_string(a.component),
                      " backup outside an eviction (the write-through insert path is not built yet)");
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
    LockReceipt host = tree_.lock(node, {.tier = Tier::host});
    LockReceipt device = tree_.lock(node, {.tier = Tier::device});
    copy_plan(tree_.load_back_plan(node));
    if (plan_.empty()) {
        tree_.unlock(std::move(device));
        tree_.unlock(std::move(host));
        return {.status = LoadBackStart::Status::device_hit};
    }
    const std::int32_t page = tree_.config().page_size.tokens;
    const auto evict_shortfall = [&](Component c, std::int64_t short_pages) {
        (void)evict(c, c == Component::mamba ? short_pages : short_pages * page);
    };
    LoadBackTicket ticket = prepare_load_back(alloc_, std::span<const LoadBackStep>(plan_), evict_shortfall);
    if (!ticket) {
        tree_.unlock(std::move(device));
        tree_.unlock(std::move(host));
        return {.status = LoadBackStart::Status::short_of_pages, .failure = ticket.failure()};
    }
    const LoadBackDestinations& d = ticket.destinations();
    Loading load{.id = next_load_, .node = node, .device = {}, .host = {}, .steps = {}, .dest = {}, .swa_under = {}};
    load.steps.reserve(plan_.size());
    for (std::size_t i = 0; i < plan_.size(); ++i) {
        const LoadBackStep& s = plan_[i];
        load.steps.push_back({.node = s.node,
                              .component = s.component,
                              .full_offset = d.full_offset[i],
                              .pages = static_cast<std::uint32_t>(s.host.size())});
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
    try {
        ctl_.queue_load(alloc_, request, load.id);
    } catch (...) {
        tree_.unlock(std::move(device));
        tree_.unlock(std::move(host));
        throw;  // the ticket rolls back
    }
    load.dest = ticket.commit();
    load.device = std::move(device);
    load.host = std::move(host);
    loads_.push_back(std::move(load));
    return {.status = LoadBackStart::Status::queued, .id = next_load_++};
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

template <class P>
std::span<const LoadDone> HiCache<P>::loading_check() {
    done_.clear();
    for (const auto& ack : ctl_.loading_check()) {
        const auto it = std::find_if(loads_.begin(), loads_.end(), [&](const Loading& l) { return l.id == ack.tag; });
        UNIKV_ASSERT(it != loads_.end());
        Loading& load = *it;
        if (ack.succeeded) {
            for (const Step& s : load.steps) {
                LoadedValue value{};
                if (s.component == Component::full) {
                    value.pages = std::span<const VirtualPage>(load.dest.full).subspan(s.full_offset, s.pages);
                }
                if (s.component == Component::mamba) value.state = load.dest.state;
                tree_.commit_load_back(s.node, s.component, value);
            }
        } else {
            release(load);
        }
        tree_.unlock(std::move(load.device));
        tree_.unlock(std::move(load.host));
        done_.push_back({.id = load.id, .node = load.node, .committed = ack.succeeded});
        loads_.erase(it);
    }
    return done_;
}

// ---- eviction --------------------------------------------------------------------------------------------

template <class P>
typename HiCache<P>::WriteBackRun HiCache<P>::start_evict(Component component, std::int64_t amount) {
    constexpr EvictBackups mode = backs_up_on_evict_v<write_policy> ? EvictBackups::on : EvictBackups::off;
    EvictResult result = tree_.evict(component, amount, {.write_back = mode});
    WriteBackRun run(exec_.execute(alloc_, result));
    run.freed_ = result.device_freed;
    free_host(run.work_);  // first: the room it gives back may take a backup
    for (const TreeAction& a : run.work_.actions()) {
        if (a.kind != ActionKind::backup) continue;
        typename WriteBackRun::Backup& b = run.backups_.emplace_back();
        b.node = a.node;
        b.component = a.component;
        const bool mamba = a.component == Component::mamba;
        b.host.resize(mamba ? run.work_.states(a).size() : run.work_.pages(a).size());
        const HostRequest request{.component = a.component, .out = b.host};
        if (!host_.alloc(std::span(&request, 1))) {
            b.host.clear();  // no room: recorded as no copy
            continue;
        }
        TransferRequest copy{};
        if (a.component == Component::full) copy = {.full = run.work_.pages(a), .full_host = b.host};
        if (a.component == Component::swa) copy = {.swa = run.work_.pages(a), .swa_host = b.host};
        if (mamba) copy = {.mamba = run.work_.states(a), .mamba_host = b.host};
        ctl_.queue_write(alloc_, copy, run.backups_.size() - 1);
        ++run.copies_;
    }
    if (run.copies_ > 0) (void)ctl_.start_writing(alloc_, host_);
    return run;
}

template <class P>
Eviction HiCache<P>::finish_evict(WriteBackRun&& run) {
    WriteBackRun done = std::move(run);
    Eviction out{.freed = done.freed_};
    if (done.copies_ > 0) {
        for (const auto& ack : ctl_.drain_writes()) {
            typename WriteBackRun::Backup& b = done.backups_[static_cast<std::size_t>(ack.tag)];
            if (ack.succeeded) continue;
            host_.free(b.component, b.host);  // the copy failed: it must not become a host value
            b.host.clear();
        }
    }
    for (typename WriteBackRun::Backup& b : done.backups_) {
        ++(b.host.empty() ? out.dropped : out.backed_up);
        EvictResult follow = tree_.finish_backup(b.node, b.component, b.host);
        for (Component c : all_components) out.freed[c] += follow.device_freed[c];
        run_actions(follow);
    }
    exec_.complete(alloc_, std::move(done.work_));  // the copies are done: the rows they read can go
    return out;
}

template <class P>
std::int64_t HiCache<P>::evict_host(Component component, std::int64_t amount) {
    EvictResult result = tree_.evict_host(component, amount);
    const std::int64_t freed = result.host_freed_of(component);
    run_actions(result);
    return freed;
}

// ---- inspection ------------------------------------------------------------------------------------------

template <class P>
std::vector<std::string> HiCache<P>::verify() const {
    std::vector<std::string> out = alloc_.verify_byte_accounting();
    if constexpr (requires { tree_.check_invariants(); }) {  // the reference core is checked by comparison
        if (std::string broken = tree_.check_invariants(); !broken.empty()) out.push_back("tree: " + broken);
    }
    for (std::string& line : host_.verify()) out.push_back("host: " + std::move(line));
    return out;
}

}  // namespace unikv

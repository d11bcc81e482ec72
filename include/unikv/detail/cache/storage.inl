#pragma once
// Definitions of `CacheCore` (cache.hpp): the storage tier (attach, puts of host copies, prefetch, its tasks).

#include <algorithm>
#include <chrono>
#include <utility>

#include <unikv/storage/object_key.hpp>

namespace unikv::detail::cache {

template <class P>
void CacheCore<P>::attach_storage(storage_type& store, const StorageOptions& options)
    requires has_storage
{
    UNIKV_EXPECTS(storage_.store == nullptr, "attach_storage: a store is attached already; detach_storage first");
    UNIKV_EXPECTS(options.prefetch_timeout.count() > 0, "attach_storage: prefetch_timeout is ",
                  options.prefetch_timeout.count(), " ms; give a positive time a prefetch may take");
    UNIKV_EXPECTS(open_backups_ == 0, "attach_storage: an eviction run with ", open_backups_,
                  " backups is open; finish_evict it first");
    if (options.write) {  // every check before anything changes
        const HostConfig switched{.write = *options.write, .mode = host_mode_};
        const HostWrites& w = checked(switched).write;  // the constructor's checks of a policy
        UNIKV_EXPECTS(w.policy != WritePolicy::none, "attach_storage: write policy none makes no host copies, so "
                      "nothing would reach the store; switch to through, selective or back");
        // A write-back run finishes every write in flight as a backup: write-throughs must be acknowledged first.
        UNIKV_EXPECTS(w.policy == host_writes_.policy || writes_.empty(), "attach_storage: switching the write "
                      "policy with ", writes_.size(), " host writes in flight; acknowledge them first (writing_check "
                      "until writes_in_flight() is 0)");
        if (host_mode_ == HostMode::cache && host_writes_.policy == WritePolicy::back && write_through_threshold(w) > 0) {
            const HostChainBreak b = tree_.host_chain_break();
            UNIKV_EXPECTS(!b, "attach_storage: cannot switch from write_back to write_", write_policy_name(w.policy),
                          ": the node of tokens [", b.start, ", ", b.end, ") holds ",
                          b.kind == HostChainBreak::Kind::aux_without_full
                              ? "an SWA or Mamba host copy without its FULL host copy"
                              : "a host copy under a parent without a FULL host copy",
                          ", and write-through needs host copies in chains from the root; evict the host tier "
                          "(evict_host) or attach without the switch");
        }
    }
    StoreNamespace names{.model = options.model,
                         .layout = options.layout,
                         .page_tokens = page_size(Component::full),
                         .swa_window = window_tokens(),
                         .tp_rank = options.tp_rank,
                         .tp_size = options.tp_size,
                         .pp_rank = options.pp_rank,
                         .pp_size = options.pp_size};
    for (Component c : all_components)
        if (alloc_.spec()[c].present) names.page_bytes[c] = alloc_.spec()[c].page_bytes;
    storage_.digest = names.digest();
    storage_.timeout = options.prefetch_timeout;
    storage_.store = &store;
    if (options.write) {
        host_writes_ = *options.write;
        tree_.set_write_through_threshold(write_through_threshold(host_writes_));
    }
}

template <class P>
void CacheCore<P>::detach_storage()
    requires has_storage
{
    if (storage_.store == nullptr) return;
    drain_storage();
    for (auto& t : storage_.tasks) {  // none unless an answer was lost to a throw: nothing reads or writes them now
        release_locks(t);
        free_pages(t.pages);
    }
    storage_.tasks.clear();
    storage_.store = nullptr;
}

template <class P>
void CacheCore<P>::drain_storage() {
    if constexpr (has_storage) {
        finish_answers();
        while (!storage_.tasks.empty() && storage_.store->in_flight() > 0)
            finish_answers(storage_.store->poll(std::chrono::milliseconds(50)));
    }
}

template <class P>
void CacheCore<P>::finish_answers(std::span<const StorageDone> polled) {
    if constexpr (has_storage) {
        if (!polled.empty()) {
            UNIKV_ASSERT(storage_.next_answer == storage_.answers.size());
            storage_.answers.assign(polled.begin(), polled.end());
            storage_.next_answer = 0;
        }
        while (storage_.next_answer < storage_.answers.size()) {
            const StorageDone& d = storage_.answers[storage_.next_answer++];  // past it before a throw
            const auto it = std::find_if(storage_.tasks.begin(), storage_.tasks.end(),
                                         [&](const auto& t) { return t.ticket == d.ticket; });
            if (it != storage_.tasks.end()) finish_storage(static_cast<std::size_t>(it - storage_.tasks.begin()), d.results);
        }
    } else {
        (void)polled;
    }
}

template <class P>
void CacheCore<P>::wait_for_store() noexcept {
    if constexpr (has_storage) {
        if (storage_.store == nullptr || storage_.tasks.empty()) return;  // every batch the store holds has a task
        try {
            while (storage_.store->in_flight() > 0) (void)storage_.store->poll(std::chrono::milliseconds(50));
            for (auto& t : storage_.tasks) release_locks(t);
        } catch (...) {  // a broken invariant of the store or the tree: nothing more can be waited for
        }
        storage_.tasks.clear();
    }
}

template <class P>
KeyNamespace CacheCore<P>::node_prefix(NodeInfo info) {
    std::vector<TokenId>& out = storage_.prefix;
    const KeyNamespace ns = info.ns;
    out.assign(static_cast<std::size_t>(info.start + info.length), TokenId{});
    for (;;) {
        std::copy(info.tokens.begin(), info.tokens.end(), out.begin() + info.start);
        if (info.start == 0) return ns;
        info = tree_.node_info(info.parent);
    }
}

template <class P>
bool CacheCore<P>::store_host_copy(NodeRef node, Component c, LockReceipt* staged) {
    if constexpr (has_storage) {
        using task_type = storage_task<typename storage_link_type::lease_type>;
        if (storage_.store == nullptr || !tree_.contains(node)) return false;
        NodeInfo info = tree_.node_info(node);
        if (info.host[c].empty() || info.length == 0) return false;
        const KeyNamespace ns = node_prefix(info);
        const std::int32_t ps = page_size(Component::full);
        storage_.keys.resize(static_cast<std::size_t>((info.start + info.length) / ps));
        (void)PageKeyChain::keys(PageKeyChain::root(storage_.digest, ns), storage_.prefix, ps, storage_.keys);
        task_type task;
        task.kind = task_type::phase::put;
        task.lease = host_.lease();
        const pinned_region_ref region = task.lease.region(c);
        const std::size_t bytes = task.lease.page_bytes(c);
        const ObjectKind kind = c == Component::full ? ObjectKind::full : c == Component::swa ? ObjectKind::swa : ObjectKind::mamba;
        storage_.writes.clear();
        // A copy whose node was split while it was in flight is one value over the node and the ancestors it is
        // joined to: all of it goes, bottom-up. A page's object is keyed by its FULL page, a state by the page it
        // ends on (Mamba values are never joined).
        for (;;) {
            const std::vector<HostPage>& host = info.host[c];
            storage_.physical.resize(host.size());
            task.lease.physical(c, host, storage_.physical);
            const auto first = static_cast<std::size_t>(info.start / ps);
            for (std::size_t i = 0; i < host.size(); ++i) {
                const ObjectKey page = storage_.keys[c == Component::mamba ? storage_.keys.size() - 1 : first + i];
                storage_.writes.push_back({object_key(page, kind),
                                           kind,
                                           {region.data + static_cast<std::size_t>(storage_.physical[i]) * bytes, bytes}});
            }
            if (c == Component::mamba || !info.joined[c]) break;
            info = tree_.node_info(info.parent);
        }
        task.bytes = bytes * storage_.writes.size();
        // Host-locked (the lock covers the joined ancestors) and leased until the store answers; a staged copy
        // keeps its write's device lock as well, so it still sits beside its device data when it goes.
        task.lock = tree_.lock(node, {.tier = Tier::host, .components = ComponentMask::of(c)});
        if (staged != nullptr) {
            task.node = node;
            task.component = c;
            task.device = std::move(*staged);
        }
        submit(std::move(task), [&] { return storage_.store->put(storage_.writes); });
        return true;
    } else {
        (void)node;
        (void)c;
        (void)staged;
        return false;
    }
}

template <class P>
void CacheCore<P>::stage_for_store(Ticket& t) {
    if (!store_host_copy(t.node, t.component, &t.device)) let_go(t.node, t.component, HostDrop::failed);
}

template <class P>
void CacheCore<P>::let_go(NodeRef node, Component c, HostDrop why) {
    if (!tree_.contains(node)) return;
    const NodeInfo info = tree_.node_info(node);
    if (info.host[c].empty() || !info.device[c]) return;
    EvictResult dropped = tree_.drop_host(node, c, why);
    run_actions(dropped);
}

template <class P>
void CacheCore<P>::drop_staged(NodeRef node) {
    for (NodeRef x = node; tree_.contains(x) && !x.is_root();) {
        const NodeInfo info = tree_.node_info(x);
        for (Component c : {Component::full, Component::swa})
            if (!info.host[c].empty() && info.device[c] && info.host_locks[c] == 0) let_go(x, c, HostDrop::stored);
        x = info.parent;
    }
}

template <class P>
template <class Task, class Submit>
void CacheCore<P>::submit(Task&& task, Submit&& call) {
    if constexpr (has_storage) {
        // In the list before the store has the batch, out of it again if the store refuses it: a batch the store
        // holds always has its task.
        try {
            storage_.tasks.push_back(std::forward<Task>(task));
        } catch (...) {
            release_locks(task);
            throw;
        }
        try {
            storage_.tasks.back().ticket = call();
        } catch (...) {
            auto& t = storage_.tasks.back();
            release_locks(t);
            free_pages(t.pages);
            storage_.tasks.pop_back();
            throw;
        }
    } else {
        (void)task;
        (void)call;
    }
}

template <class P>
PrefetchStart CacheCore<P>::prefetch(TokenKey key)
    requires has_storage
{
    using task_type = storage_task<typename storage_link_type::lease_type>;
    if (storage_.store == nullptr) return {.status = PrefetchStart::Status::no_storage};
    const std::int32_t ps = page_size(Component::full);
    const auto end = static_cast<std::int32_t>(key.tokens.size()) / ps;
    const MatchResult m = tree_.match_prefix(key, {.host_hits = HostHits::include});
    const std::int32_t from = std::max(m.best_length, m.full_length) / ps;
    if (from >= end) return {.status = PrefetchStart::Status::cached, .cached_length = m.best_length};
    task_type task;
    task.kind = task_type::phase::probe;
    task.id = storage_.next_prefetch++;
    task.tokens.assign(key.tokens.begin(), key.tokens.begin() + static_cast<std::ptrdiff_t>(end) * ps);
    task.ns = key.ns;
    task.chain.resize(static_cast<std::size_t>(end));
    (void)PageKeyChain::keys(PageKeyChain::root(storage_.digest, key.ns), task.tokens, ps, task.chain);
    task.from = from;
    task.end = end;
    task.deadline = std::chrono::steady_clock::now() + storage_.timeout;
    // What could serve a match ending at any page in (from, end]: the FULL pages from `from`, the SWA pages of a
    // window ending there, the states there. In this order; `start_fetch` reads the results back the same way.
    storage_.keys.clear();
    for (std::int32_t p = from; p < end; ++p) storage_.keys.push_back(task.chain[static_cast<std::size_t>(p)]);
    if constexpr (has_swa) {
        for (std::int32_t p = std::max(0, from - window_pages()); p < end; ++p)
            storage_.keys.push_back(object_key(task.chain[static_cast<std::size_t>(p)], ObjectKind::swa));
    }
    if constexpr (has_mamba) {
        for (std::int32_t p = from; p < end; ++p)
            storage_.keys.push_back(object_key(task.chain[static_cast<std::size_t>(p)], ObjectKind::mamba));
    }
    submit(std::move(task), [&] { return storage_.store->exists(storage_.keys); });
    ++storage_.counters.prefetches;
    return {.status = PrefetchStart::Status::started, .id = storage_.tasks.back().id, .cached_length = m.best_length};
}

template <class P>
std::span<const PrefetchDone> CacheCore<P>::storage_check(std::chrono::nanoseconds wait)
    requires has_storage
{
    UNIKV_EXPECTS(open_backups_ == 0, "storage_check: an eviction run with ", open_backups_,
                  " backups is open; finish_evict it first");
    storage_.done.clear();
    storage_.done.swap(storage_.pending);
    if (storage_.store == nullptr) return storage_.done;
    finish_answers();  // left by a throw in the last call
    if (!storage_.tasks.empty()) {
        finish_answers(storage_.store->poll(wait));
        const auto now = std::chrono::steady_clock::now();
        for (std::size_t i = 0; i < storage_.tasks.size(); ++i) {
            auto& t = storage_.tasks[i];
            if (t.kind != decltype(t.kind)::put && !t.reported && now >= t.deadline) {
                report(i, PrefetchDone::Status::timed_out);
                ++storage_.counters.timed_out;
            }
        }
    }
    storage_.done.insert(storage_.done.end(), storage_.pending.begin(), storage_.pending.end());
    storage_.pending.clear();
    return storage_.done;
}

template <class P>
void CacheCore<P>::report(std::size_t task, PrefetchDone::Status status, std::int32_t length, std::int32_t fetched) {
    if constexpr (has_storage) {
        auto& t = storage_.tasks[task];
        if (t.reported) return;
        t.reported = true;
        storage_.pending.push_back({.id = t.id, .status = status, .length = length, .fetched = fetched});
    }
}

template <class P>
template <class Task>
void CacheCore<P>::release_locks(Task& task) {
    if (!task.lock.empty()) tree_.unlock(std::move(task.lock));
    if (!task.device.empty()) tree_.unlock(std::move(task.device));
}

template <class P>
void CacheCore<P>::free_pages(per_component<std::vector<HostPage>>& pages) {
    for (Component c : all_components) {
        if (!pages[c].empty()) host_.free(c, pages[c]);
        pages[c].clear();
    }
}

template <class P>
void CacheCore<P>::finish_storage(std::size_t task, std::span<const PageResult> results) {
    if constexpr (has_storage) {
        auto& t = storage_.tasks[task];
        using phase = typename std::remove_reference_t<decltype(t)>::phase;
        if (t.kind == phase::probe) {
            start_fetch(task, results);  // the task goes on with its next batch, or ends
            return;
        }
        if (t.kind == phase::fetch) {
            graft(task, results);
        } else {
            const std::uint64_t object_bytes = results.empty() ? 0 : t.bytes / results.size();  // one size a put
            for (PageResult r : results) {
                ++(r == PageResult::hit ? storage_.counters.put_objects : storage_.counters.put_failed);
                storage_.counters.bytes_written += r == PageResult::hit ? object_bytes : 0;
            }
            // A staged copy goes once the store answered, marked stored when every object landed (before its device
            // lock: `drop_host` needs the device data beside it).
            const bool staged = !t.device.empty();
            const bool all_stored =
                std::all_of(results.begin(), results.end(), [](PageResult r) { return r == PageResult::hit; });
            if (!t.lock.empty()) tree_.unlock(std::move(t.lock));
            if (staged) let_go(t.node, t.component, all_stored ? HostDrop::stored : HostDrop::failed);
            if (!t.device.empty()) tree_.unlock(std::move(t.device));
        }
        storage_.tasks.erase(storage_.tasks.begin() + static_cast<std::ptrdiff_t>(task));
    }
}

template <class P>
void CacheCore<P>::start_fetch(std::size_t task, std::span<const PageResult> found) {
    if constexpr (has_storage) {
        auto& t = storage_.tasks[task];
        using phase = typename std::remove_reference_t<decltype(t)>::phase;
        const auto hit = [&](std::size_t i) { return found[i] == PageResult::hit; };
        const std::int32_t full_count = t.end - t.from;
        const std::int32_t swa_first = std::max(0, t.from - window_pages());
        const auto swa_at = static_cast<std::size_t>(full_count);                              // SWA results' start
        const auto mamba_at = swa_at + (has_swa ? static_cast<std::size_t>(t.end - swa_first) : 0);  // Mamba results'
        // The FULL pages run from `from` to the first miss; a match may end on any page of it whose window and state
        // the store holds. The deepest such end is fetched.
        std::int32_t run = t.from;
        while (run < t.end && hit(static_cast<std::size_t>(run - t.from))) ++run;
        std::int32_t best = t.from;
        for (std::int32_t e = run; e > t.from && best == t.from; --e) {
            bool ok = true;
            if constexpr (has_swa) {
                for (std::int32_t p = std::max(0, e - window_pages()); p < e && ok; ++p)
                    ok = hit(swa_at + static_cast<std::size_t>(p - swa_first));
            }
            if constexpr (has_mamba) ok = ok && hit(mamba_at + static_cast<std::size_t>(e - 1 - t.from));
            if (ok) best = e;
        }
        const auto finish_missed = [&] {
            report(task, PrefetchDone::Status::missed);
            storage_.tasks.erase(storage_.tasks.begin() + static_cast<std::ptrdiff_t>(task));
        };
        if (best == t.from) return finish_missed();
        // Host pages for the run, the window ending at its end, and the state there; all or none.
        t.end = best;
        per_component<std::size_t> want{};
        want[Component::full] = static_cast<std::size_t>(best - t.from);
        if constexpr (has_swa) want[Component::swa] = static_cast<std::size_t>(std::min(window_pages(), best));
        if constexpr (has_mamba) want[Component::mamba] = 1;
        // The task ends here when anything below throws: its pages go back, it leaves the list.
        const auto abandon = [&] {
            t.lease = {};
            free_pages(t.pages);
            storage_.tasks.erase(storage_.tasks.begin() + static_cast<std::ptrdiff_t>(task));
        };
        for (Component c : all_components) {  // one component at a time: a failure frees only what was taken
            if (want[c] == 0) continue;
            t.pages[c].resize(want[c]);
            bool room = false;
            try {
                room = host_room(c, t.pages[c]);
            } catch (...) {
                t.pages[c].clear();  // not allocated
                abandon();
                throw;
            }
            if (!room) {
                t.pages[c].clear();
                free_pages(t.pages);
                return finish_missed();
            }
        }
        t.lease = host_.lease();
        storage_.reads.clear();
        for (Component c : all_components) {
            const std::vector<HostPage>& host = t.pages[c];
            if (host.empty()) continue;
            storage_.physical.resize(host.size());
            t.lease.physical(c, host, storage_.physical);
            const pinned_region_ref region = t.lease.region(c);
            const std::size_t bytes = t.lease.page_bytes(c);
            const ObjectKind kind = c == Component::full ? ObjectKind::full : c == Component::swa ? ObjectKind::swa : ObjectKind::mamba;
            // FULL pages from `from`; the window's SWA pages end at `end`; the state is the page `end` ends on.
            const std::int32_t first = c == Component::full ? t.from
                                       : c == Component::swa ? t.end - static_cast<std::int32_t>(host.size())
                                                             : t.end - 1;
            for (std::size_t i = 0; i < host.size(); ++i) {
                const ObjectKey page = t.chain[static_cast<std::size_t>(first) + i];
                storage_.reads.push_back({object_key(page, kind),
                                          kind,
                                          {region.data + static_cast<std::size_t>(storage_.physical[i]) * bytes, bytes}});
            }
        }
        t.kind = phase::fetch;
        try {
            t.ticket = storage_.store->get(storage_.reads);
        } catch (...) {
            abandon();
            throw;
        }
    }
}

template <class P>
void CacheCore<P>::graft(std::size_t task, std::span<const PageResult> got) {
    if constexpr (has_storage) {
        auto& t = storage_.tasks[task];
        t.lease = {};  // the store is done with the host pages
        const std::int32_t ps = page_size(Component::full);
        // Results come in the order the reads were queued: FULL, then SWA, then Mamba.
        const auto full_count = t.pages[Component::full].size();
        std::size_t run = 0;
        while (run < full_count && got[run] == PageResult::hit) ++run;
        const bool aux_ok = std::all_of(got.begin() + static_cast<std::ptrdiff_t>(full_count), got.end(),
                                        [](PageResult r) { return r == PageResult::hit; });
        storage_.counters.get_failed += static_cast<std::int64_t>(
            std::count_if(got.begin(), got.end(), [](PageResult r) { return r != PageResult::hit; }));
        // A hybrid tree takes all of it or nothing (the window and the state must end where the FULL run ends); a
        // FULL-only tree keeps the run up to the first miss.
        const bool whole = run == full_count && aux_ok;
        const bool partial_ok = !has_swa && !has_mamba && run > 0;
        if (!whole && !partial_ok) {
            free_pages(t.pages);
            report(task, PrefetchDone::Status::missed);
            return;
        }
        if (!whole) {  // FULL only: give back the pages after the run
            host_.free(Component::full, std::span<const HostPage>(t.pages[Component::full]).subspan(run));
            t.pages[Component::full].resize(run);
            t.end = t.from + static_cast<std::int32_t>(run);
        }
        const TokenKey key{std::span<const TokenId>(t.tokens).first(static_cast<std::size_t>(t.end) * static_cast<std::size_t>(ps)), t.ns};
        HostInsertValues values{.from = t.from * ps, .full = t.pages[Component::full]};
        if constexpr (has_swa) values.swa = t.pages[Component::swa];
        if constexpr (has_mamba) values.state = t.pages[Component::mamba].front();
        HostInsertResult r = tree_.insert_host(key, values);
        for (Component c : all_components) {
            if (!r.unused[c].empty()) host_.free(c, r.unused[c]);
            storage_.counters.bytes_read += (t.pages[c].size() - r.unused[c].size()) * alloc_.spec()[c].page_bytes;
            t.pages[c].clear();  // the tree's now, or freed above
        }
        if (!r.grafted) {
            report(task, PrefetchDone::Status::missed);
            return;
        }
        ++storage_.counters.grafted;
        storage_.counters.fetched_tokens += static_cast<std::int64_t>(t.end - t.from) * ps;
        report(task, PrefetchDone::Status::grafted, t.end * ps, (t.end - t.from) * ps);
    }
}

}  // namespace unikv::detail::cache

#pragma once
// Definitions of `CacheCore` (cache.hpp): the storage tier (attach, puts of host copies, prefetch, its tickets: kinds `store_put` and `prefetch`).

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
    for (Ticket& t : stores_) {  // none unless an answer was lost to a throw: nothing reads or writes them now
        if (t.tag.kind == CacheTag::Kind::store_put) end_put(t, HostDrop::failed);
        abandon(t);
        free_pages(t.store.pages);
    }
    stores_.clear();
    storage_.store = nullptr;
}

template <class P>
void CacheCore<P>::drain_storage() {
    if constexpr (has_storage) {
        finish_answers();
        while (!stores_.empty() && storage_.store->in_flight() > 0)
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
            const auto it = std::find_if(stores_.begin(), stores_.end(),
                                         [&](const Ticket& t) { return t.store.batch == d.ticket; });
            if (it != stores_.end()) finish_store(static_cast<std::size_t>(it - stores_.begin()), d.results);
        }
    } else {
        (void)polled;
    }
}

template <class P>
void CacheCore<P>::wait_for_store() noexcept {
    if constexpr (has_storage) {
        if (storage_.store == nullptr || stores_.empty()) return;  // every batch the store holds has a ticket
        try {
            while (storage_.store->in_flight() > 0) (void)storage_.store->poll(std::chrono::milliseconds(50));
            for (Ticket& t : stores_) abandon(t);
        } catch (...) {  // a broken invariant of the store or the tree: nothing more can be waited for
        }
        stores_.clear();
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
        if (storage_.store == nullptr || !tree_.contains(node)) return false;
        NodeInfo info = tree_.node_info(node);
        if (info.host[c].empty() || info.length == 0) return false;
        const KeyNamespace ns = node_prefix(info);
        const std::int32_t ps = page_size(Component::full);
        storage_.keys.resize(static_cast<std::size_t>((info.start + info.length) / ps));
        (void)PageKeyChain::keys(PageKeyChain::root(storage_.digest, ns), storage_.prefix, ps, storage_.keys);
        Ticket t;
        t.tag = {.kind = CacheTag::Kind::store_put};
        t.node = node;
        t.component = c;
        t.store.lease = host_.lease();
        const pinned_region_ref region = t.store.lease.region(c);
        const std::size_t bytes = t.store.lease.page_bytes(c);
        const ObjectKind kind = c == Component::full ? ObjectKind::full : c == Component::swa ? ObjectKind::swa : ObjectKind::mamba;
        storage_.writes.clear();
        // A copy whose node was split while it was in flight is one value over the node and the ancestors it is
        // joined to: all of it goes, bottom-up. A page's object is keyed by its FULL page, a state by the page it
        // ends on (Mamba values are never joined).
        for (;;) {
            const std::vector<HostPage>& host = info.host[c];
            storage_.physical.resize(host.size());
            t.store.lease.physical(c, host, storage_.physical);
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
        t.store.bytes = bytes * storage_.writes.size();
        // Host-locked (the lock covers the joined ancestors) and leased until the store answers; a staged copy
        // keeps its write's device lock as well, so it still sits beside its device data when it goes.
        t.host = tree_.lock(node, {.tier = Tier::host, .components = ComponentMask::of(c)});
        if (staged != nullptr) t.device = std::move(*staged);
        submit(std::move(t), [&] { return storage_.store->put(storage_.writes); });
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
    bool put = false;
    try {
        put = store_host_copy(t.node, t.component, &t.device);
    } catch (...) {  // the store refused the batch: the copy is not stored, and nothing else lets go of it
        let_go(t.node, t.component, HostDrop::failed);
        throw;
    }
    if (!put) let_go(t.node, t.component, HostDrop::failed);
}

template <class P>
void CacheCore<P>::end_put(Ticket& t, HostDrop why) {
    // A staged copy goes before its device lock: `drop_host` needs the device data beside it.
    const bool staged = !t.device.empty();
    if (!t.host.empty()) tree_.unlock(std::move(t.host));
    if (staged) let_go(t.node, t.component, why);
    if (!t.device.empty()) tree_.unlock(std::move(t.device));
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
            if (!info.host[c].empty() && info.device[c] && !staged_in_flight(x, c)) {
                EvictResult dropped = tree_.drop_host(x, c, HostDrop::stored);
                run_actions(dropped);
            }
        x = info.parent;
    }
}

template <class P>
bool CacheCore<P>::staged_in_flight(NodeRef x, Component c) {
    // A value's ticket names its lowest part (a split keeps that slot below); its parts go up by their joined bits.
    const auto holds = [&](const Ticket& t) {
        if (t.component != c || !tree_.contains(t.node)) return false;
        for (NodeRef p = t.node;;) {
            if (p == x) return true;
            const NodeInfo info = tree_.node_info(p);
            if (!info.joined[c]) return false;
            p = info.parent;
        }
    };
    return std::any_of(writes_.begin(), writes_.end(),
                       [&](const Ticket& t) { return t.tag.kind == CacheTag::Kind::write_through && holds(t); }) ||
           std::any_of(stores_.begin(), stores_.end(),
                       [&](const Ticket& t) { return t.tag.kind == CacheTag::Kind::store_put && holds(t); });
}

template <class P>
template <class Submit>
void CacheCore<P>::submit(Ticket&& t, Submit&& call) {
    if constexpr (has_storage) {
        // In the lane before the store has the batch, out of it again if the store refuses it: a batch the store
        // holds always has its ticket.
        try {
            stores_.push_back(std::move(t));
        } catch (...) {
            abandon(t);
            throw;
        }
        try {
            stores_.back().store.batch = call();
        } catch (...) {
            Ticket& back = stores_.back();
            abandon(back);
            free_pages(back.store.pages);
            stores_.pop_back();
            throw;
        }
    } else {
        (void)t;
        (void)call;
    }
}

template <class P>
PrefetchStart CacheCore<P>::prefetch(TokenKey key)
    requires has_storage
{
    if (storage_.store == nullptr) return {.status = PrefetchStart::Status::no_storage};
    const std::int32_t ps = page_size(Component::full);
    const auto end = static_cast<std::int32_t>(key.tokens.size()) / ps;
    const MatchResult m = tree_.match_prefix(key, {.host_hits = HostHits::include});
    const std::int32_t from = std::max(m.best_length, m.full_length) / ps;
    if (from >= end) return {.status = PrefetchStart::Status::cached, .cached_length = m.best_length};
    Ticket t;
    t.tag = {.kind = CacheTag::Kind::prefetch, .id = storage_.next_prefetch++};
    auto& f = t.store;
    f.tokens.assign(key.tokens.begin(), key.tokens.begin() + static_cast<std::ptrdiff_t>(end) * ps);
    f.ns = key.ns;
    f.chain.resize(static_cast<std::size_t>(end));
    (void)PageKeyChain::keys(PageKeyChain::root(storage_.digest, key.ns), f.tokens, ps, f.chain);
    f.from = from;
    f.end = end;
    f.deadline = std::chrono::steady_clock::now() + storage_.timeout;
    // What could serve a match ending at any page in (from, end]: the FULL pages from `from`, the SWA pages of a
    // window ending there, the states there. In this order; `start_fetch` reads the results back the same way.
    storage_.keys.clear();
    for (std::int32_t p = from; p < end; ++p) storage_.keys.push_back(f.chain[static_cast<std::size_t>(p)]);
    if constexpr (has_swa) {
        for (std::int32_t p = std::max(0, from - window_pages()); p < end; ++p)
            storage_.keys.push_back(object_key(f.chain[static_cast<std::size_t>(p)], ObjectKind::swa));
    }
    if constexpr (has_mamba) {
        for (std::int32_t p = from; p < end; ++p)
            storage_.keys.push_back(object_key(f.chain[static_cast<std::size_t>(p)], ObjectKind::mamba));
    }
    const std::uint64_t id = t.tag.id;
    submit(std::move(t), [&] { return storage_.store->exists(storage_.keys); });
    ++storage_.counters.prefetches;
    return {.status = PrefetchStart::Status::started, .id = id, .cached_length = m.best_length};
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
    if (!stores_.empty()) {
        finish_answers(storage_.store->poll(wait));
        const auto now = std::chrono::steady_clock::now();
        for (Ticket& t : stores_) {
            if (t.tag.kind == CacheTag::Kind::prefetch && !t.store.reported && now >= t.store.deadline) {
                report(t, PrefetchDone::Status::timed_out);
                ++storage_.counters.timed_out;
            }
        }
    }
    storage_.done.insert(storage_.done.end(), storage_.pending.begin(), storage_.pending.end());
    storage_.pending.clear();
    return storage_.done;
}

template <class P>
void CacheCore<P>::report(Ticket& t, PrefetchDone::Status status, std::int32_t length, std::int32_t fetched) {
    if constexpr (has_storage) {
        if (t.store.reported) return;
        t.store.reported = true;
        storage_.pending.push_back({.id = t.tag.id, .status = status, .length = length, .fetched = fetched});
    } else {
        (void)t;
        (void)status;
        (void)length;
        (void)fetched;
    }
}

template <class P>
void CacheCore<P>::free_pages(per_component<std::vector<HostPage>>& pages) {
    for (Component c : all_components) {
        if (!pages[c].empty()) host_.free(c, pages[c]);
        pages[c].clear();
    }
}

template <class P>
void CacheCore<P>::finish_store(std::size_t i, std::span<const PageResult> results) {
    if constexpr (has_storage) {
        Ticket& t = stores_[i];
        if (t.tag.kind == CacheTag::Kind::prefetch && !t.store.fetching) {
            start_fetch(i, results);  // the ticket goes on with its next batch, or ends
            return;
        }
        if (t.tag.kind == CacheTag::Kind::prefetch) {
            graft(i, results);
        } else {
            const std::uint64_t object_bytes = results.empty() ? 0 : t.store.bytes / results.size();  // one size a put
            for (PageResult r : results) {
                ++(r == PageResult::hit ? storage_.counters.put_objects : storage_.counters.put_failed);
                storage_.counters.bytes_written += r == PageResult::hit ? object_bytes : 0;
            }
            // A staged copy goes once the store answered, marked stored when every object landed.
            const bool all_stored =
                std::all_of(results.begin(), results.end(), [](PageResult r) { return r == PageResult::hit; });
            end_put(t, all_stored ? HostDrop::stored : HostDrop::failed);
        }
        stores_.erase(stores_.begin() + static_cast<std::ptrdiff_t>(i));
    } else {
        (void)i;
        (void)results;
    }
}

template <class P>
void CacheCore<P>::start_fetch(std::size_t i, std::span<const PageResult> found) {
    if constexpr (has_storage) {
        Ticket& t = stores_[i];
        auto& f = t.store;
        const auto hit = [&](std::size_t k) { return found[k] == PageResult::hit; };
        const std::int32_t full_count = f.end - f.from;
        const std::int32_t swa_first = std::max(0, f.from - window_pages());
        const auto swa_at = static_cast<std::size_t>(full_count);                              // SWA results' start
        const auto mamba_at = swa_at + (has_swa ? static_cast<std::size_t>(f.end - swa_first) : 0);  // Mamba results'
        // The FULL pages run from `from` to the first miss; a match may end on any page of it whose window and state
        // the store holds. The deepest such end is fetched.
        std::int32_t run = f.from;
        while (run < f.end && hit(static_cast<std::size_t>(run - f.from))) ++run;
        std::int32_t best = f.from;
        for (std::int32_t e = run; e > f.from && best == f.from; --e) {
            bool ok = true;
            if constexpr (has_swa) {
                for (std::int32_t p = std::max(0, e - window_pages()); p < e && ok; ++p)
                    ok = hit(swa_at + static_cast<std::size_t>(p - swa_first));
            }
            if constexpr (has_mamba) ok = ok && hit(mamba_at + static_cast<std::size_t>(e - 1 - f.from));
            if (ok) best = e;
        }
        const auto finish_missed = [&] {
            report(t, PrefetchDone::Status::missed);
            stores_.erase(stores_.begin() + static_cast<std::ptrdiff_t>(i));
        };
        if (best == f.from) return finish_missed();
        // Host pages for the run, the window ending at its end, and the state there; all or none.
        f.end = best;
        per_component<std::size_t> want{};
        want[Component::full] = static_cast<std::size_t>(best - f.from);
        if constexpr (has_swa) want[Component::swa] = static_cast<std::size_t>(std::min(window_pages(), best));
        if constexpr (has_mamba) want[Component::mamba] = 1;
        // The ticket ends here when anything below throws: its pages go back, it leaves the lane.
        const auto abandon = [&] {
            f.lease = {};
            free_pages(f.pages);
            stores_.erase(stores_.begin() + static_cast<std::ptrdiff_t>(i));
        };
        for (Component c : all_components) {  // one component at a time: a failure frees only what was taken
            if (want[c] == 0) continue;
            f.pages[c].resize(want[c]);
            bool room = false;
            try {
                room = host_room(c, f.pages[c]);
            } catch (...) {
                f.pages[c].clear();  // not allocated
                abandon();
                throw;
            }
            if (!room) {
                f.pages[c].clear();
                free_pages(f.pages);
                return finish_missed();
            }
        }
        f.lease = host_.lease();
        storage_.reads.clear();
        for (Component c : all_components) {
            const std::vector<HostPage>& host = f.pages[c];
            if (host.empty()) continue;
            storage_.physical.resize(host.size());
            f.lease.physical(c, host, storage_.physical);
            const pinned_region_ref region = f.lease.region(c);
            const std::size_t bytes = f.lease.page_bytes(c);
            const ObjectKind kind = c == Component::full ? ObjectKind::full : c == Component::swa ? ObjectKind::swa : ObjectKind::mamba;
            // FULL pages from `from`; the window's SWA pages end at `end`; the state is the page `end` ends on.
            const std::int32_t first = c == Component::full ? f.from
                                       : c == Component::swa ? f.end - static_cast<std::int32_t>(host.size())
                                                             : f.end - 1;
            for (std::size_t i = 0; i < host.size(); ++i) {
                const ObjectKey page = f.chain[static_cast<std::size_t>(first) + i];
                storage_.reads.push_back({object_key(page, kind),
                                          kind,
                                          {region.data + static_cast<std::size_t>(storage_.physical[i]) * bytes, bytes}});
            }
        }
        f.fetching = true;
        try {
            f.batch = storage_.store->get(storage_.reads);
        } catch (...) {
            abandon();
            throw;
        }
    }
}

template <class P>
void CacheCore<P>::graft(std::size_t i, std::span<const PageResult> got) {
    if constexpr (has_storage) {
        Ticket& t = stores_[i];
        auto& f = t.store;
        f.lease = {};  // the store is done with the host pages
        const std::int32_t ps = page_size(Component::full);
        // Results come in the order the reads were queued: FULL, then SWA, then Mamba.
        const auto full_count = f.pages[Component::full].size();
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
            free_pages(f.pages);
            report(t, PrefetchDone::Status::missed);
            return;
        }
        if (!whole) {  // FULL only: give back the pages after the run
            host_.free(Component::full, std::span<const HostPage>(f.pages[Component::full]).subspan(run));
            f.pages[Component::full].resize(run);
            f.end = f.from + static_cast<std::int32_t>(run);
        }
        const TokenKey key{std::span<const TokenId>(f.tokens).first(static_cast<std::size_t>(f.end) * static_cast<std::size_t>(ps)), f.ns};
        HostInsertValues values{.from = f.from * ps, .full = f.pages[Component::full]};
        if constexpr (has_swa) values.swa = f.pages[Component::swa];
        if constexpr (has_mamba) values.state = f.pages[Component::mamba].front();
        HostInsertResult r = tree_.insert_host(key, values);
        for (Component c : all_components) {
            if (!r.unused[c].empty()) host_.free(c, r.unused[c]);
            storage_.counters.bytes_read += (f.pages[c].size() - r.unused[c].size()) * alloc_.spec()[c].page_bytes;
            f.pages[c].clear();  // the tree's now, or freed above
        }
        if (!r.grafted) {
            report(t, PrefetchDone::Status::missed);
            return;
        }
        ++storage_.counters.grafted;
        storage_.counters.fetched_tokens += static_cast<std::int64_t>(f.end - f.from) * ps;
        report(t, PrefetchDone::Status::grafted, f.end * ps, (f.end - f.from) * ps);
    }
}

}  // namespace unikv::detail::cache

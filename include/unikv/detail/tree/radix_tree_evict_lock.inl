#pragma once
// RadixTree: eviction (device and host), garbage collection of dead leaves, host values, retention, locks.

#include <algorithm>
#include <vector>

namespace unikv {

// Frees all device data of `id` (FULL pages with their SWA rows, the Mamba state).
template <class... Cs>
void RadixTree<Cs...>::free_device_data(Id id, detail::ActionsBuilder& out, EvictResult& result) {
    Node& n = nodes_[id];
    if (!n.pages.empty()) {
        out.free_pages(n.pages);
        result.device_freed[Component::full] += n.length;
        emit(EventKind::removed, Component::full, Tier::device, id);
        if (n.swa) {
            result.device_freed[Component::swa] += n.length;
            emit(EventKind::removed, Component::swa, Tier::device, id);
            account(id, Component::swa, -1);
            n.swa = false;
        }
        clear_pages(id);
    }
    if (n.state.is_valid()) {
        out.free_state(n.state);
        result.device_freed[Component::mamba] += 1;
        emit(EventKind::removed, Component::mamba, Tier::device, id);
        account(id, Component::mamba, -1);
        n.state = StateId{};
    }
    sync(id);
    sync(n.parent);
}

// One SWA window in tokens, rounded up to whole pages: the SWA data a match boundary needs before it.
template <class... Cs>
std::int32_t RadixTree<Cs...>::window_tokens() const noexcept {
    const std::int32_t ps = config_.page_size.tokens;
    return (config_.swa_window + ps - 1) / ps * ps;
}

// Write-back copies only one window of SWA rows before a segment's end (the boundary a later match would end
// at). A longer node is split there so the copy is a whole node's host value; returns the upper part, or npos.
template <class... Cs>
auto RadixTree<Cs...>::split_window(Id id) -> Id {
    const std::int32_t keep = window_tokens();
    const std::int32_t length = nodes_[id].length;
    return length > keep ? split(id, length - keep) : npos;
}

// Emits a backup of component `c`'s device data of `id` and records the pending host value.
template <class... Cs>
void RadixTree<Cs...>::start_backup(Id id, Component c, detail::ActionsBuilder& out) {
    Node& n = nodes_[id];
    if (c == Component::mamba) {
        out.copy_state(ActionKind::backup, ref(id), n.state);
    } else {
        out.copy_pages(ActionKind::backup, c, ref(id), n.pages);
    }
    n.pending[c] = true;
    ++pending_backups_;
}

// A device leaf goes whole. Under write-back, what has no host copy is backed up first: the SWA window (splitting
// a longer leaf: the upper part's SWA rows are freed without a copy), the Mamba state, then FULL of each part.
// The backups are emitted before the frees; the parts stay (pending) until `finish_backup`.
template <class... Cs>
void RadixTree<Cs...>::evict_whole(Id id, EvictOptions options, detail::ActionsBuilder& out, EvictResult& result) {
    Id upper = npos;
    if (options.write_back == EvictBackups::on) {
        if (components::has_swa && nodes_[id].swa && !has_host(nodes_[id], Component::swa)) {
            upper = split_window(id);
            start_backup(id, Component::swa, out);
        }
        if (components::has_mamba && nodes_[id].state.is_valid() && !has_host(nodes_[id], Component::mamba))
            start_backup(id, Component::mamba, out);
        if (upper != npos && !has_host(nodes_[upper], Component::full)) start_backup(upper, Component::full, out);
        if (!has_host(nodes_[id], Component::full)) start_backup(id, Component::full, out);
    }
    if (upper != npos) free_device_data(upper, out, result);
    free_device_data(id, out, result);
}

// Drops component `c` (Swa or Mamba) of a node that stays, without backup.
template <class... Cs>
void RadixTree<Cs...>::drop_rows(Id id, Component c, detail::ActionsBuilder& out, EvictResult& result) {
    Node& n = nodes_[id];
    account(id, c, -1);
    result.device_freed[c] += units(n, c);
    emit(EventKind::removed, c, Tier::device, id);
    if (c == Component::swa) {
        out.free_swa(n.pages);
        n.swa = false;
    } else {
        out.free_state(n.state);
        n.state = StateId{};
    }
    sync(id);
}

// Drops component `c` (Swa or Mamba) from a node that stays; SWA cascades to the node's unlocked Mamba state.
// Under write-back, data without a host copy is backed up first (SWA: one window before the node's end).
template <class... Cs>
void RadixTree<Cs...>::drop_device(Id id, Component c, EvictOptions options, detail::ActionsBuilder& out,
                                   EvictResult& result) {
    Id upper = npos;
    if (options.write_back == EvictBackups::on && !has_host(nodes_[id], c) && !nodes_[id].pending[c]) {
        if (c == Component::swa) upper = split_window(id);
        start_backup(id, c, out);
    }
    if (upper != npos) drop_rows(upper, Component::swa, out, result);
    drop_rows(id, c, out, result);
    if (c == Component::swa && components::has_mamba && nodes_[id].state.is_valid() &&
        nodes_[id].locks[Component::mamba] == 0)
        drop_device(id, Component::mamba, options, out, result);
}

template <class... Cs>
void RadixTree<Cs...>::free_host_value(Id id, Component c, detail::ActionsBuilder& out, EvictResult& result) {
    Node& n = nodes_[id];
    const std::int64_t u = units(n, c);
    if (c == Component::mamba) {
        out.free_host(Component::mamba, std::span<const HostPage>(&n.state_host, 1));
        n.state_host = HostPage{};
    } else {
        out.free_host(c, n.host_pages[index_of(c)]);
        n.host_pages[index_of(c)].clear();
    }
    // The value is gone: its parts below no longer continue into this node, nor this node into its parent.
    if (c != Component::mamba) {
        n.write_bits &= static_cast<std::uint8_t>(~joined_bit(c));
        for (Id x = n.first_child; x != npos; x = nodes_[x].next_sibling)
            nodes_[x].write_bits &= static_cast<std::uint8_t>(~joined_bit(c));
    }
    host_[c] -= u;
    result.host_freed[c] += u;
    emit(EventKind::removed, c, Tier::host, id);
}

template <class... Cs>
void RadixTree<Cs...>::drop_host(Id id, Component c, detail::ActionsBuilder& out, EvictResult& result) {
    free_host_value(id, c, out, result);
    // The Mamba copy goes with the SWA copy only where it is host-only: beside its device state it may be a
    // write-through still copying (the write's device lock keeps the state), and `drop_host` undoes that one.
    const Node& n = nodes_[id];
    if (c == Component::swa && has_host(n, Component::mamba) && !has_device(n, Component::mamba) &&
        n.host_locks[Component::mamba] == 0)
        free_host_value(id, Component::mamba, out, result);
    sync(id);
}

template <class... Cs>
void RadixTree<Cs...>::remove_node(Id id, detail::ActionsBuilder& out, EvictResult& result) {
    free_device_data(id, out, result);
    for (Component c : all_components)
        if (has_host(nodes_[id], c)) free_host_value(id, c, out, result);
    unlink(id);
}

// Detaches a childless node whose data is already freed, and frees its slot.
template <class... Cs>
void RadixTree<Cs...>::unlink(Id id) noexcept {
    Node& n = nodes_[id];
    UNIKV_ASSERT(n.children == 0 && n.pages.empty() && !n.state.is_valid() && !has_host(n, Component::full) &&
                 !has_host(n, Component::swa) && !has_host(n, Component::mamba));
    for (std::size_t h = 0; h < heap_count; ++h) {
        if (n.heap_pos[h] == npos) continue;
        HeapContext ctx{*this, h};
        heaps_[h].erase(id, ctx);
    }
    const Id parent = n.parent;
    edges_.erase(parent, n.key_hash, id);
    unlink_child(id);
    free_slot(id);
    sync(parent);
}

// Deletes `id` and then its ancestors while each is a childless, unlocked node that cannot end a match.
template <class... Cs>
void RadixTree<Cs...>::collect(Id id, detail::ActionsBuilder& out, EvictResult& result) {
    while (id != root && nodes_[id].children == 0 && cannot_end_match(nodes_[id]) && device_unlocked(nodes_[id]) &&
           host_unlocked(nodes_[id])) {
        const Id parent = nodes_[id].parent;
        remove_node(id, out, result);
        id = parent;
    }
}

// The same for nodes that hold no data at all, which can be removed without any action (after an unlock).
template <class... Cs>
void RadixTree<Cs...>::collect_empty(Id id) noexcept {
    const auto empty = [](const Node& n) {
        return !keeps(n, Component::full) && !keeps(n, Component::swa) && !keeps(n, Component::mamba);
    };
    while (id != root && nodes_[id].children == 0 && empty(nodes_[id]) && device_unlocked(nodes_[id]) &&
           host_unlocked(nodes_[id])) {
        const Id parent = nodes_[id].parent;
        unlink(id);
        id = parent;
    }
}

// The highest node from `id` up with FULL data in no tier (its FULL copy failed): a match needs FULL on every node
// of its path, so nothing below it can be matched (an insert of its tokens would adopt it again). npos if none.
template <class... Cs>
auto RadixTree<Cs...>::unreachable_top(Id id) const noexcept -> Id {
    Id top = npos;
    for (Id x = id; x != root; x = nodes_[x].parent)
        if (!keeps(nodes_[x], Component::full)) top = x;
    return top;
}

// Removes every node below `top` that can go, freeing its host copies (descendants of a node without FULL data
// hold no device data: it is prefix-closed). A node with a lock or a backup in flight stays, and so do its
// ancestors; its own `finish_backup` runs this again. Post-order, siblings in token order, so both cores free in
// the same order. Cold path (a FULL copy failed): O(s log s) for s nodes below `top`, and the traversal's scratch.
template <class... Cs>
void RadixTree<Cs...>::drop_unreachable(Id top, detail::ActionsBuilder& out, EvictResult& result) {
    const auto ps = static_cast<std::ptrdiff_t>(config_.page_size.tokens);
    const auto by_first_page = [&](Id a, Id b) {
        const TokenId* x = nodes_[a].tokens.data();
        const TokenId* y = nodes_[b].tokens.data();
        return std::lexicographical_compare(x, x + ps, y, y + ps);
    };
    // Each frame's children, sorted, sit in order[begin, end) until the frame is popped. The walk only collects
    // (a failed allocation changes nothing); the removals follow, children before their parents.
    struct Frame {
        Id node;
        std::size_t begin, next, end;
        bool children_go;  // every child popped so far is removed
    };
    std::vector<Id> order;
    std::vector<Frame> stack;
    std::vector<Id> doomed;
    const auto push = [&](Id id) {
        const std::size_t begin = order.size();
        for (Id c = nodes_[id].first_child; c != npos; c = nodes_[c].next_sibling) order.push_back(c);
        std::sort(order.begin() + static_cast<std::ptrdiff_t>(begin), order.end(), by_first_page);
        stack.push_back({id, begin, begin, order.size(), true});
    };
    push(top);
    while (!stack.empty()) {
        if (stack.back().next < stack.back().end) {
            push(order[stack.back().next++]);
            continue;
        }
        const Frame f = stack.back();
        stack.pop_back();
        order.resize(f.begin);
        const Node& n = nodes_[f.node];
        const bool goes = f.node != top && f.children_go && device_unlocked(n) && host_unlocked(n);
        if (goes) doomed.push_back(f.node);
        if (!stack.empty()) stack.back().children_go = stack.back().children_go && goes;
    }
    for (Id id : doomed) remove_node(id, out, result);
}

template <class... Cs>
EvictResult RadixTree<Cs...>::evict(Component component, std::int64_t amount, EvictOptions options) {
    expect_live();
    UNIKV_EXPECTS(components::mask.has(component), "component ", to_string(component), " is not in this tree");
    UNIKV_EXPECTS(amount >= 0, "negative amount ", amount);
    expect_no_pending();
    EvictResult result;
    detail::ActionsBuilder out{result.actions};
    const Component c = component;
    auto& candidates = heaps_[device_heap(c)];
    HeapContext ctx{*this, device_heap(c)};
    while (result.device_freed[c] < amount && !candidates.empty()) {
        const Id id = candidates.top(ctx);
        if (c == Component::full || device_candidate(id, Component::full)) {
            evict_whole(id, options, out, result);
        } else {
            drop_device(id, c, options, out, result);
        }
        collect(id, out, result);
    }
    return result;
}

template <class... Cs>
EvictResult RadixTree<Cs...>::evict_host(Component component, std::int64_t amount) {
    expect_live();
    UNIKV_EXPECTS(components::mask.has(component), "component ", to_string(component), " is not in this tree");
    UNIKV_EXPECTS(amount >= 0, "negative amount ", amount);
    expect_no_pending();
    EvictResult result;
    detail::ActionsBuilder out{result.actions};
    const Component c = component;
    auto& candidates = heaps_[host_heap(c)];
    HeapContext ctx{*this, host_heap(c)};
    while (result.host_freed[c] < amount && !candidates.empty()) {
        const Id id = candidates.top(ctx);
        if (c == Component::full || host_candidate(id, Component::full)) {
            const Id parent = nodes_[id].parent;
            remove_node(id, out, result);
            collect(parent, out, result);
        } else {
            drop_host(id, c, out, result);
            collect(id, out, result);
        }
    }
    return result;
}

// ---------------------------------------------------------------------------------------------------------
// host values and retention

// The parts of the pending write or host copy of component `c` that `id` holds, bottom-up. Splits cut a value into
// a chain of nodes, each lower part linked to its parent by `joined_bit`, and a node has at most one joined child
// (its lower part; later children are new nodes): down to the chain's bottom, then up. O(parts + their children).
template <class... Cs>
void RadixTree<Cs...>::write_parts(Id id, Component c, std::vector<Id>& out) const {
    for (Id x = nodes_[id].first_child; x != npos;) {
        if (joined(nodes_[x], c)) {
            id = x;
            x = nodes_[x].first_child;
        } else {
            x = nodes_[x].next_sibling;
        }
    }
    out.assign(1, id);
    while (joined(nodes_[out.back()], c)) out.push_back(nodes_[out.back()].parent);
}

template <class... Cs>
void RadixTree<Cs...>::set_host(NodeRef node, Component component, std::span<const HostPage> host) {
    const Id id = checked(node, "set_host");
    const Component c = component;
    UNIKV_EXPECTS(components::mask.has(component), "component ", to_string(component), " is not in this tree");
    expect_no_pending();
    UNIKV_EXPECTS(id != root, "the root holds no data");
    Node& n = nodes_[id];
    UNIKV_EXPECTS(has_device(n, c), "the node has no device data of component ", to_string(component), " to back up");
    UNIKV_EXPECTS(!has_host(n, c), "the node already has a host copy of component ", to_string(component));
    // A pending write-through covers every part of its node; a plain commit only the node.
    if (write_pending(n, c)) {
        write_parts(id, c, path_);
    } else {
        path_.assign(1, id);
    }
    std::size_t want = 0;
    for (Id x : path_) want += c == Component::mamba ? 1 : nodes_[x].pages.size();
    UNIKV_EXPECTS(host.size() == want, "got ", host.size(), " host pages, the node needs ", want);
    for (HostPage h : host) UNIKV_EXPECTS(h.is_valid(), "invalid host page ", h);
    for (std::size_t i = path_.size(), at = 0; i-- > 0;) {
        const Id x = path_[i];
        Node& part = nodes_[x];
        if (c == Component::mamba) {
            part.state_host = host[0];
        } else {
            const auto slice = host.subspan(at, part.pages.size());
            part.host_pages[index_of(c)].assign(slice.begin(), slice.end());
            at += slice.size();
        }
        part.write_bits &= static_cast<std::uint8_t>(~pending_bit(c));
        host_[c] += units(part, c);
        emit(EventKind::stored, c, Tier::host, x);
        sync(x);
    }
}

template <class... Cs>
void RadixTree<Cs...>::skip_write_through(NodeRef node, Component component) {
    const Id id = checked(node, "skip_write_through");
    const Component c = component;
    UNIKV_EXPECTS(components::mask.has(component), "component ", to_string(component), " is not in this tree");
    UNIKV_EXPECTS(write_pending(nodes_[id], c), "no write-through of component ", to_string(component),
                  " is pending on this node");
    write_parts(id, c, path_);
    for (Id x : path_) {
        nodes_[x].write_bits &= static_cast<std::uint8_t>(~(pending_bit(c) | joined_bit(c)));
        sync(x);
    }
}

template <class... Cs>
EvictResult RadixTree<Cs...>::drop_host(NodeRef node, Component component, HostDrop why) {
    const Id id = checked(node, "drop_host");
    const Component c = component;
    UNIKV_EXPECTS(components::mask.has(component), "component ", to_string(component), " is not in this tree");
    UNIKV_EXPECTS(why != HostDrop::stored || c != Component::mamba,
                  "drop_host: HostDrop::stored marks FULL and SWA data; Mamba states are not staged");
    expect_no_pending();
    const Node& n = nodes_[id];
    UNIKV_EXPECTS(has_host(n, c) && has_device(n, c), "drop_host: the node holds no host copy of component ",
                  to_string(component), " beside its device data");
    write_parts(id, c, path_);
    EvictResult result;
    detail::ActionsBuilder out{result.actions};
    for (std::size_t i = path_.size(); i-- > 0;) {
        const Id x = path_[i];
        // A stored copy's part without device data beside it is that part's only copy: it stays, cut off from the
        // parts that go (freeing a part unjoins its neighbours).
        if (why == HostDrop::stored && !has_device(nodes_[x], c)) continue;
        free_host_value(x, c, out, result);
        if (why == HostDrop::stored) nodes_[x].write_bits |= stored_bit(c);
        sync(x);
    }
    return result;
}

template <class... Cs>
EvictResult RadixTree<Cs...>::finish_backup(NodeRef node, Component component, std::span<const HostPage> host) {
    const Id id = checked(node, "finish_backup");
    UNIKV_EXPECTS(components::mask.has(component), "component ", to_string(component), " is not in this tree");
    const Component c = component;
    Node& n = nodes_[id];
    UNIKV_EXPECTS(n.pending[c], "no backup of component ", to_string(component), " is pending on this node");
    // The node's own page count: a FULL backup's device pages are already gone.
    const std::size_t want = c == Component::mamba ? 1 : static_cast<std::size_t>(n.length / config_.page_size.tokens);
    UNIKV_EXPECTS(host.empty() || host.size() == want, "got ", host.size(), " host pages, the node needs ", want);
    for (HostPage h : host) UNIKV_EXPECTS(h.is_valid(), "invalid host page ", h);
    if (!host.empty()) {
        if (c == Component::mamba) {
            n.state_host = host[0];
        } else {
            n.host_pages[index_of(c)].assign(host.begin(), host.end());
        }
        host_[c] += units(n, c);
        emit(EventKind::stored, c, Tier::host, id);
    }
    n.pending[c] = false;
    --pending_backups_;
    sync(id);
    EvictResult result;
    detail::ActionsBuilder out{result.actions};
    if (any_pending(nodes_[id])) return result;
    const Id top = unreachable_top(id);
    if (top == npos || any_pending(nodes_[top])) {
        collect(id, out, result);
    } else {
        drop_unreachable(top, out, result);
        collect(top, out, result);
    }
    return result;
}

template <class... Cs>
void RadixTree<Cs...>::commit_load_back(NodeRef node, Component component, const LoadedValue& value) {
    const Id id = checked(node, "commit_load_back");
    UNIKV_EXPECTS(components::mask.has(component), "component ", to_string(component), " is not in this tree");
    expect_no_pending();
    UNIKV_EXPECTS(id != root, "the root holds no data");
    const Component c = component;
    Node& n = nodes_[id];
    UNIKV_EXPECTS(!has_device(n, c), "the node already has device data of component ", to_string(component));
    UNIKV_EXPECTS(has_host(n, c), "the node has no host copy of component ", to_string(component), " to load");
    UNIKV_EXPECTS(c == Component::mamba ? value.state.is_valid() : !value.state.is_valid(),
                  c == Component::mamba ? "a Mamba load-back needs the loaded state"
                                        : "only a Mamba load-back takes a state");
    if (c == Component::full) {
        const auto want = static_cast<std::size_t>(n.length / config_.page_size.tokens);
        UNIKV_EXPECTS(value.pages.size() == want, "got ", value.pages.size(), " pages, the node needs ", want);
        for (VirtualPage p : value.pages) UNIKV_EXPECTS(p.is_valid(), "invalid page ", p);
        UNIKV_EXPECTS(n.parent == root || !nodes_[n.parent].pages.empty(),
                      "load the parent's FULL rows first: FULL device data is prefix-closed");
        set_pages(id, value.pages);
        emit(EventKind::stored, Component::full, Tier::device, id);
        sync(n.parent);
    } else {
        UNIKV_EXPECTS(value.pages.empty(), "only a Full load-back takes pages");
        UNIKV_EXPECTS(!n.pages.empty(), "load the node's FULL rows first: SWA rows and Mamba states sit on FULL pages");
        if (c == Component::swa) {
            n.swa = true;
        } else {
            n.state = value.state;
        }
        account(id, c, +1);
        emit(EventKind::stored, c, Tier::device, id);
    }
    sync(id);
}

template <class... Cs>
std::span<const LoadBackStep> RadixTree<Cs...>::load_back_plan(NodeRef node) {
    const Id target = checked(node, "load_back_plan");
    expect_no_pending();
    path_to(target, path_);
    const char* const unservable = "load_back_plan: a component cannot serve the node from any tier";
    // Path indices from `window_from` on lie in the last SWA window before the node's end (whole nodes).
    std::size_t window_from = path_.size();
    if constexpr (components::has_swa) {
        for (std::int64_t covered = 0; window_from > 0 && covered < config_.swa_window;) {
            const Node& n = nodes_[path_[--window_from]];
            UNIKV_EXPECTS(n.swa || has_host(n, Component::swa), unservable);
            covered += n.length;
        }
    }
    plan_.clear();
    for (std::size_t i = 0; i < path_.size(); ++i) {
        const Node& n = nodes_[path_[i]];
        const auto step = [&](Component c, std::span<const HostPage> host) {
            // An SWA step binds under the node's FULL pages (none yet when a FULL step above loads them).
            const std::span<const VirtualPage> full = c == Component::swa ? n.pages : std::span<const VirtualPage>{};
            plan_.push_back({ref(path_[i]), c, n.start, n.length, host, full});
        };
        if (n.pages.empty()) {
            UNIKV_EXPECTS(has_host(n, Component::full), unservable);
            step(Component::full, n.host_pages[index_of(Component::full)]);
        }
        if (components::has_swa && i >= window_from && !n.swa)
            step(Component::swa, n.host_pages[index_of(Component::swa)]);
        if (components::has_mamba && path_[i] == target && !n.state.is_valid()) {
            UNIKV_EXPECTS(has_host(n, Component::mamba), unservable);
            plan_state_host_ = n.state_host;  // held by the tree, not the node: node storage may move
            step(Component::mamba, std::span<const HostPage>(&plan_state_host_, 1));
        }
    }
    if (!loads_.empty()) {
        for (LoadBackStep& s : plan_) s.loading = loads_.loading(s.node.index(), s.component);
    }
    return plan_;
}

template <class... Cs>
std::size_t RadixTree<Cs...>::prefix_pages(NodeRef node, std::span<VirtualPage> out) const {
    const Id target = checked(node, "prefix_pages");
    const std::int32_t ps = config_.page_size.tokens;
    const auto count = static_cast<std::size_t>((nodes_[target].start + nodes_[target].length) / ps);
    UNIKV_EXPECTS(out.size() >= count, "prefix_pages: room for ", out.size(), " pages, the prefix has ", count);
    for (Id x = target; x != root; x = nodes_[x].parent) {
        UNIKV_EXPECTS(!nodes_[x].pages.empty(), "prefix_pages: tokens [", nodes_[x].start, ", ",
                      nodes_[x].start + nodes_[x].length, ") of the prefix have no FULL device data (acknowledge ",
                      "its load-back first)");
    }
    for (Id x = target; x != root; x = nodes_[x].parent) {
        const Node& n = nodes_[x];
        std::copy(n.pages.begin(), n.pages.end(), out.begin() + n.start / ps);
    }
    return count;
}

template <class... Cs>
void RadixTree<Cs...>::begin_load(NodeRef node, std::uint64_t id, const LoadedValue& dest,
                                  std::span<const LoadBackStep> plan) {
    const auto same = [&](const LoadBackStep& s) {
        return contains(s.node) && nodes_[s.node.index()].start == s.start && nodes_[s.node.index()].length == s.length;
    };
    const bool valid = !plan.empty() && std::all_of(plan.begin(), plan.end(), same);
    loads_.begin(id, valid ? plan : load_back_plan(node), dest);
}

template <class... Cs>
template <class MoveSwa>
LoadLeftovers RadixTree<Cs...>::finish_load(std::uint64_t id, bool copied, MoveSwa&& move_swa) {
    expect_live();
    const auto target = [&](NodeRef r) {
        const Node& n = nodes_[r.index()];
        detail::tree::LoadTarget t{.device = {}, .host = {}, .parent_full = n.parent == root || !nodes_[n.parent].pages.empty(),
                                   .pages = n.pages};
        for (Component c : all_components) {
            t.device[c] = in_set(c) && has_device(n, c);
            t.host[c] = in_set(c) && has_host(n, c);
        }
        return t;
    };
    return loads_.finish(
        id, copied, target, [&](NodeRef r, Component c, const LoadedValue& v) { commit_load_back(r, c, v); },
        move_swa);
}

template <class... Cs>
void RadixTree<Cs...>::set_retention(NodeRef node, std::uint8_t retention) {
    const Id id = checked(node, "set_retention");
    if (id == root) return;
    set_retention_of(id, retention);
    for (Id x = nodes_[id].parent; x != root; x = nodes_[x].parent)
        if (nodes_[x].retention < retention) set_retention_of(x, retention);
}

// ---------------------------------------------------------------------------------------------------------
// locks

// Calls visit(node, component) for every counter a receipt with these parts holds.
template <class... Cs>
template <class Visit>
void RadixTree<Cs...>::for_each_locked(Id anchor, ComponentMask parts, std::int32_t swa_start, Visit&& visit) const {
    if (parts.has(Component::full))
        for (Id x = anchor; x != root; x = nodes_[x].parent) visit(x, Component::full);
    if (parts.has(Component::swa))
        for (Id x = anchor; x != root && nodes_[x].start >= swa_start; x = nodes_[x].parent) visit(x, Component::swa);
    if (parts.has(Component::mamba) && anchor != root) visit(anchor, Component::mamba);
}

template <class... Cs>
void RadixTree<Cs...>::change_lock(Id id, Component c, Tier tier, LockStep step) {
    Node& n = nodes_[id];
    std::uint32_t& count = tier == Tier::device ? n.locks[c] : n.host_locks[c];
    const bool up = step == LockStep::acquire;
    if (up ? count++ != 0 : --count != 0) return;
    if (tier == Tier::device && has_device(n, c)) {
        const std::int64_t u = up ? units(n, c) : -units(n, c);
        evictable_[c] -= u;
        protected_[c] += u;
    }
    sync(id);
}

template <class... Cs>
LockReceipt RadixTree<Cs...>::lock(NodeRef node, LockOptions options) {
    const Id id = checked(node, "lock");
    const ComponentMask parts = options.components & components::mask;
    UNIKV_EXPECTS(options.tier == Tier::host || parts.has(Component::full),
                  "a device lock must include Full: SWA rows and Mamba states sit on FULL pages");
    std::int32_t swa_start = 0;
    if (parts.has(Component::swa)) {
        // The window segment: the anchor and its ancestors until W tokens are covered (tombstones count).
        std::int64_t covered = 0;
        for (Id x = id; x != root && covered < config_.swa_window; x = nodes_[x].parent) {
            covered += nodes_[x].length;
            swa_start = nodes_[x].start;
        }
    }
    for_each_locked(id, parts, swa_start,
                    [&](Id x, Component c) { change_lock(x, c, options.tier, LockStep::acquire); });
    return detail::ReceiptAccess::make(tree_id_, node, options.tier, parts, swa_start);
}

// Checks every counter the receipt claims before touching any, so a mismatch changes nothing.
template <class... Cs>
void RadixTree<Cs...>::release(LockReceipt& receipt, ComponentMask parts) {
    expect_live();
    UNIKV_EXPECTS(detail::ReceiptAccess::tree_id(receipt) == tree_id_, "the receipt belongs to another tree");
    if (parts.empty()) return;
    const Id id = checked(receipt.node(), "unlock");
    const Tier tier = receipt.tier();
    for_each_locked(id, parts, receipt.swa_segment_start(), [&](Id x, Component c) {
        const std::uint32_t count = tier == Tier::device ? nodes_[x].locks[c] : nodes_[x].host_locks[c];
        UNIKV_EXPECTS(count > 0, "the receipt does not match the locks on its path (component ", to_string(c),
                      ", slot ", x, ")");
    });
    for_each_locked(id, parts, receipt.swa_segment_start(),
                    [&](Id x, Component c) { change_lock(x, c, tier, LockStep::release); });
    collect_empty(id);
}

template <class... Cs>
void RadixTree<Cs...>::unlock(LockReceipt&& receipt) {
    expect_live();
    UNIKV_EXPECTS(!receipt.empty(), "the receipt is empty (moved from, or already unlocked)");
    release(receipt, detail::ReceiptAccess::held(receipt));
    detail::ReceiptAccess::consume(receipt);
}

template <class... Cs>
void RadixTree<Cs...>::release_swa(LockReceipt& receipt) {
    expect_live();
    UNIKV_EXPECTS(!receipt.empty(), "the receipt is empty (moved from, or already unlocked)");
    UNIKV_EXPECTS(receipt.holds(Component::swa), "the receipt holds no SWA lock");
    const ComponentMask held = detail::ReceiptAccess::held(receipt);
    release(receipt, held & ComponentMask::of(Component::swa).with(Component::mamba));
    detail::ReceiptAccess::set_held(receipt, held.without(Component::swa).without(Component::mamba));
}

}  // namespace unikv

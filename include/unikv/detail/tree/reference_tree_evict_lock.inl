#pragma once
// ReferenceTree: eviction (device and host), host values, load-backs, retention, locks, as docs/tree.md states
// them.

namespace unikv {

// ---------------------------------------------------------------------------------------------------------
// eviction

template <class... Cs>
auto ReferenceTree<Cs...>::oldest(Tier tier, Component c) const -> std::optional<Id> {
    std::optional<Id> best;
    auto key = [&](Id id) {
        const Node& n = nodes_[id];
        return std::tuple(n.retention, c == Component::swa ? n.window_class : 0, n.stamp[c], n.end());
    };
    for (Id id = 1; id < nodes_.size(); ++id) {
        if (!(tier == Tier::host ? host_candidate(id, c) : device_candidate(id, c))) continue;
        if (!best || key(id) < key(*best)) best = id;
    }
    return best;
}

template <class... Cs>
void ReferenceTree<Cs...>::evict_node_data(Id id, detail::ActionsBuilder& out, EvictResult& result) {
    Node& n = nodes_[id];
    if (!n.pages.empty()) {
        out.free_pages(n.pages);
        result.device_freed[Component::full] += n.length();
        emit(EventKind::removed, Component::full, Tier::device, id);
        if (n.swa) {
            result.device_freed[Component::swa] += n.length();
            emit(EventKind::removed, Component::swa, Tier::device, id);
        }
        n.pages.clear();
        n.swa = false;
    }
    if (n.state.is_valid()) {
        out.free_state(n.state);
        result.device_freed[Component::mamba] += 1;
        emit(EventKind::removed, Component::mamba, Tier::device, id);
        n.state = StateId{};
    }
}

// Under write-back only one window of SWA rows (rounded up to pages) before a segment's end is copied: a longer
// node is split there first. Returns the upper part when it split.
template <class... Cs>
auto ReferenceTree<Cs...>::window_split(Id id) -> std::optional<Id> {
    const std::int32_t ps = config_.page_size.tokens;
    const std::int32_t window = (config_.swa_window + ps - 1) / ps * ps;
    if (nodes_[id].length() <= window) return std::nullopt;
    return split(id, nodes_[id].length() - window);
}

template <class... Cs>
void ReferenceTree<Cs...>::backup(Id id, Component c, detail::ActionsBuilder& out) {
    Node& n = nodes_[id];
    if (c == Component::mamba) {
        out.copy_state(ActionKind::backup, ref(id), n.state);
    } else {
        out.copy_pages(ActionKind::backup, c, ref(id), n.pages);
    }
    n.pending[c] = true;
    ++pending_backups_;
}

// A device leaf goes whole; under write-back what has no host copy is backed up first: SWA window (tail part),
// Mamba state, FULL of the upper part, FULL of the tail.
template <class... Cs>
void ReferenceTree<Cs...>::evict_whole(Id id, EvictOptions options, detail::ActionsBuilder& out, EvictResult& result) {
    std::optional<Id> upper;
    if (options.write_back == EvictBackups::on) {
        if (has_device(nodes_[id], Component::swa) && !has_host(nodes_[id], Component::swa)) {
            upper = window_split(id);
            backup(id, Component::swa, out);
        }
        if (has_device(nodes_[id], Component::mamba) && !has_host(nodes_[id], Component::mamba))
            backup(id, Component::mamba, out);
        if (upper && !has_host(nodes_[*upper], Component::full)) backup(*upper, Component::full, out);
        if (!has_host(nodes_[id], Component::full)) backup(id, Component::full, out);
    }
    if (upper) evict_node_data(*upper, out, result);
    evict_node_data(id, out, result);
}

template <class... Cs>
void ReferenceTree<Cs...>::drop_without_backup(Id id, Component c, detail::ActionsBuilder& out, EvictResult& result) {
    Node& n = nodes_[id];
    if (c == Component::swa) {
        out.free_swa(n.pages);
        n.swa = false;
    } else {
        out.free_state(n.state);
        n.state = StateId{};
    }
    result.device_freed[c] += units(n, c);
    emit(EventKind::removed, c, Tier::device, id);
}

template <class... Cs>
void ReferenceTree<Cs...>::drop_device(Id id, Component c, EvictOptions options, detail::ActionsBuilder& out,
                                       EvictResult& result) {
    std::optional<Id> upper;
    if (options.write_back == EvictBackups::on && !has_host(nodes_[id], c) && !nodes_[id].pending[c]) {
        if (c == Component::swa) upper = window_split(id);
        backup(id, c, out);
    }
    if (upper) drop_without_backup(*upper, Component::swa, out, result);
    drop_without_backup(id, c, out, result);
    const Node& n = nodes_[id];
    if (c == Component::swa && components::has_mamba && n.state.is_valid() && n.locks[Component::mamba] == 0)
        drop_device(id, Component::mamba, options, out, result);
}

template <class... Cs>
EvictResult ReferenceTree<Cs...>::evict(Component component, std::int64_t amount, EvictOptions options) {
    expect_live();
    UNIKV_EXPECTS(components::mask.has(component), "component ", to_string(component), " is not in this tree");
    UNIKV_EXPECTS(amount >= 0, "negative amount ", amount);
    UNIKV_EXPECTS(pending_backups_ == 0, "a backup is pending: call finish_backup for every backup action first");
    EvictResult result;
    detail::ActionsBuilder out{result.actions};
    const Component c = component;
    while (result.device_freed[c] < amount) {
        const auto id = oldest(Tier::device, c);
        if (!id) break;
        if (c == Component::full || device_candidate(*id, Component::full)) {
            evict_whole(*id, options, out, result);
        } else {
            drop_device(*id, c, options, out, result);
        }
        collect(*id, out, result);
    }
    return result;
}

template <class... Cs>
void ReferenceTree<Cs...>::drop_host(Id id, Component c, detail::ActionsBuilder& out, EvictResult& result) {
    Node& n = nodes_[id];
    out.free_host(c, n.host[c]);
    result.host_freed[c] += units(n, c);
    emit(EventKind::removed, c, Tier::host, id);
    forget_host(id, c);
    if (c == Component::swa && has_host(n, Component::mamba) && !has_device(n, Component::mamba) &&
        n.host_locks[Component::mamba] == 0)  // host-only: see RadixTree
        drop_host(id, Component::mamba, out, result);
}

template <class... Cs>
EvictResult ReferenceTree<Cs...>::evict_host(Component component, std::int64_t amount) {
    expect_live();
    UNIKV_EXPECTS(components::mask.has(component), "component ", to_string(component), " is not in this tree");
    UNIKV_EXPECTS(amount >= 0, "negative amount ", amount);
    UNIKV_EXPECTS(pending_backups_ == 0, "a backup is pending: call finish_backup for every backup action first");
    EvictResult result;
    detail::ActionsBuilder out{result.actions};
    const Component c = component;
    while (result.host_freed[c] < amount) {
        const auto id = oldest(Tier::host, c);
        if (!id) break;
        if (c == Component::full || host_candidate(*id, Component::full)) {
            const Id parent = nodes_[*id].parent;
            remove_node(*id, out, result);
            collect(parent, out, result);
        } else {
            drop_host(*id, c, out, result);
            collect(*id, out, result);
        }
    }
    return result;
}

// ---------------------------------------------------------------------------------------------------------
// host values

template <class... Cs>
void ReferenceTree<Cs...>::set_host(NodeRef node, Component component, std::span<const HostPage> host) {
    const Id id = id_of(node, "set_host");
    const Component c = component;
    UNIKV_EXPECTS(components::mask.has(component), "component ", to_string(component), " is not in this tree");
    UNIKV_EXPECTS(pending_backups_ == 0, "a backup is pending: call finish_backup for every backup action first");
    UNIKV_EXPECTS(id != root, "the root holds no data");
    Node& n = nodes_[id];
    UNIKV_EXPECTS(has_device(n, c), "the node has no device data of component ", to_string(component), " to back up");
    UNIKV_EXPECTS(!has_host(n, c), "the node already has a host copy of component ", to_string(component));
    // A pending write-through covers every part of its node, top-down; a plain commit only the node.
    std::vector<Id> targets = n.write_pending[c] ? parts(id, c) : std::vector<Id>{id};
    std::reverse(targets.begin(), targets.end());
    std::size_t want = 0;
    for (Id x : targets) want += c == Component::mamba ? 1 : nodes_[x].pages.size();
    UNIKV_EXPECTS(host.size() == want, "got ", host.size(), " host pages, the node needs ", want);
    UNIKV_EXPECTS(std::all_of(host.begin(), host.end(), [](HostPage h) { return h.is_valid(); }), "invalid host page");
    std::size_t at = 0;
    for (Id x : targets) {
        const std::size_t count = c == Component::mamba ? 1 : nodes_[x].pages.size();
        nodes_[x].host[c].assign(host.begin() + static_cast<std::ptrdiff_t>(at),
                                 host.begin() + static_cast<std::ptrdiff_t>(at + count));
        at += count;
        nodes_[x].write_pending[c] = false;
        emit(EventKind::stored, c, Tier::host, x);
    }
}

// Every part of the value of `c` that `id` holds (the nodes one split value was cut into), bottom-up.
template <class... Cs>
auto ReferenceTree<Cs...>::parts(Id id, Component c) const -> std::vector<Id> {
    for (bool deeper = true; deeper;) {
        deeper = false;
        for (Id child : nodes_[id].children) {
            if (nodes_[child].joined[c]) {
                id = child;
                deeper = true;
                break;
            }
        }
    }
    std::vector<Id> out{id};
    while (nodes_[out.back()].joined[c]) out.push_back(nodes_[out.back()].parent);
    return out;
}

// Clears `id`'s host value of `c` and the split links through it.
template <class... Cs>
void ReferenceTree<Cs...>::forget_host(Id id, Component c) {
    nodes_[id].host[c].clear();
    nodes_[id].joined[c] = false;
    for (Id child : nodes_[id].children) nodes_[child].joined[c] = false;
}

template <class... Cs>
void ReferenceTree<Cs...>::skip_write_through(NodeRef node, Component component) {
    const Id id = id_of(node, "skip_write_through");
    const Component c = component;
    UNIKV_EXPECTS(components::mask.has(component), "component ", to_string(component), " is not in this tree");
    UNIKV_EXPECTS(nodes_[id].write_pending[c], "no write-through of component ", to_string(component),
                  " is pending on this node");
    for (Id x : parts(id, c)) {
        nodes_[x].write_pending[c] = false;
        nodes_[x].joined[c] = false;
    }
}

template <class... Cs>
EvictResult ReferenceTree<Cs...>::drop_host(NodeRef node, Component component, HostDrop why) {
    const Id id = id_of(node, "drop_host");
    const Component c = component;
    UNIKV_EXPECTS(components::mask.has(component), "component ", to_string(component), " is not in this tree");
    UNIKV_EXPECTS(why != HostDrop::stored || c != Component::mamba,
                  "drop_host: HostDrop::stored marks FULL and SWA data; Mamba states are not staged");
    UNIKV_EXPECTS(pending_backups_ == 0, "a backup is pending: call finish_backup for every backup action first");
    UNIKV_EXPECTS(has_host(nodes_[id], c) && has_device(nodes_[id], c), "drop_host: the node holds no host copy of component ",
                  to_string(component), " beside its device data");
    EvictResult result;
    detail::ActionsBuilder out{result.actions};
    std::vector<Id> targets = parts(id, c);
    std::reverse(targets.begin(), targets.end());
    for (Id x : targets) {
        // See RadixTree: a stored copy's part without device data beside it stays.
        if (why == HostDrop::stored && !has_device(nodes_[x], c)) continue;
        out.free_host(c, nodes_[x].host[c]);
        result.host_freed[c] += units(nodes_[x], c);
        emit(EventKind::removed, c, Tier::host, x);
        forget_host(x, c);
        if (why == HostDrop::stored) nodes_[x].stored[c] = true;
    }
    return result;
}

template <class... Cs>
EvictResult ReferenceTree<Cs...>::finish_backup(NodeRef node, Component component, std::span<const HostPage> host) {
    const Id id = id_of(node, "finish_backup");
    UNIKV_EXPECTS(components::mask.has(component), "component ", to_string(component), " is not in this tree");
    const Component c = component;
    UNIKV_EXPECTS(nodes_[id].pending[c], "no backup of component ", to_string(component), " is pending on this node");
    Node& n = nodes_[id];
    const std::size_t want =
        c == Component::mamba ? 1 : static_cast<std::size_t>(n.length() / config_.page_size.tokens);
    UNIKV_EXPECTS(host.empty() || host.size() == want, "got ", host.size(), " host pages, the node needs ", want);
    UNIKV_EXPECTS(std::all_of(host.begin(), host.end(), [](HostPage h) { return h.is_valid(); }), "invalid host page");
    if (!host.empty()) {
        n.host[c].assign(host.begin(), host.end());
        emit(EventKind::stored, c, Tier::host, id);
    }
    n.pending[c] = false;
    --pending_backups_;
    EvictResult result;
    detail::ActionsBuilder out{result.actions};
    if (!no_pending(nodes_[id])) return result;
    const auto top = unreachable_top(id);
    if (top && no_pending(nodes_[*top])) {
        drop_below(*top, out, result);
        collect(*top, out, result);
    } else {
        collect(id, out, result);
    }
    return result;
}

template <class... Cs>
void ReferenceTree<Cs...>::commit_load_back(NodeRef node, Component component, const LoadedValue& value) {
    const Id id = id_of(node, "commit_load_back");
    UNIKV_EXPECTS(components::mask.has(component), "component ", to_string(component), " is not in this tree");
    UNIKV_EXPECTS(pending_backups_ == 0, "a backup is pending: call finish_backup for every backup action first");
    UNIKV_EXPECTS(id != root, "the root holds no data");
    const Component c = component;
    Node& n = nodes_[id];
    UNIKV_EXPECTS(!has_device(n, c), "the node already has device data of this component");
    UNIKV_EXPECTS(has_host(n, c), "the node has no host copy of this component to load");
    UNIKV_EXPECTS((c == Component::mamba) == value.state.is_valid(),
                  "a state goes with a Mamba load-back, and only there");
    if (c == Component::full) {
        UNIKV_EXPECTS(value.pages.size() == static_cast<std::size_t>(n.length() / config_.page_size.tokens),
                      "one page per page of the node");
        UNIKV_EXPECTS(std::all_of(value.pages.begin(), value.pages.end(), [](VirtualPage p) { return p.is_valid(); }),
                      "invalid page");
        UNIKV_EXPECTS(n.parent == root || has_device(nodes_[n.parent], Component::full),
                      "load the parent's FULL rows first");
        n.pages.assign(value.pages.begin(), value.pages.end());
    } else {
        UNIKV_EXPECTS(value.pages.empty(), "only a Full load-back takes pages");
        UNIKV_EXPECTS(has_device(n, Component::full), "load the node's FULL rows first");
        if (c == Component::swa) {
            n.swa = true;
        } else {
            n.state = value.state;
        }
    }
    emit(EventKind::stored, c, Tier::device, id);
}

template <class... Cs>
std::span<const LoadBackStep> ReferenceTree<Cs...>::load_back_plan(NodeRef node) {
    const Id target = id_of(node, "load_back_plan");
    UNIKV_EXPECTS(pending_backups_ == 0, "a backup is pending: call finish_backup for every backup action first");
    const auto path = path_to(target);
    std::vector<bool> in_window(path.size(), false);
    if constexpr (components::has_swa) {
        std::int64_t covered = 0;
        for (std::size_t i = path.size(); i > 0 && covered < config_.swa_window; --i) {
            const Node& n = nodes_[path[i - 1]];
            UNIKV_EXPECTS(has_device(n, Component::swa) || has_host(n, Component::swa),
                          "an SWA window node has no SWA data in any tier");
            in_window[i - 1] = true;
            covered += n.length();
        }
    }
    plan_.clear();
    for (std::size_t i = 0; i < path.size(); ++i) {
        const Node& n = nodes_[path[i]];
        for (Component c : all_components) {
            const bool needed = c == Component::full || (c == Component::swa && in_window[i]) ||
                                (c == Component::mamba && path[i] == target);
            if (!in_set(c) || !needed || has_device(n, c)) continue;
            UNIKV_EXPECTS(has_host(n, c), "a component needed on the path has no data in any tier");
            const std::span<const VirtualPage> full =
                c == Component::swa ? std::span<const VirtualPage>(n.pages) : std::span<const VirtualPage>{};
            plan_.push_back({ref(path[i]), c, n.start, n.length(), n.host[c], full, loads_.loading(path[i], c)});
        }
    }
    return plan_;
}

template <class... Cs>
std::size_t ReferenceTree<Cs...>::prefix_pages(NodeRef node, std::span<VirtualPage> out) const {
    const Id target = id_of(node, "prefix_pages");
    std::vector<VirtualPage> pages;
    for (Id x : path_to(target)) {
        UNIKV_EXPECTS(has_device(nodes_[x], Component::full), "prefix_pages: a node of the prefix has no FULL device data");
        pages.insert(pages.end(), nodes_[x].pages.begin(), nodes_[x].pages.end());
    }
    UNIKV_EXPECTS(out.size() >= pages.size(), "prefix_pages: out is too small");
    std::copy(pages.begin(), pages.end(), out.begin());
    return pages.size();
}

template <class... Cs>
void ReferenceTree<Cs...>::begin_load(NodeRef node, std::uint64_t id, const LoadedValue& dest,
                                     std::span<const LoadBackStep> plan) {
    // Always planned afresh here: the simple core's answer is what the fast one's reuse of `plan` must match.
    (void)plan;
    loads_.begin(id, load_back_plan(node), dest);
}

template <class... Cs>
template <class MoveSwa>
LoadLeftovers ReferenceTree<Cs...>::finish_load(std::uint64_t id, bool copied, MoveSwa&& move_swa) {
    expect_live();
    const auto target = [&](NodeRef r) {
        const Node& n = nodes_[r.index()];
        detail::tree::LoadTarget t{.device = {}, .host = {},
                                   .parent_full = n.parent == root || has_device(nodes_[n.parent], Component::full),
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
void ReferenceTree<Cs...>::set_retention(NodeRef node, std::uint8_t retention) {
    const Id id = id_of(node, "set_retention");
    if (id == root) return;
    nodes_[id].retention = retention;
    for (Id x = nodes_[id].parent; x != root; x = nodes_[x].parent)
        nodes_[x].retention = std::max(nodes_[x].retention, retention);
}

// ---------------------------------------------------------------------------------------------------------
// locks

template <class... Cs>
LockReceipt ReferenceTree<Cs...>::lock(NodeRef node, LockOptions options) {
    const Id id = id_of(node, "lock");
    const ComponentMask parts = options.components & components::mask;
    UNIKV_EXPECTS(options.tier == Tier::host || parts.has(Component::full), "a device lock must include Full");
    auto count = [&](Id x, Component c) -> std::uint32_t& {
        return options.tier == Tier::device ? nodes_[x].locks[c] : nodes_[x].host_locks[c];
    };
    std::int32_t swa_start = 0;
    if (parts.has(Component::full))
        for (Id x : path_to(id)) ++count(x, Component::full);
    if (parts.has(Component::swa)) {
        std::int64_t covered = 0;
        for (Id x = id; x != root; x = nodes_[x].parent) {
            ++count(x, Component::swa);
            covered += nodes_[x].length();
            swa_start = nodes_[x].start;
            if (covered >= config_.swa_window) break;
        }
    }
    if (parts.has(Component::mamba) && id != root) ++count(id, Component::mamba);
    return detail::ReceiptAccess::make(tree_id_, node, options.tier, parts, swa_start);
}

template <class... Cs>
auto ReferenceTree<Cs...>::swa_segment(Id anchor, std::int32_t start) const -> std::vector<Id> {
    std::vector<Id> segment;
    for (Id x = anchor; x != root && nodes_[x].start >= start; x = nodes_[x].parent) segment.push_back(x);
    return segment;
}

template <class... Cs>
void ReferenceTree<Cs...>::check_receipt(const LockReceipt& r, ComponentMask parts) const {
    expect_live();
    UNIKV_EXPECTS(detail::ReceiptAccess::tree_id(r) == tree_id_, "the receipt belongs to another tree");
    if (parts.empty()) return;
    const Id id = id_of(r.node(), "unlock");
    auto count = [&](Id x, Component c) {
        return r.tier() == Tier::device ? nodes_[x].locks[c] : nodes_[x].host_locks[c];
    };
    if (parts.has(Component::full))
        for (Id x : path_to(id)) UNIKV_EXPECTS(count(x, Component::full) > 0, "no FULL lock on the receipt's path");
    if (parts.has(Component::swa))
        for (Id x : swa_segment(id, r.swa_segment_start()))
            UNIKV_EXPECTS(count(x, Component::swa) > 0, "no SWA lock on the receipt's window");
    if (parts.has(Component::mamba) && id != root)
        UNIKV_EXPECTS(count(id, Component::mamba) > 0, "no Mamba lock on the receipt's node");
}

template <class... Cs>
void ReferenceTree<Cs...>::apply_release(const LockReceipt& r, ComponentMask parts) {
    if (parts.empty()) return;
    const Id id = r.node().index();
    auto count = [&](Id x, Component c) -> std::uint32_t& {
        return r.tier() == Tier::device ? nodes_[x].locks[c] : nodes_[x].host_locks[c];
    };
    if (parts.has(Component::full))
        for (Id x : path_to(id)) --count(x, Component::full);
    if (parts.has(Component::swa))
        for (Id x : swa_segment(id, r.swa_segment_start())) --count(x, Component::swa);
    if (parts.has(Component::mamba) && id != root) --count(id, Component::mamba);
    collect_empty(id);
}

template <class... Cs>
void ReferenceTree<Cs...>::unlock(LockReceipt&& receipt) {
    expect_live();
    UNIKV_EXPECTS(!receipt.empty(), "the receipt is empty (moved from, or already unlocked)");
    const ComponentMask parts = detail::ReceiptAccess::held(receipt);
    check_receipt(receipt, parts);
    apply_release(receipt, parts);
    detail::ReceiptAccess::consume(receipt);
}

template <class... Cs>
void ReferenceTree<Cs...>::release_swa(LockReceipt& receipt) {
    expect_live();
    UNIKV_EXPECTS(!receipt.empty(), "the receipt is empty (moved from, or already unlocked)");
    UNIKV_EXPECTS(receipt.holds(Component::swa), "the receipt holds no SWA lock");
    const ComponentMask held = detail::ReceiptAccess::held(receipt);
    const ComponentMask parts = held & ComponentMask::of(Component::swa).with(Component::mamba);
    check_receipt(receipt, parts);
    apply_release(receipt, parts);
    detail::ReceiptAccess::set_held(receipt, held.without(Component::swa).without(Component::mamba));
}

}  // namespace unikv

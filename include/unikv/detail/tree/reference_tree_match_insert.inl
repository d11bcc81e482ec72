#pragma once
// ReferenceTree: match_prefix, insert and insert_host, as docs/tree.md states them.

namespace unikv {

// ---------------------------------------------------------------------------------------------------------
// match

template <class... Cs>
MatchResult ReferenceTree<Cs...>::match_prefix(TokenKey key, MatchOptions options) {
    expect_live();
    UNIKV_EXPECTS(pending_backups_ == 0, "a backup is pending: call finish_backup for every backup action first");
    const std::int32_t ps = config_.page_size.tokens;
    const auto usable = static_cast<std::int32_t>(key.tokens.size()) / ps * ps;
    std::vector<Id> path;
    Id cur = root;
    std::int32_t pos = 0;
    while (pos < usable) {
        const auto child = find_child(cur, key.ns, key.tokens.subspan(pos, ps));
        if (!child) break;
        const Node& n = nodes_[*child];
        std::int32_t m = 0;
        while (m < n.length() && pos + m < usable &&
               std::equal(n.tokens.begin() + m, n.tokens.begin() + m + ps, key.tokens.begin() + pos + m)) {
            m += ps;
        }
        const Id hit = m < n.length() ? split(*child, m) : *child;
        path.push_back(hit);
        pos += m;
        cur = hit;
    }

    constexpr std::int64_t unbroken = std::numeric_limits<std::int64_t>::max() / 2;
    const std::int64_t window = config_.swa_window;
    std::int64_t swa_device_run = unbroken;
    std::int64_t swa_any_run = unbroken;
    bool full_device = true;
    bool full_any = true;
    Id device_node = root;
    Id best = root;
    MatchResult r;
    for (Id id : path) {
        const Node& n = nodes_[id];
        full_device = full_device && has_device(n, Component::full);
        full_any = full_any && (has_device(n, Component::full) || has_host(n, Component::full));
        if (!full_any) break;
        bool swa_device_ok = true, swa_any_ok = true, mamba_device_ok = true, mamba_any_ok = true;
        if constexpr (components::has_swa) {
            swa_device_run = has_device(n, Component::swa) ? swa_device_run + n.length() : 0;
            swa_any_run = (has_device(n, Component::swa) || has_host(n, Component::swa)) ? swa_any_run + n.length() : 0;
            swa_device_ok = swa_device_run >= window;
            swa_any_ok = swa_any_run >= window;
        }
        if constexpr (components::has_mamba) {
            mamba_device_ok = has_device(n, Component::mamba);
            mamba_any_ok = mamba_device_ok || has_host(n, Component::mamba);
        }
        if (full_device) {
            r.full_length = n.end();
            if (swa_device_ok && mamba_device_ok) device_node = id;
            if (components::has_swa && mamba_device_ok) r.swa_branching_length = n.end();
            if (components::has_mamba && swa_device_ok) r.mamba_branching_length = n.end();
        }
        if (swa_any_ok && mamba_any_ok) best = id;
    }
    if (options.host_hits == HostHits::exclude) best = device_node;

    r.device_node = ref(device_node);
    r.device_length = nodes_[device_node].end();
    r.best_node = ref(best);
    r.best_length = nodes_[best].end();
    r.host_hit_length = r.best_length - r.device_length;
    if (r.swa_branching_length <= r.device_length) r.swa_branching_length = 0;
    if (r.mamba_branching_length <= r.device_length) r.mamba_branching_length = 0;
    if (components::has_swa && options.host_hits == HostHits::include) {
        std::int64_t seen = 0;
        for (Id x = best; x != root && seen < window; x = nodes_[x].parent) {
            const Node& n = nodes_[x];
            if (!has_device(n, Component::swa) && !has_host(n, Component::swa)) break;
            if (!has_device(n, Component::swa)) r.swa_host_hit_length += n.length();
            seen += n.length();
        }
    }
    match_runs_.clear();
    for (Id x : path_to(device_node)) match_runs_.emplace_back(nodes_[x].pages);
    r.device_pages = PageRuns(match_runs_, static_cast<std::size_t>(r.device_length / ps));
    refresh(best);
    return r;
}

// The lengths match_prefix would return, without splitting: a node the walk ends inside is judged as the upper part
// a split would make of it (same FULL, SWA and host presence over the matched tokens, no Mamba state).
template <class... Cs>
PrefixPeek ReferenceTree<Cs...>::peek_prefix(TokenKey key) const {
    expect_live();
    const std::int32_t ps = config_.page_size.tokens;
    const auto usable = static_cast<std::int32_t>(key.tokens.size()) / ps * ps;
    constexpr std::int64_t unbroken = std::numeric_limits<std::int64_t>::max() / 2;
    const std::int64_t window = config_.swa_window;
    std::int64_t swa_device_run = unbroken;
    std::int64_t swa_any_run = unbroken;
    bool full_device = true;
    bool full_any = true;
    PrefixPeek r;
    Id cur = root;
    std::int32_t pos = 0;
    while (pos < usable) {
        const auto child = find_child(cur, key.ns, key.tokens.subspan(pos, ps));
        if (!child) break;
        const Node& n = nodes_[*child];
        std::int32_t m = 0;
        while (m < n.length() && pos + m < usable &&
               std::equal(n.tokens.begin() + m, n.tokens.begin() + m + ps, key.tokens.begin() + pos + m)) {
            m += ps;
        }
        const bool whole = m == n.length();
        full_device = full_device && has_device(n, Component::full);
        full_any = full_any && (has_device(n, Component::full) || has_host(n, Component::full));
        if (!full_any) break;
        bool swa_device_ok = true, swa_any_ok = true, mamba_device_ok = true, mamba_any_ok = true;
        if constexpr (components::has_swa) {
            swa_device_run = has_device(n, Component::swa) ? swa_device_run + m : 0;
            swa_any_run = (has_device(n, Component::swa) || has_host(n, Component::swa)) ? swa_any_run + m : 0;
            swa_device_ok = swa_device_run >= window;
            swa_any_ok = swa_any_run >= window;
        }
        if constexpr (components::has_mamba) {
            mamba_device_ok = whole && has_device(n, Component::mamba);
            mamba_any_ok = whole && (has_device(n, Component::mamba) || has_host(n, Component::mamba));
        }
        if (full_device && swa_device_ok && mamba_device_ok) r.device_length = n.start + m;
        if (swa_any_ok && mamba_any_ok) r.best_length = n.start + m;
        if (!whole) break;
        pos += m;
        cur = *child;
    }
    return r;
}

// ---------------------------------------------------------------------------------------------------------
// insert

template <class... Cs>
InsertResult ReferenceTree<Cs...>::insert(TokenKey key, const InsertValues& values) {
    const std::int32_t ps = config_.page_size.tokens;
    const auto length = static_cast<std::int32_t>(key.tokens.size());
    expect_live();
    UNIKV_EXPECTS(pending_backups_ == 0, "a backup is pending: call finish_backup for every backup action first");
    UNIKV_EXPECTS(length % ps == 0, "a key of ", length, " tokens is not a whole number of ", ps, "-token pages");
    UNIKV_EXPECTS(static_cast<std::int64_t>(values.pages.size()) * ps == length, values.pages.size(),
                  " pages given for ", length, " tokens");
    UNIKV_EXPECTS(std::all_of(values.pages.begin(), values.pages.end(), [](VirtualPage p) { return p.is_valid(); }),
                  "a page id is invalid");
    if constexpr (components::has_swa) {
        UNIKV_EXPECTS(values.swa_evicted >= 0 && values.swa_evicted <= length && values.swa_evicted % ps == 0,
                      "swa_evicted ", values.swa_evicted, " is not a page-aligned position in the key");
    }
    UNIKV_EXPECTS(length > 0 || !values.state.is_valid(), "a Mamba state needs a non-empty key");

    InsertResult result;
    InsertState st{key, values, detail::ActionsBuilder{result.actions}};
    beside_host_ = false;
    Id cur = root;
    std::int32_t pos = 0;
    while (pos < length) {
        const auto child = find_child(cur, key.ns, key.tokens.subspan(pos, ps));
        if (!child) {
            cur = add_leaves(cur, pos, st);
            break;
        }
        const Node& n = nodes_[*child];
        std::int32_t m = 0;
        while (m < n.length() && pos + m < length &&
               std::equal(n.tokens.begin() + m, n.tokens.begin() + m + ps, key.tokens.begin() + pos + m)) {
            m += ps;
        }
        const Id hit = m < n.length() ? split(*child, m) : *child;
        result.prefix_length += m;
        cur = overlap(hit, st);
        pos += m;
    }
    if (components::has_mamba && values.state.is_valid()) {
        if (nodes_[cur].state.is_valid()) {
            st.out.free_state(values.state);
        } else {
            nodes_[cur].state = values.state;
            emit(EventKind::stored, Component::mamba, Tier::device, cur);
        }
    }
    const std::vector<Id> path = path_to(cur);
    for (Id x : path) {
        nodes_[x].retention = std::max(nodes_[x].retention, values.retention);
        // The window before the key's end: the nodes that hold any of its last W tokens.
        if (components::has_swa && nodes_[x].end() > length - config_.swa_window)
            nodes_[x].window_class = std::max(nodes_[x].window_class, values.window_class);
    }
    count_hits(path, length, st.out);
    refresh(cur);
    result.node = ref(cur);
    result.beside_host = beside_host_;
    return result;
}

template <class... Cs>
auto ReferenceTree<Cs...>::overlap(Id id, InsertState& st) -> Id {
    const std::int32_t ps = config_.page_size.tokens;
    const std::int32_t a = nodes_[id].start;
    const std::int32_t b = nodes_[id].end();
    const auto in = st.values.pages.subspan(static_cast<std::size_t>(a / ps), static_cast<std::size_t>((b - a) / ps));
    const std::int32_t live_from = components::has_swa ? st.values.swa_evicted : 0;
    if (!nodes_[id].pages.empty()) {
        const auto& mine = nodes_[id].pages;
        bool shared = false;
        for (std::size_t i = 0; i < in.size(); ++i) shared = shared || in[i] == mine[i];
        if (components::has_swa && !nodes_[id].swa && !shared && live_from < b &&
            !loads_.loading(id, Component::swa)) {  // a load may be binding SWA rows under these pages: see RadixTree
            const auto dead_pages = static_cast<std::size_t>(std::max(0, live_from - a) / ps);
            if (dead_pages > 0) {
                split(id, live_from - a);
                st.out.free_pages(in.first(dead_pages));
            }
            recover_swa(id, in.subspan(dead_pages), st.out);
            return id;
        }
        for (std::size_t i = 0; i < in.size(); ++i)
            if (in[i] != nodes_[id].pages[i]) st.out.free_pages(in.subspan(i, 1));
        return id;
    }
    if (components::has_swa && a < live_from && live_from < b) {
        const auto dead_pages = static_cast<std::size_t>((live_from - a) / ps);
        const Id upper = split(id, live_from - a);
        adopt(upper, in.first(dead_pages), SwaRows::tombstone);
        adopt(id, in.subspan(dead_pages), SwaRows::live);
    } else {
        adopt(id, in, components::has_swa && live_from <= a ? SwaRows::live : SwaRows::tombstone);
    }
    return id;
}

template <class... Cs>
void ReferenceTree<Cs...>::adopt(Id id, std::span<const VirtualPage> pages, SwaRows swa) {
    beside_host_ = beside_host_ || has_host(nodes_[id], Component::full) ||
                   (swa == SwaRows::live && has_host(nodes_[id], Component::swa));
    nodes_[id].pages.assign(pages.begin(), pages.end());
    emit(EventKind::stored, Component::full, Tier::device, id);
    if (swa == SwaRows::live) {
        nodes_[id].swa = true;
        emit(EventKind::stored, Component::swa, Tier::device, id);
    }
}

template <class... Cs>
void ReferenceTree<Cs...>::recover_swa(Id id, std::span<const VirtualPage> incoming, detail::ActionsBuilder& out) {
    Node& n = nodes_[id];
    beside_host_ = beside_host_ || has_host(n, Component::swa);
    if (n.locks[Component::full] == 0) {
        out.free_pages(n.pages);
        n.pages.assign(incoming.begin(), incoming.end());
    } else {
        out.recover_swa_locked_full(n.pages, incoming);
        out.free_pages(incoming);
    }
    n.swa = true;
    emit(EventKind::stored, Component::swa, Tier::device, id);
}

// One hit per node of the path; at the threshold, a write-through of each component held on device only and not
// pending: FULL, SWA on nodes ending within one window before `end`, Mamba on the end node.
template <class... Cs>
void ReferenceTree<Cs...>::count_hits(const std::vector<Id>& path, std::int32_t end, detail::ActionsBuilder& out) {
    const std::uint32_t threshold = config_.write_through_threshold;
    for (Id x : path) {
        Node& n = nodes_[x];
        if (n.hits < std::numeric_limits<std::uint32_t>::max()) ++n.hits;
        if (threshold == 0 || n.hits < threshold) continue;
        for (Component c : all_components) {
            if (!in_set(c) || !has_device(n, c) || has_host(n, c) || n.write_pending[c] || n.pending[c] ||
                n.stored[c])
                continue;
            if (c == Component::swa && n.end() <= end - config_.swa_window) continue;
            if (c == Component::mamba && x != path.back()) continue;
            if (c == Component::mamba) {
                out.copy_state(ActionKind::write_through, ref(x), n.state);
            } else {
                out.copy_pages(ActionKind::write_through, c, ref(x), n.pages);
            }
            n.write_pending[c] = true;
        }
    }
}

template <class... Cs>
auto ReferenceTree<Cs...>::add_leaves(Id parent, std::int32_t from, InsertState& st) -> Id {
    const std::int32_t ps = config_.page_size.tokens;
    const auto length = static_cast<std::int32_t>(st.key.tokens.size());
    const std::int32_t live_from = components::has_swa ? st.values.swa_evicted : 0;
    const auto tokens = [&](std::int32_t b, std::int32_t e) { return st.key.tokens.subspan(b, e - b); };
    const auto pages = [&](std::int32_t b, std::int32_t e) { return st.values.pages.subspan(b / ps, (e - b) / ps); };
    if (components::has_swa && from < live_from && live_from < length) {
        const Id upper =
            add_node(parent, st.key.ns, from, tokens(from, live_from), pages(from, live_from), SwaRows::tombstone);
        return add_node(upper, st.key.ns, live_from, tokens(live_from, length), pages(live_from, length),
                        SwaRows::live);
    }
    return add_node(parent, st.key.ns, from, tokens(from, length), pages(from, length),
                    components::has_swa && live_from <= from ? SwaRows::live : SwaRows::tombstone);
}

// ---------------------------------------------------------------------------------------------------------
// insert_host

template <class... Cs>
HostInsertResult ReferenceTree<Cs...>::insert_host(TokenKey key, const HostInsertValues& values) {
    const std::int32_t ps = config_.page_size.tokens;
    const auto length = static_cast<std::int32_t>(key.tokens.size());
    const std::int32_t from = values.from;
    expect_live();
    UNIKV_EXPECTS(pending_backups_ == 0, "a backup is pending: call finish_backup for every backup action first");
    UNIKV_EXPECTS(length > 0 && length % ps == 0, "the key is not a positive whole number of pages");
    UNIKV_EXPECTS(from >= 0 && from <= length && from % ps == 0, "from is not a page-aligned position in the key");
    UNIKV_EXPECTS(values.full.size() == static_cast<std::size_t>((length - from) / ps),
                  "one FULL host page per page of [from, key end)");
    // The window: ceil(W / page size) pages, or the whole key when it is shorter.
    const std::int32_t window_pages =
        components::has_swa ? std::min((config_.swa_window + ps - 1) / ps, length / ps) : 0;
    UNIKV_EXPECTS(values.swa.size() == static_cast<std::size_t>(window_pages), "one SWA host page per window page");
    UNIKV_EXPECTS(values.state.is_valid() == components::has_mamba, "a host state exactly when the tree has Mamba");
    const auto valid = [](HostPage h) { return h.is_valid(); };
    UNIKV_EXPECTS(std::all_of(values.full.begin(), values.full.end(), valid) &&
                      std::all_of(values.swa.begin(), values.swa.end(), valid),
                  "invalid host page");

    // Walk the key; nothing changes until the graft is decided.
    std::vector<Id> path;
    std::optional<std::pair<Id, std::int32_t>> inside;  // the node the key ends or diverges in, tokens matched
    std::int32_t pos = 0;
    while (pos < length) {
        const auto child = find_child(path.empty() ? root : path.back(), key.ns, key.tokens.subspan(pos, ps));
        if (!child) break;
        const Node& n = nodes_[*child];
        std::int32_t m = 0;
        while (m < n.length() && pos + m < length &&
               std::equal(n.tokens.begin() + m, n.tokens.begin() + m + ps, key.tokens.begin() + pos + m)) {
            m += ps;
        }
        if (m < n.length()) {
            inside = std::pair{*child, m};
            pos += m;
            break;
        }
        path.push_back(*child);
        pos += m;
    }
    // Cached: up to where the key leaves the tree, or to the first node holding FULL in no tier.
    std::int32_t cached = pos;
    std::vector<Id> walked = path;
    if (inside) walked.push_back(inside->first);
    for (Id x : walked) {
        if (!keeps(nodes_[x], Component::full)) {
            cached = nodes_[x].start;
            break;
        }
    }
    HostInsertResult r;
    if (cached < from) {
        r.node = ref(path.empty() ? root : path.back());
        r.unused[Component::full].assign(values.full.begin(), values.full.end());
        r.unused[Component::swa].assign(values.swa.begin(), values.swa.end());
        if (values.state.is_valid()) r.unused[Component::mamba] = {values.state};
        return r;
    }

    if (inside) path.push_back(split(inside->first, inside->second));
    const std::int32_t window_start = length - window_pages * ps;
    for (std::size_t i = 0; i < path.size(); ++i) {
        if (nodes_[path[i]].start < window_start && window_start < nodes_[path[i]].end()) {
            const Id upper = split(path[i], window_start - nodes_[path[i]].start);
            path.insert(path.begin() + static_cast<std::ptrdiff_t>(i), upper);
            break;
        }
    }
    // New nodes, host values only: [pos, window start) and [window start, key end), whichever are non-empty.
    if (pos < window_start) {
        path.push_back(add_node(path.empty() ? root : path.back(), key.ns, pos,
                                key.tokens.subspan(pos, window_start - pos), {}, SwaRows::tombstone));
    }
    const std::int32_t rest = std::max(pos, window_start);
    if (rest < length) {
        path.push_back(add_node(path.empty() ? root : path.back(), key.ns, rest, key.tokens.subspan(rest),
                                {}, SwaRows::tombstone));
    }

    // Values, top-down: a node takes a component's slice when it keeps none of that component.
    for (Id x : path) {
        for (Component c : {Component::full, Component::swa}) {
            const std::int32_t first = c == Component::full ? from : window_start;
            const std::span<const HostPage> pages = c == Component::full ? values.full : values.swa;
            Node& n = nodes_[x];
            if (!in_set(c) || n.end() <= first) continue;
            const std::int32_t begin = std::max(n.start, first);
            const auto host = pages.subspan((begin - first) / ps, (n.end() - begin) / ps);
            if (keeps(n, c)) {
                r.unused[c].insert(r.unused[c].end(), host.begin(), host.end());
            } else {
                n.host[c].assign(host.begin(), host.end());
                emit(EventKind::stored, c, Tier::host, x);
            }
        }
    }
    if (components::has_mamba) {
        if (keeps(nodes_[path.back()], Component::mamba)) {
            r.unused[Component::mamba] = {values.state};
        } else {
            nodes_[path.back()].host[Component::mamba] = {values.state};
            emit(EventKind::stored, Component::mamba, Tier::host, path.back());
        }
    }
    r.node = ref(path.back());
    r.grafted = true;
    return r;
}

}  // namespace unikv

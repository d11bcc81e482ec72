#pragma once
// Definitions of ReferenceTree (declared in unikv/tree/reference_tree.hpp). Written for reading, not speed:
// every rule is a direct transcription of docs/tree.md.

#include <unikv/detail/tree/page_hash.hpp>

namespace unikv {

template <class... Cs>
ReferenceTree<Cs...>::ReferenceTree(TreeConfig config) : config_(config) {
    UNIKV_EXPECTS(config.page_size.tokens >= 1, "page size must be at least 1 token, got ", config.page_size.tokens);
    if constexpr (components::has_swa) {
        UNIKV_EXPECTS(config.swa_window > 0, "a tree with Swa needs swa_window > 0, got ", config.swa_window);
    } else {
        UNIKV_EXPECTS(config.swa_window == 0, "swa_window is set but the tree has no Swa component");
    }
    nodes_.emplace_back();  // the root: no tokens, no data, never locked or evicted
}

// ---------------------------------------------------------------------------------------------------------
// structure

template <class... Cs>
void ReferenceTree<Cs...>::expect_live() const {
    UNIKV_EXPECTS(!nodes_.empty(), "the tree was moved from; assign a tree to it before using it");
}

template <class... Cs>
auto ReferenceTree<Cs...>::id_of(NodeRef node, const char* what) const -> Id {
    expect_live();
    UNIKV_EXPECTS(contains(node), what, ": stale node handle (slot ", node.index(), ")");
    return node.index();
}

template <class... Cs>
auto ReferenceTree<Cs...>::find_child(Id parent, KeyNamespace ns, std::span<const TokenId> page) const
    -> std::optional<Id> {
    for (Id c : nodes_[parent].children) {
        const Node& n = nodes_[c];
        if (n.ns == ns && std::equal(page.begin(), page.end(), n.tokens.begin())) return c;
    }
    return std::nullopt;
}

template <class... Cs>
auto ReferenceTree<Cs...>::path_to(Id id) const -> std::vector<Id> {
    std::vector<Id> path;
    for (Id x = id; x != root; x = nodes_[x].parent) path.push_back(x);
    std::reverse(path.begin(), path.end());
    return path;
}

template <class... Cs>
auto ReferenceTree<Cs...>::fresh_slot() -> Id {
    if (free_.empty()) {
        nodes_.emplace_back();
        return static_cast<Id>(nodes_.size() - 1);
    }
    const Id id = free_.back();
    free_.pop_back();
    const std::uint32_t generation = nodes_[id].generation + 1;
    nodes_[id] = Node{};
    nodes_[id].generation = generation;
    return id;
}

template <class... Cs>
auto ReferenceTree<Cs...>::add_node(Id parent, KeyNamespace ns, std::int32_t start, std::span<const TokenId> tokens,
                                    std::span<const VirtualPage> pages, SwaRows swa) -> Id {
    const Id id = fresh_slot();
    Node& n = nodes_[id];
    n.parent = parent;
    n.ns = ns;
    n.start = start;
    n.tokens.assign(tokens.begin(), tokens.end());
    n.pages.assign(pages.begin(), pages.end());
    n.swa = swa == SwaRows::live;
    for (auto& s : n.stamp) s = ++clock_;
    nodes_[parent].children.push_back(id);
    emit(EventKind::stored, Component::full, Tier::device, id);
    if (n.swa) emit(EventKind::stored, Component::swa, Tier::device, id);
    return id;
}

template <class... Cs>
auto ReferenceTree<Cs...>::split(Id id, std::int32_t at) -> Id {
    const Id p = fresh_slot();
    Node& x = nodes_[id];
    Node& n = nodes_[p];
    const std::int32_t at_pages = at / config_.page_size.tokens;
    n.parent = x.parent;
    n.ns = x.ns;
    n.start = x.start;
    n.tokens.assign(x.tokens.begin(), x.tokens.begin() + at);
    x.tokens.erase(x.tokens.begin(), x.tokens.begin() + at);
    x.start += at;
    if (!x.pages.empty()) {
        n.pages.assign(x.pages.begin(), x.pages.begin() + at_pages);
        x.pages.erase(x.pages.begin(), x.pages.begin() + at_pages);
    }
    // FULL and SWA host values are per page; Mamba's stays on the lower part.
    for (Component c : {Component::full, Component::swa}) {
        if (x.host[c].empty()) continue;
        n.host[c].assign(x.host[c].begin(), x.host[c].begin() + at_pages);
        x.host[c].erase(x.host[c].begin(), x.host[c].begin() + at_pages);
    }
    n.swa = x.swa;
    n.locks[Component::full] = x.locks[Component::full];
    n.locks[Component::swa] = x.locks[Component::swa];
    n.host_locks[Component::full] = x.host_locks[Component::full];
    n.host_locks[Component::swa] = x.host_locks[Component::swa];
    n.stamp = x.stamp;
    n.retention = x.retention;
    n.children = {id};
    std::replace(nodes_[n.parent].children.begin(), nodes_[n.parent].children.end(), id, p);
    x.parent = p;
    return p;
}

template <class... Cs>
void ReferenceTree<Cs...>::remove_node(Id id, detail::ActionsBuilder& out, EvictResult& result) {
    evict_node_data(id, out, result);
    Node& n = nodes_[id];
    for (Component c : all_components) {
        if (!has_host(n, c)) continue;
        out.free_host(c, n.host[c]);
        result.host_freed[c] += units(n, c);
        emit(EventKind::removed, c, Tier::host, id);
        n.host[c].clear();
    }
    unlink(id);
}

template <class... Cs>
void ReferenceTree<Cs...>::unlink(Id id) {
    auto& siblings = nodes_[nodes_[id].parent].children;
    siblings.erase(std::find(siblings.begin(), siblings.end(), id));
    nodes_[id].alive = false;
    free_.push_back(id);
}

template <class... Cs>
void ReferenceTree<Cs...>::collect(Id id, detail::ActionsBuilder& out, EvictResult& result) {
    while (id != root && nodes_[id].children.empty() && dead(nodes_[id]) && device_unlocked(nodes_[id]) &&
           host_clear(nodes_[id])) {
        const Id parent = nodes_[id].parent;
        remove_node(id, out, result);
        id = parent;
    }
}

template <class... Cs>
void ReferenceTree<Cs...>::collect_empty(Id id) {
    while (id != root && nodes_[id].children.empty() && holds_nothing(nodes_[id]) && device_unlocked(nodes_[id]) &&
           host_clear(nodes_[id])) {
        const Id parent = nodes_[id].parent;
        unlink(id);
        id = parent;
    }
}

// The highest node from `id` up with FULL data in no tier: nothing below it can be matched.
template <class... Cs>
auto ReferenceTree<Cs...>::unreachable_top(Id id) const -> std::optional<Id> {
    std::optional<Id> top;
    for (Id x = id; x != root; x = nodes_[x].parent)
        if (!keeps(nodes_[x], Component::full)) top = x;
    return top;
}

// Removes, children first and siblings in token order, every node below `id` that is childless, unlocked and has
// no backup in flight.
template <class... Cs>
void ReferenceTree<Cs...>::drop_below(Id id, detail::ActionsBuilder& out, EvictResult& result) {
    std::vector<Id> kids = nodes_[id].children;
    const auto ps = config_.page_size.tokens;
    std::sort(kids.begin(), kids.end(), [&](Id a, Id b) {
        return std::lexicographical_compare(nodes_[a].tokens.begin(), nodes_[a].tokens.begin() + ps,
                                            nodes_[b].tokens.begin(), nodes_[b].tokens.begin() + ps);
    });
    for (Id k : kids) {
        drop_below(k, out, result);
        if (nodes_[k].children.empty() && device_unlocked(nodes_[k]) && host_clear(nodes_[k]))
            remove_node(k, out, result);
    }
}

template <class... Cs>
void ReferenceTree<Cs...>::refresh(Id target) {
    if (target == root) return;
    for (Id x : path_to(target)) nodes_[x].stamp[Component::full] = ++clock_;
    if constexpr (components::has_swa) {
        std::vector<Id> window;
        std::int64_t covered = 0;
        const std::int64_t limit = std::int64_t{config_.swa_window} + config_.page_size.tokens;
        for (Id x = target; x != root && covered < limit; x = nodes_[x].parent) {
            window.push_back(x);
            covered += nodes_[x].length();
        }
        for (auto it = window.rbegin(); it != window.rend(); ++it) nodes_[*it].stamp[Component::swa] = ++clock_;
    }
    if constexpr (components::has_mamba) nodes_[target].stamp[Component::mamba] = ++clock_;
}

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
    for (Id x : path_to(cur)) nodes_[x].retention = std::max(nodes_[x].retention, values.retention);
    refresh(cur);
    result.node = ref(cur);
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
        if (components::has_swa && !nodes_[id].swa && !shared && live_from < b) {
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
// eviction

template <class... Cs>
auto ReferenceTree<Cs...>::oldest(Tier tier, Component c) const -> std::optional<Id> {
    std::optional<Id> best;
    auto key = [&](Id id) { return std::tuple(nodes_[id].retention, nodes_[id].stamp[c], nodes_[id].end()); };
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
        out.backup_state(ref(id), n.state);
    } else {
        out.backup_pages(c, ref(id), n.pages);
    }
    n.pending[c] = true;
    ++pending_backups_;
}

// A device leaf goes whole; under write-back what has no host copy is backed up first: SWA window (tail part),
// Mamba state, FULL of the upper part, FULL of the tail.
template <class... Cs>
void ReferenceTree<Cs...>::evict_whole(Id id, EvictOptions options, detail::ActionsBuilder& out, EvictResult& result) {
    std::optional<Id> upper;
    if (options.write_back == WriteBack::on) {
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
    if (options.write_back == WriteBack::on && !has_host(nodes_[id], c) && !nodes_[id].pending[c]) {
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
    n.host[c].clear();
    if (c == Component::swa && has_host(n, Component::mamba) && n.host_locks[Component::mamba] == 0)
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
    const std::size_t want = c == Component::mamba ? 1 : n.pages.size();
    UNIKV_EXPECTS(host.size() == want, "got ", host.size(), " host pages, the node needs ", want);
    UNIKV_EXPECTS(std::all_of(host.begin(), host.end(), [](HostPage h) { return h.is_valid(); }), "invalid host page");
    n.host[c].assign(host.begin(), host.end());
    emit(EventKind::stored, c, Tier::host, id);
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
            plan_.push_back({ref(path[i]), c, n.start, n.length(), n.host[c], full});
        }
    }
    return plan_;
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

// ---------------------------------------------------------------------------------------------------------
// sizes, events, inspection

template <class... Cs>
std::int64_t ReferenceTree<Cs...>::sum_device(Component component, LockState state) const {
    const Component c = component;
    std::int64_t sum = 0;
    for (Id id = 1; id < nodes_.size(); ++id) {
        const Node& n = nodes_[id];
        if (n.alive && has_device(n, c) && (n.locks[c] > 0) == (state == LockState::locked)) sum += units(n, c);
    }
    return sum;
}

template <class... Cs>
std::int64_t ReferenceTree<Cs...>::host_size(Component component) const {
    const Component c = component;
    std::int64_t sum = 0;
    for (Id id = 1; id < nodes_.size(); ++id)
        if (nodes_[id].alive && has_host(nodes_[id], c)) sum += units(nodes_[id], c);
    return sum;
}

template <class... Cs>
std::uint64_t ReferenceTree<Cs...>::prefix_hash(Id id, std::int32_t upto) const {
    std::vector<TokenId> tokens;
    for (Id x : path_to(id)) tokens.insert(tokens.end(), nodes_[x].tokens.begin(), nodes_[x].tokens.end());
    tokens.resize(static_cast<std::size_t>(upto));
    return detail::tree::chain_pages(detail::tree::namespace_seed(nodes_[id].ns), tokens, config_.page_size.tokens);
}

template <class... Cs>
void ReferenceTree<Cs...>::emit(EventKind kind, Component c, Tier tier, Id id) {
    if (config_.events != EventMode::record) return;
    const Node& n = nodes_[id];
    events_.push_back(KvEvent{kind, c, tier, n.ns, n.start, n.length(),
                              prefix_hash(id, n.start), prefix_hash(id, n.end())});
}

template <class... Cs>
NodeInfo ReferenceTree<Cs...>::node_info(NodeRef node) const {
    const Node& n = nodes_[id_of(node, "node_info")];
    NodeInfo info;
    info.parent = ref(n.parent);
    info.ns = n.ns;
    info.start = n.start;
    info.length = n.length();
    info.children = static_cast<std::uint32_t>(n.children.size());
    info.retention = n.retention;
    info.tokens = n.tokens;
    info.pages = n.pages;
    info.host = n.host;
    for (Component c : all_components) info.device[c] = has_device(n, c);
    info.backup_pending = n.pending;
    info.state = n.state;
    info.device_locks = n.locks;
    info.host_locks = n.host_locks;
    return info;
}

template <class... Cs>
std::size_t ReferenceTree<Cs...>::node_count() const {
    if (nodes_.empty()) return 0;  // moved from
    return static_cast<std::size_t>(
        std::count_if(nodes_.begin() + 1, nodes_.end(), [](const Node& n) { return n.alive; }));
}

template <class... Cs>
std::vector<NodeRef> ReferenceTree<Cs...>::nodes() const {
    expect_live();
    std::vector<NodeRef> out;
    for (Id id = 1; id < nodes_.size(); ++id)
        if (nodes_[id].alive) out.push_back(ref(id));
    return out;
}

}  // namespace unikv

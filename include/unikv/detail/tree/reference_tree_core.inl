#pragma once
// ReferenceTree (declared in unikv/tree/reference_tree.hpp): structure, LRU stamps, sizes, events, inspection.
// Written for reading, not speed: every rule is a direct transcription of docs/tree.md.

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
    if (!n.pages.empty()) emit(EventKind::stored, Component::full, Tier::device, id);  // empty: host values only
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
    n.window_class = x.window_class;
    n.hits = x.hits;
    for (Component c : {Component::full, Component::swa}) {
        n.write_pending[c] = x.write_pending[c];
        n.joined[c] = x.joined[c];
        n.stored[c] = x.stored[c];
        x.joined[c] = x.write_pending[c] || has_host(x, c);
    }
    n.children = {id};
    std::replace(nodes_[n.parent].children.begin(), nodes_[n.parent].children.end(), id, p);
    x.parent = p;
    loads_.split(id, ref(p), static_cast<std::uint32_t>(at_pages));
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
        forget_host(id, c);
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
    info.window_class = n.window_class;
    info.tokens = n.tokens;
    info.pages = n.pages;
    info.host = n.host;
    for (Component c : all_components) info.device[c] = has_device(n, c);
    info.backup_pending = n.pending;
    info.write_through_pending = n.write_pending;
    info.joined = n.joined;
    info.stored = n.stored;
    info.hits = n.hits;
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

template <class... Cs>
std::vector<std::string> ReferenceTree<Cs...>::verify() const {
    expect_live();
    std::vector<std::string> out;
    std::int64_t pending = 0;
    for (Id id = 0; id < nodes_.size(); ++id) {
        const Node& n = nodes_[id];
        if (!n.alive) continue;
        pending += n.pending[Component::full] + n.pending[Component::swa] + n.pending[Component::mamba];
        const auto fail = [&](const char* what) { out.push_back(detail::concat("node ", id, ": ", what)); };
        for (Id c : n.children)
            if (c >= nodes_.size() || !nodes_[c].alive || nodes_[c].parent != id)
                fail("lists a child that is not its own");
        if (id == root) continue;
        if (n.parent >= nodes_.size() || !nodes_[n.parent].alive ||
            std::count(nodes_[n.parent].children.begin(), nodes_[n.parent].children.end(), id) != 1) {
            fail("is not listed once by a live parent");
            continue;  // the rules below compare with the parent
        }
        const Node& p = nodes_[n.parent];
        if (n.start != (n.parent == root ? 0 : p.end())) fail("start is not the parent's end");
        if (n.length() <= 0 || n.length() % config_.page_size.tokens != 0)
            fail("length is not a positive whole number of pages");
        if (n.parent != root && !(n.ns == p.ns)) fail("namespace differs from the parent's");
        if (!n.pages.empty() && n.pages.size() * static_cast<std::size_t>(config_.page_size.tokens) != n.tokens.size())
            fail("page count does not match the length");
    }
    if (pending != pending_backups_) out.emplace_back("pending backup count is stale");
    loads_.verify(out, config_.page_size.tokens, [&](NodeRef r) { return contains(r); },
                  [&](NodeRef r) { return nodes_[r.index()].length(); });
    return out;
}

template <class... Cs>
HostChainBreak ReferenceTree<Cs...>::host_chain_break() const noexcept {
    for (Id id = 1; id < nodes_.size(); ++id) {
        const Node& n = nodes_[id];
        if (!n.alive) continue;
        const bool full = has_host(n, Component::full);
        const bool aux = has_host(n, Component::swa) || has_host(n, Component::mamba);
        if (aux && !full) return {HostChainBreak::Kind::aux_without_full, n.start, n.end()};
        if ((full || aux) && n.parent != root && !has_host(nodes_[n.parent], Component::full))
            return {HostChainBreak::Kind::under_unbacked_parent, n.start, n.end()};
    }
    return {};
}

}  // namespace unikv

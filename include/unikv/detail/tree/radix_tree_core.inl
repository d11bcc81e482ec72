#pragma once
// RadixTree: node arena, edges, eviction heaps, incremental sizes, LRU stamps, events, inspection.

#include <algorithm>
#include <cstring>
#include <string>

#include <unikv/detail/tree/page_hash.hpp>

namespace unikv {

template <class... Cs>
RadixTree<Cs...>::RadixTree(TreeConfig config) : config_(config) {
    UNIKV_EXPECTS(config.page_size.tokens >= 1, "page size must be at least 1 token, got ", config.page_size.tokens);
    if constexpr (components::has_swa) {
        UNIKV_EXPECTS(config.swa_window > 0, "a tree with Swa needs swa_window > 0, got ", config.swa_window);
    } else {
        UNIKV_EXPECTS(config.swa_window == 0, "swa_window is set but the tree has no Swa component");
    }
    nodes_.emplace_back();
    nodes_[root].alive = true;
    edges_.reserve(0);
    // Evenly spaced from the first token to the last; a page of up to 8 tokens has each of its tokens sampled.
    const std::int32_t last = config.page_size.tokens - 1;
    for (std::size_t i = 0; i < edge_samples; ++i)
        edge_offsets_[i] = static_cast<std::int32_t>(i) * last / static_cast<std::int32_t>(edge_samples - 1);
}

// The default member initializers give an empty tree with a fresh id; `take` then moves `other` in. Nothing here
// allocates (an empty child table owns no slots), so the move cannot throw.
template <class... Cs>
RadixTree<Cs...>::RadixTree(RadixTree&& other) noexcept : config_(other.config_) {
    take(other);
}

template <class... Cs>
auto RadixTree<Cs...>::operator=(RadixTree&& other) noexcept -> RadixTree& {
    if (this != &other) take(other);
    return *this;
}

// Moves every member of `other` here and leaves `other` holding nothing: no nodes (so every checked call throws),
// zero sizes, and tree id 0, which no receipt carries.
template <class... Cs>
void RadixTree<Cs...>::take(RadixTree& other) noexcept {
    config_ = other.config_;
    tree_id_ = std::exchange(other.tree_id_, 0);
    edge_offsets_ = other.edge_offsets_;
    nodes_ = std::move(other.nodes_);
    free_slots_ = std::move(other.free_slots_);
    live_nodes_ = std::exchange(other.live_nodes_, 0);
    edges_ = std::move(other.edges_);
    heaps_ = std::move(other.heaps_);
    evictable_ = std::exchange(other.evictable_, {});
    protected_ = std::exchange(other.protected_, {});
    host_ = std::exchange(other.host_, {});
    events_ = std::move(other.events_);
    clock_ = other.clock_;
    pending_backups_ = std::exchange(other.pending_backups_, 0);
    path_ = std::move(other.path_);
    match_runs_ = std::move(other.match_runs_);
    plan_ = std::move(other.plan_);
    loads_ = std::move(other.loads_);
    // Moved-from vectors are empty with std::allocator; make it explicit, the checks rely on it.
    other.nodes_.clear();
    other.free_slots_.clear();
    other.events_.clear();
    other.edges_ = detail::tree::ChildTable{};
}

template <class... Cs>
void RadixTree<Cs...>::expect_live() const {
    UNIKV_EXPECTS(!nodes_.empty(), "the tree was moved from; assign a tree to it before using it");
}

template <class... Cs>
void RadixTree<Cs...>::reserve(ReserveOptions sizes) {
    expect_live();
    const std::size_t slots = sizes.nodes + 1;  // the root has a slot too
    nodes_.reserve(slots);
    free_slots_.reserve(slots);
    for (auto& h : heaps_) h.reserve(slots);
    edges_.reserve(slots);
    const auto pages = sizes.key_tokens / static_cast<std::size_t>(config_.page_size.tokens);
    path_.reserve(std::min(slots, pages + 1));
    match_runs_.reserve(path_.capacity());
    plan_.reserve(2 * path_.capacity() + 1);  // FULL and SWA per node, one Mamba state
}

// ---------------------------------------------------------------------------------------------------------
// rules

template <class... Cs>
bool RadixTree<Cs...>::has_device(const Node& n, Component c) noexcept {
    return c == Component::full ? !n.pages.empty() : c == Component::swa ? n.swa : n.state.is_valid();
}

template <class... Cs>
bool RadixTree<Cs...>::has_host(const Node& n, Component c) noexcept {
    return c == Component::mamba ? n.state_host.is_valid() : !n.host_pages[index_of(c)].empty();
}

// A component's data is kept by a node while it has device data, a host copy, or a backup in flight.
template <class... Cs>
bool RadixTree<Cs...>::keeps(const Node& n, Component c) noexcept {
    return has_device(n, c) || has_host(n, c) || n.pending[c];
}

// A node that some component cannot serve from any tier can never be a match boundary: as a leaf it is garbage.
template <class... Cs>
bool RadixTree<Cs...>::cannot_end_match(const Node& n) noexcept {
    return !keeps(n, Component::full) || (components::has_swa && !keeps(n, Component::swa)) ||
           (components::has_mamba && !keeps(n, Component::mamba));
}

template <class... Cs>
bool RadixTree<Cs...>::device_unlocked(const Node& n) noexcept {
    return (n.locks[Component::full] | n.locks[Component::swa] | n.locks[Component::mamba]) == 0;
}

// A copy in flight (a backup, or a write-through not yet committed or skipped) holds its node like a host lock: the
// copy's record names it, so no clean-up may delete it (a stateless tri-pool node cannot end a match, yet its
// write-through needs it).
template <class... Cs>
bool RadixTree<Cs...>::host_unlocked(const Node& n) noexcept {
    return (n.host_locks[Component::full] | n.host_locks[Component::swa] | n.host_locks[Component::mamba]) == 0 &&
           !n.pending[Component::full] && !n.pending[Component::swa] && !n.pending[Component::mamba] &&
           !any_write_pending(n);
}

// A node with a backup in flight is never chosen again (it cannot be anyway: the pending component has no device
// data and no eviction runs until every backup finished; this keeps the rule local). A node with a write-through
// pending keeps its device data until the copy is committed or skipped: `set_host` needs the rows.
template <class... Cs>
bool RadixTree<Cs...>::device_candidate(Id id, Component c) const noexcept {
    const Node& n = nodes_[id];
    if (id == root || !n.alive || !in_set(c) || !has_device(n, c) || any_pending(n) || any_write_pending(n))
        return false;
    return c == Component::full ? n.device_children == 0 && device_unlocked(n) : n.locks[c] == 0;
}

template <class... Cs>
bool RadixTree<Cs...>::host_candidate(Id id, Component c) const noexcept {
    const Node& n = nodes_[id];
    if (id == root || !n.alive || !in_set(c) || !has_host(n, c) || has_device(n, c)) return false;
    return c == Component::full ? n.children == 0 && host_unlocked(n) && device_unlocked(n) : n.host_locks[c] == 0;
}

// ---------------------------------------------------------------------------------------------------------
// arena and edges

template <class... Cs>
auto RadixTree<Cs...>::checked(NodeRef node, const char* what) const -> Id {
    expect_live();
    UNIKV_EXPECTS(contains(node), what, ": stale node handle (slot ", node.index(), ", generation ",
                  node.generation(), ")");
    return node.index();
}

// The edge key of a child: its namespace (`ns_seed`, hashed once per call) and first page, from 8 sampled tokens
// (`edge_offsets_`, first and last included): siblings differ from their divergence point on, so the last token
// almost always separates them, and a collision only costs a token comparison in the child table (never a wrong
// child). Pairs of packed samples are combined by two independent 128-bit fold-multiplies, so the hash costs a few
// cycles of latency and, being non-linear, offers no easy way to build colliding pages.
template <class... Cs>
std::uint64_t RadixTree<Cs...>::edge_hash(std::uint64_t ns_seed, const TokenId* first_page) const noexcept {
    static_assert(edge_samples == 8, "the hash folds four words of two samples each");
    constexpr std::array<std::uint64_t, 4> lane_keys{0x243F6A8885A308D3ull, 0x13198A2E03707344ull,
                                                     0xA4093822299F31D0ull, 0x082EFA98EC4E6C89ull};
    std::array<std::uint64_t, 4> w{};
    for (std::size_t i = 0; i < edge_samples; i += 2) {
        w[i / 2] = (std::uint64_t{static_cast<std::uint32_t>(first_page[edge_offsets_[i]])} |
                    std::uint64_t{static_cast<std::uint32_t>(first_page[edge_offsets_[i + 1]])} << 32) ^
                   lane_keys[i / 2];
    }
    const std::uint64_t a = detail::tree::fold_multiply(w[0], w[1] ^ ns_seed);
    const std::uint64_t b = detail::tree::fold_multiply(w[2], w[3]);
    return detail::tree::mix64(a ^ ((b << 23) | (b >> 41)));
}

// The child the key continues into. The parent's hints come first: the children recent walks took, filed under
// two tokens of their first page, in the parent's first line. Histories are chains of turns and hot prefixes are
// walked again, so a hint usually saves the hash and the table probe; a node with more children in use than it
// has hints falls back to the table. A hint counts only while it is a live child of `parent` in the key's
// namespace (any child whose first page equals the key's is the one). Each candidate's whole node is compared
// with the key once; one that does not share the first page is a miss (or a collision). O(node) for the
// compare, O(1) otherwise; no allocation.
template <class... Cs>
inline auto RadixTree<Cs...>::descend(Id parent, KeyNamespace ns, std::uint64_t ns_seed, const TokenId* key,
                                      std::int32_t available) noexcept -> Step {
    // The pick is branch-free: at a node shared by several histories the matching hint changes from walk to walk,
    // and a mispredicted branch cost more than waiting for the print (measured).
    const std::uint32_t print = page_print(key);
    Id hinted = npos;
    for (const ChildHint& h : nodes_[parent].hints) hinted = h.print == print ? h.child : hinted;
    if (hinted != npos) {
        const Node& h = nodes_[hinted];
        if (h.alive && h.parent == parent && h.ns == ns) {  // else a stale hint
            const std::int32_t same = common_length(h, key, available);
            if (same > 0) return {hinted, same};
        }
    }
    std::int32_t same = 0;
    const Id child = edges_.find(parent, edge_hash(ns_seed, key), [&](Id c) {
        // A table entry is a live child of `parent`; the first token rules out most wrong candidates without a
        // compare call.
        const Node& n = nodes_[c];
        if (n.token_data[0] != key[0] || !(n.ns == ns)) return false;
        same = common_length(n, key, available);
        return same > 0;
    });
    if (child != npos) add_hint(child);
    return {child, same};
}

// `descend` read-only: the same child (a radix tree has one child per parent, namespace and first page, whichever
// way it is found), without filing it as a hint. The hints are read, so a prefix recent walks took still skips the
// hash and the probe. O(node) for the compare, O(1) otherwise.
template <class... Cs>
inline auto RadixTree<Cs...>::find_step(Id parent, KeyNamespace ns, std::uint64_t ns_seed, const TokenId* key,
                                        std::int32_t available) const noexcept -> Step {
    const std::uint32_t print = page_print(key);
    Id hinted = npos;
    for (const ChildHint& h : nodes_[parent].hints) hinted = h.print == print ? h.child : hinted;
    if (hinted != npos) {
        const Node& h = nodes_[hinted];
        if (h.alive && h.parent == parent && h.ns == ns) {
            const std::int32_t same = common_length(h, key, available);
            if (same > 0) return {hinted, same};
        }
    }
    std::int32_t same = 0;
    const Id child = edges_.find(parent, edge_hash(ns_seed, key), [&](Id c) {
        const Node& n = nodes_[c];
        if (n.token_data[0] != key[0] || !(n.ns == ns)) return false;
        same = common_length(n, key, available);
        return same > 0;
    });
    return {child, same};
}

// O(child_hints).
template <class... Cs>
void RadixTree<Cs...>::add_hint(Id child) noexcept {
    auto& hints = nodes_[nodes_[child].parent].hints;
    std::size_t at = child_hints - 1;
    for (std::size_t i = 0; i < child_hints; ++i) {
        if (hints[i].child == child) {
            at = i;
            break;
        }
    }
    for (; at > 0; --at) hints[at] = hints[at - 1];
    hints[0] = {page_print(nodes_[child].token_data), child};
}

template <class... Cs>
auto RadixTree<Cs...>::new_node() -> Id {
    Id id;
    if (!free_slots_.empty()) {
        id = free_slots_.back();
        free_slots_.pop_back();
    } else {
        id = static_cast<Id>(nodes_.size());
        nodes_.emplace_back();
        // The free list and every heap hold at most one entry per slot: growing them with the arena means the
        // release paths (unlock, clean-up) never allocate, so they cannot fail.
        if (free_slots_.capacity() < nodes_.size()) free_slots_.reserve(2 * nodes_.size());
        for (auto& h : heaps_)
            if (h.capacity() < nodes_.size()) h.reserve(2 * nodes_.size());
    }
    nodes_[id].alive = true;
    ++live_nodes_;
    return id;
}

// Resets a slot for reuse, keeping its buffers' capacity.
template <class... Cs>
void RadixTree<Cs...>::free_slot(Id id) noexcept {
    Node& n = nodes_[id];
    const std::uint32_t generation = n.generation + 1;
    n.tokens.clear();
    n.token_data = nullptr;
    n.pages.clear();
    for (auto& h : n.host_pages) h.clear();
    n.state = StateId{};
    n.state_host = HostPage{};
    n.locks = {};
    n.host_locks = {};
    n.pending = {};
    n.write_bits = 0;
    n.hits = 0;
    n.swa = false;
    n.retention = 0;
    n.window_class = 0;
    n.children = 0;
    n.device_children = 0;
    n.first_child = n.next_sibling = n.prev_sibling = npos;
    n.hints = {};
    n.alive = false;
    n.generation = generation;
    free_slots_.push_back(id);
    --live_nodes_;
}

template <class... Cs>
auto RadixTree<Cs...>::add_node(Id parent, KeyNamespace ns, std::int32_t start, std::span<const TokenId> tokens,
                                std::span<const VirtualPage> pages, SwaRows swa) -> Id {
    const Id id = new_node();
    Node& n = nodes_[id];
    n.parent = parent;
    n.ns = ns;
    n.start = start;
    n.length = static_cast<std::int32_t>(tokens.size());
    n.tokens.assign(tokens.begin(), tokens.end());
    n.token_data = n.tokens.data();
    n.key_hash = key_hash_of(n);
    if (config_.events == EventMode::record)
        n.hash_end = detail::tree::chain_pages(hash_start_of(n), tokens, config_.page_size.tokens);
    for (auto& s : n.stamp) s = ++clock_;
    edges_.insert(parent, n.key_hash, id);
    link_child(parent, id);
    UNIKV_ASSERT(!pages.empty() || swa == SwaRows::tombstone);
    if (!pages.empty()) {  // empty: a node for host values only (`insert_host`)
        set_pages(id, pages);
        emit(EventKind::stored, Component::full, Tier::device, id);
    }
    if (swa == SwaRows::live) {
        nodes_[id].swa = true;
        account(id, Component::swa, +1);
        emit(EventKind::stored, Component::swa, Tier::device, id);
    }
    sync(id);
    sync(parent);
    return id;
}

// Splits `id` at token offset `at` (page aligned, inside the node). The new upper part takes the node's place
// under its parent; `id` keeps the lower part, its children, its Mamba state and lock, so handles and receipts
// anchored at `id` stay valid. Both parts keep the locks that covered the whole node, and the pending backups:
// a split while a backup is pending cannot happen (every structural call waits for the backups). O(at): the
// upper part is copied, the lower part only drops its front.
template <class... Cs>
auto RadixTree<Cs...>::split(Id id, std::int32_t at) -> Id {
    const Id p = new_node();
    Node& up = nodes_[p];
    Node& low = nodes_[id];
    const auto at_pages = static_cast<std::ptrdiff_t>(at / config_.page_size.tokens);
    up.parent = low.parent;
    up.ns = low.ns;
    up.start = low.start;
    up.length = at;
    up.key_hash = low.key_hash;
    up.tokens.assign(low.tokens.begin(), low.tokens.begin() + at);
    low.tokens.drop_front(static_cast<std::size_t>(at));
    up.token_data = up.tokens.data();
    low.token_data = low.tokens.data();
    low.start += at;
    low.length -= at;
    low.key_hash = key_hash_of(low);
    UNIKV_ASSERT(!any_pending(low));
    if (!low.pages.empty()) {
        up.pages.assign(low.pages.begin(), low.pages.begin() + at_pages);
        low.pages.drop_front(static_cast<std::size_t>(at_pages));
    }
    for (Component c : {Component::full, Component::swa}) {
        auto& from = low.host_pages[index_of(c)];
        if (from.empty()) continue;
        up.host_pages[index_of(c)].assign(from.begin(), from.begin() + at_pages);
        from.drop_front(static_cast<std::size_t>(at_pages));
    }
    up.swa = low.swa;
    up.locks[Component::full] = low.locks[Component::full];
    up.locks[Component::swa] = low.locks[Component::swa];
    up.host_locks[Component::full] = low.host_locks[Component::full];
    up.host_locks[Component::swa] = low.host_locks[Component::swa];
    up.stamp = low.stamp;
    up.retention = low.retention;
    up.window_class = low.window_class;
    up.hits = low.hits;
    // A pending write or host copy is cut in two parts that stay one value (`set_host`, `drop_host`); the upper
    // part continues into the parent when the whole node did. Mamba's stays on the lower part.
    up.write_bits = low.write_bits & static_cast<std::uint8_t>(~pending_bit(Component::mamba));
    for (Component c : {Component::full, Component::swa})
        if (write_pending(low, c) || has_host(low, c)) low.write_bits |= joined_bit(c);
    // The upper part takes the lower part's place among its siblings; the lower part is its only child.
    up.prev_sibling = low.prev_sibling;
    up.next_sibling = low.next_sibling;
    if (up.prev_sibling != npos) {
        nodes_[up.prev_sibling].next_sibling = p;
    } else {
        nodes_[up.parent].first_child = p;
    }
    if (up.next_sibling != npos) nodes_[up.next_sibling].prev_sibling = p;
    low.prev_sibling = low.next_sibling = npos;
    up.first_child = id;
    up.children = 1;
    up.device_children = low.pages.empty() ? 0 : 1;
    if (config_.events == EventMode::record)
        up.hash_end = detail::tree::chain_pages(hash_start_of(up), up.tokens, config_.page_size.tokens);
    edges_.replace(up.parent, up.key_hash, id, p);
    edges_.insert(p, low.key_hash, id);
    // The upper part takes over the lower part's hint in the parent (same first page).
    for (ChildHint& h : nodes_[up.parent].hints)
        if (h.child == id) h.child = p;
    low.parent = p;
    add_hint(id);
    sync(p);
    sync(id);
    if (!loads_.empty()) loads_.split(id, ref(p), static_cast<std::uint32_t>(at_pages));
    return p;
}

template <class... Cs>
void RadixTree<Cs...>::link_child(Id parent, Id id) noexcept {
    Node& n = nodes_[id];
    n.prev_sibling = npos;
    n.next_sibling = nodes_[parent].first_child;
    if (n.next_sibling != npos) nodes_[n.next_sibling].prev_sibling = id;
    nodes_[parent].first_child = id;
    ++nodes_[parent].children;
}

template <class... Cs>
void RadixTree<Cs...>::unlink_child(Id id) noexcept {
    const Node& n = nodes_[id];
    if (n.prev_sibling != npos) {
        nodes_[n.prev_sibling].next_sibling = n.next_sibling;
    } else {
        nodes_[n.parent].first_child = n.next_sibling;
    }
    if (n.next_sibling != npos) nodes_[n.next_sibling].prev_sibling = n.prev_sibling;
    --nodes_[n.parent].children;
}

// Makes heap membership agree with the candidate rules for `id` (call after anything they read changed).
template <class... Cs>
void RadixTree<Cs...>::sync(Id id) {
    for (std::size_t h = 0; h < heap_count; ++h) {
        const Component c = heap_component(h);
        if (!in_set(c)) continue;
        const bool want = h < component_count ? device_candidate(id, c) : host_candidate(id, c);
        const bool have = nodes_[id].heap_pos[h] != npos;
        if (want == have) continue;
        HeapContext ctx{*this, h};
        if (want) {
            heaps_[h].push(id, ctx);
        } else {
            heaps_[h].erase(id, ctx);
        }
    }
}

// Adds (sign +1) or removes (-1) `id`'s device units of `c` to the evictable or protected total.
template <class... Cs>
void RadixTree<Cs...>::account(Id id, Component c, std::int64_t sign) noexcept {
    const Node& n = nodes_[id];
    (n.locks[c] > 0 ? protected_ : evictable_)[c] += sign * units(n, c);
}

template <class... Cs>
void RadixTree<Cs...>::set_pages(Id id, std::span<const VirtualPage> pages) {
    UNIKV_ASSERT(nodes_[id].pages.empty() && !pages.empty());
    nodes_[id].pages.assign(pages.begin(), pages.end());
    account(id, Component::full, +1);
    ++nodes_[nodes_[id].parent].device_children;
}

template <class... Cs>
void RadixTree<Cs...>::clear_pages(Id id) noexcept {
    Node& n = nodes_[id];
    UNIKV_ASSERT(!n.pages.empty() && !n.swa);
    account(id, Component::full, -1);
    n.pages.clear();
    --nodes_[n.parent].device_children;
}

template <class... Cs>
void RadixTree<Cs...>::path_to(Id id, std::vector<Id>& out) const {
    out.clear();
    for (Id x = id; x != root; x = nodes_[x].parent) out.push_back(x);
    std::reverse(out.begin(), out.end());
}

// LRU refresh for a request that uses `path` (root excluded, the target last): FULL on the whole path, SWA on
// the nodes within one window plus one page above the target, Mamba on the target. Upper nodes get the older
// stamps. Each component's heap orders only its own stamps, so a node's SWA and Mamba stamps reuse its FULL stamp
// and one bottom-up pass writes all three. A stamp write is O(1): the heaps catch up lazily (see node_heap.hpp).
template <class... Cs>
void RadixTree<Cs...>::refresh(std::span<const Id> path) {
    if (path.empty()) return;
    const std::uint64_t clock = clock_;
    clock_ += path.size();
    if constexpr (components::has_mamba) nodes_[path.back()].stamp[Component::mamba] = clock_;
    [[maybe_unused]] const std::int64_t limit = std::int64_t{config_.swa_window} + config_.page_size.tokens;
    [[maybe_unused]] std::int64_t covered = 0;
    for (std::size_t i = path.size(); i-- > 0;) {
        Node& n = nodes_[path[i]];
        n.stamp[Component::full] = clock + i + 1;
        if constexpr (components::has_swa) {
            if (covered < limit) {
                n.stamp[Component::swa] = n.stamp[Component::full];
                covered += n.length;
            }
        }
    }
}

template <class... Cs>
void RadixTree<Cs...>::emit(EventKind kind, Component c, Tier tier, Id id) {
    if (config_.events != EventMode::record) return;
    const Node& n = nodes_[id];
    events_.push_back(KvEvent{kind, c, tier, n.ns, n.start, n.length, hash_start_of(n), n.hash_end});
}

template <class... Cs>
void RadixTree<Cs...>::expect_no_pending() const {
    UNIKV_EXPECTS(pending_backups_ == 0, "a backup is pending: call finish_backup for every backup action first");
}

// ---------------------------------------------------------------------------------------------------------
// inspection

template <class... Cs>
NodeInfo RadixTree<Cs...>::node_info(NodeRef node) const {
    const Node& n = nodes_[checked(node, "node_info")];
    NodeInfo info;
    info.parent = ref(n.parent);
    info.ns = n.ns;
    info.start = n.start;
    info.length = n.length;
    info.children = n.children;
    info.retention = n.retention;
    info.window_class = n.window_class;
    info.tokens.assign(n.tokens.begin(), n.tokens.end());
    info.pages.assign(n.pages.begin(), n.pages.end());
    for (Component c : {Component::full, Component::swa}) {
        const auto& host = n.host_pages[index_of(c)];
        info.host[c].assign(host.begin(), host.end());
    }
    if (n.state_host.is_valid()) info.host[Component::mamba] = {n.state_host};
    for (Component c : all_components) info.device[c] = has_device(n, c);
    info.backup_pending = n.pending;
    for (Component c : all_components) info.write_through_pending[c] = write_pending(n, c);
    for (Component c : all_components) info.joined[c] = joined(n, c);
    for (Component c : all_components) info.stored[c] = stored(n, c);
    info.hits = n.hits;
    info.state = n.state;
    info.device_locks = n.locks;
    info.host_locks = n.host_locks;
    return info;
}

template <class... Cs>
std::vector<NodeRef> RadixTree<Cs...>::nodes() const {
    expect_live();
    std::vector<NodeRef> out;
    for (Id id = 1; id < nodes_.size(); ++id)
        if (nodes_[id].alive) out.push_back(ref(id));
    return out;
}

template <class... Cs>
std::vector<std::string> RadixTree<Cs...>::verify() const {
    expect_live();
    const std::int32_t ps = config_.page_size.tokens;
    per_component<std::int64_t> evictable{}, locked{}, host{};
    std::vector<std::uint32_t> children(nodes_.size()), device_children(nodes_.size());
    std::size_t live = 0;
    std::int64_t pending = 0;
    std::vector<std::string> out;
    for (Id id = 1; id < nodes_.size(); ++id) {
        const Node& n = nodes_[id];
        if (!n.alive) continue;
        ++live;
        pending += n.pending[Component::full] + n.pending[Component::swa] + n.pending[Component::mamba];
        // A node's rules build on one another (its length before its hashes), so it reports its first broken one.
        std::string broken = [&]() -> std::string {
            const Node& p = nodes_[n.parent];
            const auto fail = [&](const char* what) { return detail::concat("node ", id, ": ", what); };
            if (!p.alive) return fail("parent is dead");
            if (n.start != (n.parent == root ? 0 : p.end())) return fail("start is not the parent's end");
            if (n.length <= 0 || n.length % ps != 0 || n.tokens.size() != static_cast<std::size_t>(n.length))
                return fail("length is not a positive whole number of pages");
            if (n.token_data != n.tokens.data()) return fail("stale token address");
            if (n.parent != root && !(n.ns == p.ns)) return fail("namespace differs from the parent's");
            if (n.key_hash != key_hash_of(n)) return fail("stale edge hash");
            if (!edges_.has(n.parent, n.key_hash, id)) return fail("missing edge from the parent");
            if (!n.pages.empty() && n.pages.size() * static_cast<std::size_t>(ps) != n.tokens.size())
                return fail("page count does not match the length");
            for (Component c : {Component::full, Component::swa})
                if (const auto& host = n.host_pages[index_of(c)];
                    !host.empty() && host.size() * static_cast<std::size_t>(ps) != n.tokens.size())
                    return fail("host page count does not match the length");
            if (n.swa && n.pages.empty()) return fail("SWA rows without FULL pages");
            if (n.state.is_valid() && n.pages.empty()) return fail("Mamba state without FULL pages");
            // A device lock always includes Full, so SWA and Mamba locks sit on FULL-locked nodes: the FULL units
            // counted as evictable are exactly the ones no lock keeps `evict(Full)` from taking.
            if (n.locks[Component::full] == 0 && (n.locks[Component::swa] > 0 || n.locks[Component::mamba] > 0))
                return fail("SWA or Mamba device lock without FULL");
            if (n.pending[Component::full] && !n.pages.empty())
                return fail("FULL backup pending on a node that still has FULL pages");
            if (!n.pages.empty() && n.parent != root && p.pages.empty())
                return fail("FULL device data under a node without it");
            for (Component c : all_components) {
                if (write_pending(n, c) && (!has_device(n, c) || has_host(n, c)))
                    return fail("write-through pending without device data or beside a host copy");
                if (c == Component::mamba || !joined(n, c)) continue;
                if (n.parent == root || write_pending(n, c) != write_pending(p, c) ||
                    (!write_pending(n, c) && (!has_host(n, c) || !has_host(p, c))))
                    return fail(detail::concat("split parts of one value disagree (component ", to_string(c), ", bits ",
                                               int(n.write_bits), " and ", int(p.write_bits), ", host ", has_host(n, c),
                                               has_host(p, c), ")")
                                    .c_str());
            }
            if (joined(n, Component::mamba)) return fail("Mamba value joined to the parent");
            ++children[n.parent];
            if (!n.pages.empty()) ++device_children[n.parent];
            for (Component c : all_components) {
                if (!in_set(c) && (has_device(n, c) || has_host(n, c) || n.locks[c] || n.host_locks[c]))
                    return fail("data or lock of a component outside the set");
                if (has_device(n, c)) (n.locks[c] > 0 ? locked : evictable)[c] += units(n, c);
                if (has_host(n, c)) host[c] += units(n, c);
                for (std::size_t h : {device_heap(c), host_heap(c)}) {
                    if (!in_set(c)) continue;
                    const bool want = h < component_count ? device_candidate(id, c) : host_candidate(id, c);
                    const std::uint32_t pos = n.heap_pos[h];
                    if (want != (pos != npos)) return fail("heap membership disagrees with the candidate rule");
                    if (pos != npos && pos >= heaps_[h].size()) return fail("heap position is out of range");
                }
            }
            if (config_.events == EventMode::record &&
                n.hash_end != detail::tree::chain_pages(hash_start_of(n), n.tokens, ps))
                return fail("stale prefix hash");
            return {};
        }();
        if (!broken.empty()) out.push_back(std::move(broken));
    }
    if (!out.empty()) return out;  // the totals below are recounted from well-formed nodes only
    for (Id id = 0; id < nodes_.size(); ++id) {
        if (!nodes_[id].alive) continue;
        std::uint32_t listed = 0;
        Id c = nodes_[id].first_child;
        for (Id prev = npos; c != npos; prev = c, c = nodes_[c].next_sibling, ++listed) {
            if (listed > children[id] || c >= nodes_.size() || !nodes_[c].alive || nodes_[c].parent != id ||
                nodes_[c].prev_sibling != prev)
                break;
        }
        if (c != npos) {
            out.push_back(detail::concat("node ", id, ": child list is broken"));
        } else if (listed != children[id]) {
            out.push_back(detail::concat("node ", id, ": child list misses children"));
        }
        if (nodes_[id].children != children[id]) out.push_back(detail::concat("node ", id, ": child count is stale"));
        if (nodes_[id].device_children != device_children[id])
            out.push_back(detail::concat("node ", id, ": device child count is stale"));
    }
    if (live != live_nodes_) out.emplace_back("live node count is stale");
    if (pending != pending_backups_) out.emplace_back("pending backup count is stale");
    loads_.verify(out, config_.page_size.tokens, [&](NodeRef r) { return contains(r); },
                  [&](NodeRef r) { return nodes_[r.index()].length; });
    if (edges_.size() != live) out.emplace_back("edge table size differs from the node count");
    for (Component c : all_components) {
        const auto stale = [&](const char* size) {
            return detail::concat(size, " size of component ", to_string(c), " is stale");
        };
        if (evictable[c] != evictable_[c]) out.push_back(stale("evictable"));
        if (locked[c] != protected_[c]) out.push_back(stale("protected"));
        if (host[c] != host_[c]) out.push_back(stale("host"));
    }
    for (std::size_t h = 0; h < heap_count; ++h) {
        const HeapView view{*this, h};
        if (!heaps_[h].consistent(view)) out.push_back(detail::concat("heap ", h, " is out of order or stale"));
    }
    return out;
}

template <class... Cs>
HostChainBreak RadixTree<Cs...>::host_chain_break() const noexcept {
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

#pragma once
// RadixTree: match_prefix, insert and insert_host.

#include <algorithm>
#include <cstring>
#include <limits>

namespace unikv {

// `tokens` rounded down to whole pages. A power-of-two page size (the usual case) needs no division, which was a
// tenth of match_prefix's own time on short prefixes.
template <class... Cs>
std::int32_t RadixTree<Cs...>::whole_pages_of(std::int32_t tokens) const noexcept {
    const std::int32_t ps = config_.page_size.tokens;
    return (ps & (ps - 1)) == 0 ? tokens & -ps : tokens / ps * ps;
}

// Tokens of `n` that equal `key`, in whole pages (0 when the first page differs), given `available` (a whole
// number of pages) key tokens. Whole-node equality is one `tokens_equal`: the common case on a long shared prefix.
template <class... Cs>
inline std::int32_t RadixTree<Cs...>::common_length(const Node& n, const TokenId* key,
                                                    std::int32_t available) const noexcept {
    const TokenId* mine = n.token_data;
    if (available >= n.length && detail::tree::tokens_equal(mine, key, static_cast<std::size_t>(n.length)))
        return n.length;
    const std::int32_t limit = std::min(n.length, available);
    const auto same = static_cast<std::int32_t>(std::mismatch(mine, mine + limit, key).first - mine);
    return whole_pages_of(same);
}

template <class... Cs>
void RadixTree<Cs...>::set_retention_of(Id id, std::uint8_t retention) noexcept {
    nodes_[id].retention = retention;
    fix_heaps(id);
}

template <class... Cs>
void RadixTree<Cs...>::raise_window_class(std::span<const Id> path, std::int32_t end,
                                          std::uint8_t window_class) noexcept {
    if (!components::has_swa) return;
    for (auto it = path.rbegin(); it != path.rend() && nodes_[*it].end() > end - config_.swa_window; ++it) {
        if (nodes_[*it].window_class >= window_class) continue;
        nodes_[*it].window_class = window_class;
        fix_heaps(*it);
    }
}

template <class... Cs>
void RadixTree<Cs...>::fix_heaps(Id id) noexcept {
    for (std::size_t h = 0; h < heap_count; ++h) {
        if (nodes_[id].heap_pos[h] == npos) continue;
        HeapContext ctx{*this, h};
        heaps_[h].fix(id, ctx);
    }
}

template <class... Cs>
MatchResult RadixTree<Cs...>::match_prefix(TokenKey key, MatchOptions options) {
    expect_live();
    expect_no_pending();
    const std::int32_t usable = whole_pages_of(static_cast<std::int32_t>(key.tokens.size()));

    // 1. Walk the key, splitting the node the walk ends inside.
    const std::uint64_t ns_seed = detail::tree::namespace_seed(key.ns);
    path_.clear();
    for (std::int32_t pos = 0; pos < usable;) {
        const auto [child, same] =
            descend(path_.empty() ? root : path_.back(), key.ns, ns_seed, key.tokens.data() + pos, usable - pos);
        if (child == npos) break;
        if (same < nodes_[child].length) {
            path_.push_back(split(child, same));
            break;
        }
        path_.push_back(child);
        pos += same;
    }

    // 2. Validators. Bit i of `ok` says component i accepts the node; `device` and `any` are the two tiers.
    constexpr std::int64_t unbroken = std::numeric_limits<std::int64_t>::max() / 2;
    const std::int64_t window = config_.swa_window;
    std::int64_t run_device = unbroken;
    std::int64_t run_any = unbroken;
    constexpr std::uint8_t all = 0b111;
    std::uint8_t full_chain = 0b11;  // bit 0: FULL device unbroken from the root, bit 1: device-or-host
    std::size_t device_at = 0;       // path_ index + 1 of the device boundary (0: the root)
    std::size_t best_at = 0;
    MatchResult r;
    for (std::size_t i = 0; i < path_.size(); ++i) {
        const Node& n = nodes_[path_[i]];
        const bool fd = !n.pages.empty();
        full_chain &= static_cast<std::uint8_t>((fd ? 1 : 0) | ((fd || has_host(n, Component::full)) ? 2 : 0));
        if ((full_chain & 2) == 0) break;
        std::uint8_t device = 1;
        std::uint8_t any = 1;
        if constexpr (components::has_swa) {
            run_device = n.swa ? run_device + n.length : 0;
            run_any = (n.swa || has_host(n, Component::swa)) ? run_any + n.length : 0;
            device |= run_device >= window ? 2 : 0;
            any |= run_any >= window ? 2 : 0;
        } else {
            device |= 2;
            any |= 2;
        }
        if constexpr (components::has_mamba) {
            device |= n.state.is_valid() ? 4 : 0;
            any |= (n.state.is_valid() || n.state_host.is_valid()) ? 4 : 0;
        } else {
            device |= 4;
            any |= 4;
        }
        if (full_chain & 1) {
            r.full_length = n.end();
            if (device == all) device_at = i + 1;
            if (components::has_swa && (device | 2) == all) r.swa_branching_length = n.end();
            if (components::has_mamba && (device | 4) == all) r.mamba_branching_length = n.end();
        }
        if (any == all) best_at = i + 1;
    }
    if (options.host_hits == HostHits::exclude) best_at = device_at;

    // 3. Results.
    const Id device_node = device_at == 0 ? root : path_[device_at - 1];
    const Id best = best_at == 0 ? root : path_[best_at - 1];
    r.device_node = ref(device_node);
    r.best_node = ref(best);
    r.device_length = nodes_[device_node].end();
    r.best_length = nodes_[best].end();
    r.host_hit_length = r.best_length - r.device_length;
    if (r.swa_branching_length <= r.device_length) r.swa_branching_length = 0;
    if (r.mamba_branching_length <= r.device_length) r.mamba_branching_length = 0;
    if (components::has_swa && options.host_hits == HostHits::include) {
        std::int64_t covered = 0;
        for (std::size_t i = best_at; i > 0 && covered < window; --i) {
            const Node& n = nodes_[path_[i - 1]];
            if (n.swa) {
                covered += n.length;
            } else if (has_host(n, Component::swa)) {
                covered += n.length;
                r.swa_host_hit_length += n.length;
            } else {
                break;
            }
        }
    }
    match_runs_.clear();
    std::size_t page_count = 0;
    for (std::size_t i = 0; i < device_at; ++i) {
        match_runs_.push_back(nodes_[path_[i]].pages);
        page_count += match_runs_.back().size();
    }
    r.device_pages = PageRuns(match_runs_, page_count);

    // 4. LRU refresh of what the request will use.
    refresh(std::span<const Id>(path_.data(), best_at));
    return r;
}

// match_prefix's walk and validators in one pass, without a path: each node is judged as it is reached. A node
// the walk ends inside is judged as the upper part a split would make of it (`split`): its FULL pages and host
// pages are present exactly when the whole node's are, it keeps the SWA presence, and has no Mamba state on
// either tier (those stay on the lower part), over `same` tokens.
template <class... Cs>
PrefixPeek RadixTree<Cs...>::peek_prefix(TokenKey key) const {
    expect_live();
    const std::int32_t usable = whole_pages_of(static_cast<std::int32_t>(key.tokens.size()));
    const std::uint64_t ns_seed = detail::tree::namespace_seed(key.ns);
    constexpr std::int64_t unbroken = std::numeric_limits<std::int64_t>::max() / 2;
    const std::int64_t window = config_.swa_window;
    std::int64_t run_device = unbroken;
    std::int64_t run_any = unbroken;
    constexpr std::uint8_t all = 0b111;
    std::uint8_t full_chain = 0b11;  // as in match_prefix
    PrefixPeek r;
    Id at = root;
    for (std::int32_t pos = 0; pos < usable;) {
        const auto [child, same] = find_step(at, key.ns, ns_seed, key.tokens.data() + pos, usable - pos);
        if (child == npos) break;
        const Node& n = nodes_[child];
        const bool whole = same == n.length;
        const bool fd = !n.pages.empty();
        full_chain &= static_cast<std::uint8_t>((fd ? 1 : 0) | ((fd || has_host(n, Component::full)) ? 2 : 0));
        if ((full_chain & 2) == 0) break;
        std::uint8_t device = 1;
        std::uint8_t any = 1;
        if constexpr (components::has_swa) {
            run_device = n.swa ? run_device + same : 0;
            run_any = (n.swa || has_host(n, Component::swa)) ? run_any + same : 0;
            device |= run_device >= window ? 2 : 0;
            any |= run_any >= window ? 2 : 0;
        } else {
            device |= 2;
            any |= 2;
        }
        if constexpr (components::has_mamba) {
            device |= whole && n.state.is_valid() ? 4 : 0;
            any |= whole && (n.state.is_valid() || n.state_host.is_valid()) ? 4 : 0;
        } else {
            device |= 4;
            any |= 4;
        }
        const std::int32_t end = n.start + same;
        if ((full_chain & 1) != 0 && device == all) r.device_length = end;
        if (any == all) r.best_length = end;
        if (!whole) break;
        at = child;
        pos += same;
    }
    return r;
}

// ---------------------------------------------------------------------------------------------------------
// insert

template <class... Cs>
struct RadixTree<Cs...>::Walk {
    TokenKey key;
    const InsertValues& values;
    detail::ActionsBuilder out;
    std::int32_t live_from;  // first token whose SWA rows the request still holds

    [[nodiscard]] std::span<const VirtualPage> pages(std::int32_t from, std::int32_t to, std::int32_t ps) const {
        return values.pages.subspan(static_cast<std::size_t>(from / ps), static_cast<std::size_t>((to - from) / ps));
    }
};

template <class... Cs>
InsertResult RadixTree<Cs...>::insert(TokenKey key, const InsertValues& values) {
    const std::int32_t ps = config_.page_size.tokens;
    const auto length = static_cast<std::int32_t>(key.tokens.size());
    expect_live();
    expect_no_pending();
    UNIKV_EXPECTS(length % ps == 0, "a key of ", length, " tokens is not a whole number of ", ps, "-token pages");
    UNIKV_EXPECTS(static_cast<std::int64_t>(values.pages.size()) * ps == length, values.pages.size(),
                  " pages given for ", length, " tokens");
    // Every id must be valid (>= 0): one branch-free pass (vectorizable) rather than a test per page.
    std::int32_t sign_bits = 0;
    for (VirtualPage p : values.pages) sign_bits |= p.value();
    UNIKV_EXPECTS(sign_bits >= 0, "an incoming page id is invalid (negative)");
    if constexpr (components::has_swa) {
        UNIKV_EXPECTS(values.swa_evicted >= 0 && values.swa_evicted <= length && values.swa_evicted % ps == 0,
                      "swa_evicted ", values.swa_evicted, " is not a page-aligned position in the key");
    }
    UNIKV_EXPECTS(length > 0 || !values.state.is_valid(), "a Mamba state needs a non-empty key");

    InsertResult result;
    Walk walk{key, values, detail::ActionsBuilder{result.actions}, components::has_swa ? values.swa_evicted : 0};
    beside_host_ = false;
    Id at = root;
    const std::uint64_t ns_seed = detail::tree::namespace_seed(key.ns);
    for (std::int32_t pos = 0; pos < length;) {
        const auto [child, same] = descend(at, key.ns, ns_seed, key.tokens.data() + pos, length - pos);
        if (child == npos) {
            at = add_leaves(at, pos, walk);
            break;
        }
        const Id covered = same < nodes_[child].length ? split(child, same) : child;
        result.prefix_length += same;
        at = overlap(covered, walk);
        pos += same;
    }
    if (components::has_mamba && values.state.is_valid()) {
        if (nodes_[at].state.is_valid()) {
            walk.out.free_state(values.state);
        } else {
            nodes_[at].state = values.state;
            account(at, Component::mamba, +1);
            emit(EventKind::stored, Component::mamba, Tier::device, at);
            sync(at);
        }
    }
    path_to(at, path_);
    for (Id x : path_)
        if (nodes_[x].retention < values.retention) set_retention_of(x, values.retention);
    raise_window_class(path_, length, values.window_class);
    count_hits(length, walk.out);
    refresh(path_);
    result.node = ref(at);
    result.beside_host = beside_host_;
    return result;
}

// The key covers node `id` entirely. Returns the node that ends where `id` ended.
template <class... Cs>
auto RadixTree<Cs...>::overlap(Id id, Walk& walk) -> Id {
    const std::int32_t ps = config_.page_size.tokens;
    const std::int32_t from = nodes_[id].start;
    const std::int32_t to = nodes_[id].end();
    const auto incoming = walk.pages(from, to, ps);
    if (nodes_[id].pages.empty()) {
        // No FULL device data here (host-only or emptied): take the request's pages.
        if (components::has_swa && from < walk.live_from && walk.live_from < to) {
            const Id upper = split(id, walk.live_from - from);
            adopt(upper, walk.pages(from, walk.live_from, ps), SwaRows::tombstone);
            adopt(id, walk.pages(walk.live_from, to, ps), SwaRows::live);
        } else {
            adopt(id, incoming, components::has_swa && walk.live_from <= from ? SwaRows::live : SwaRows::tombstone);
        }
        return id;
    }
    const std::span<const VirtualPage> mine = nodes_[id].pages;
    // The common case: the request reused exactly the cached pages, so there is nothing to free or recover.
    // (VirtualPage is one int32, so equal bytes mean equal ids.)
    if (std::memcmp(incoming.data(), mine.data(), incoming.size_bytes()) == 0) return id;
    const bool disjoint = std::mismatch(incoming.begin(), incoming.end(), mine.begin(),
                                        [](VirtualPage a, VirtualPage b) { return a != b; })
                              .first == incoming.end();
    // A load of the node's SWA copy binds its rows under the node's pages at its ack (the cache's load-back), so
    // while one is in flight the request's rows go as duplicates. Only a recorded load counts: a host lock on the
    // node's SWA may come from a descendant's window (a load or a store reading the descendant's copy) and says
    // nothing about this node, whose tombstone must then take the request's rows.
    const bool recoverable = components::has_swa && !nodes_[id].swa && disjoint && walk.live_from < to &&
                             !loads_.loading(id, Component::swa);
    if (!recoverable) {
        for (std::size_t i = 0; i < incoming.size(); ++i)
            if (incoming[i] != nodes_[id].pages[i]) walk.out.free_pages(incoming.subspan(i, 1));
        return id;
    }
    // SWA tombstone inside the request's live range: recover, after cutting off the part before the range.
    std::int32_t live = from;
    if (walk.live_from > from) {
        live = walk.live_from;
        split(id, live - from);
        walk.out.free_pages(walk.pages(from, live, ps));
    }
    recover_swa(id, walk.pages(live, to, ps), walk.out);
    return id;
}

template <class... Cs>
void RadixTree<Cs...>::adopt(Id id, std::span<const VirtualPage> pages, SwaRows swa) {
    beside_host_ = beside_host_ || has_host(nodes_[id], Component::full) ||
                   (swa == SwaRows::live && has_host(nodes_[id], Component::swa));
    set_pages(id, pages);
    emit(EventKind::stored, Component::full, Tier::device, id);
    if (swa == SwaRows::live) {
        nodes_[id].swa = true;
        account(id, Component::swa, +1);
        emit(EventKind::stored, Component::swa, Tier::device, id);
    }
    sync(id);
    sync(nodes_[id].parent);
}

template <class... Cs>
void RadixTree<Cs...>::recover_swa(Id id, std::span<const VirtualPage> incoming, detail::ActionsBuilder& out) {
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
    account(id, Component::swa, +1);
    emit(EventKind::stored, Component::swa, Tier::device, id);
    sync(id);
}

// One hit on every node of the insert's path (`path_`, top-down, ending at `end` tokens). Under write-through, a
// node that reached the threshold gets a `write_through` of each component it holds on device only, has none
// pending and has not stored: FULL, SWA within one window before `end` (what a later match ending there reads),
// Mamba on the end node. O(1) per node.
template <class... Cs>
void RadixTree<Cs...>::count_hits(std::int32_t end, detail::ActionsBuilder& out) {
    const std::uint32_t threshold = config_.write_through_threshold;
    const auto wanted = [](const Node& n, Component c) {
        return has_device(n, c) && !has_host(n, c) && !write_pending(n, c) && !n.pending[c] && !stored(n, c);
    };
    for (Id x : path_) {
        Node& n = nodes_[x];
        n.hits += n.hits != std::numeric_limits<std::uint32_t>::max() ? 1 : 0;
        if (threshold == 0 || n.hits < threshold) continue;
        if (wanted(n, Component::full)) start_write_through(x, Component::full, out);
        if (components::has_swa && n.end() > end - config_.swa_window && wanted(n, Component::swa))
            start_write_through(x, Component::swa, out);
        if (components::has_mamba && x == path_.back() && wanted(n, Component::mamba))
            start_write_through(x, Component::mamba, out);
    }
}

// Emits a write-through of component `c` of `id` and marks it pending.
template <class... Cs>
void RadixTree<Cs...>::start_write_through(Id id, Component c, detail::ActionsBuilder& out) {
    Node& n = nodes_[id];
    if (c == Component::mamba) {
        out.copy_state(ActionKind::write_through, ref(id), n.state);
    } else {
        out.copy_pages(ActionKind::write_through, c, ref(id), n.pages);
    }
    n.write_bits |= pending_bit(c);
    sync(id);
}

// New nodes for the key's tokens from `from` on, under `parent`. A leaf straddling the request's SWA position
// becomes two nodes: the part before it holds an SWA tombstone.
template <class... Cs>
auto RadixTree<Cs...>::add_leaves(Id parent, std::int32_t from, Walk& walk) -> Id {
    const std::int32_t ps = config_.page_size.tokens;
    const auto to = static_cast<std::int32_t>(walk.key.tokens.size());
    const auto tokens = walk.key.tokens;
    std::int32_t cut = from;
    if (components::has_swa && from < walk.live_from && walk.live_from < to) {
        cut = walk.live_from;
        parent = add_node(parent, walk.key.ns, from, tokens.subspan(from, cut - from), walk.pages(from, cut, ps),
                          SwaRows::tombstone);
    }
    const SwaRows swa = components::has_swa && walk.live_from <= cut ? SwaRows::live : SwaRows::tombstone;
    return add_node(parent, walk.key.ns, cut, tokens.subspan(cut), walk.pages(cut, to, ps), swa);
}

// ---------------------------------------------------------------------------------------------------------
// insert_host

template <class... Cs>
HostInsertResult RadixTree<Cs...>::insert_host(TokenKey key, const HostInsertValues& values) {
    const std::int32_t ps = config_.page_size.tokens;
    const auto length = static_cast<std::int32_t>(key.tokens.size());
    const std::int32_t from = values.from;
    expect_live();
    expect_no_pending();
    UNIKV_EXPECTS(length > 0 && length % ps == 0, "a key of ", length, " tokens is not a positive whole number of ",
                  ps, "-token pages");
    UNIKV_EXPECTS(from >= 0 && from <= length && from % ps == 0, "from ", from,
                  " is not a page-aligned position in the key");
    UNIKV_EXPECTS(values.full.size() == static_cast<std::size_t>((length - from) / ps), values.full.size(),
                  " FULL host pages given for tokens [", from, ", ", length, ")");
    const std::int32_t window = components::has_swa ? std::min(window_tokens(), length) : 0;
    UNIKV_EXPECTS(values.swa.size() == static_cast<std::size_t>(window / ps), values.swa.size(),
                  " SWA host pages given, the window at the key's end needs ", window / ps);
    UNIKV_EXPECTS(values.state.is_valid() == components::has_mamba,
                  components::has_mamba ? "a tree with Mamba needs the host state at the key's end"
                                        : "a host state is given but the tree has no Mamba component");
    for (HostPage h : values.full) UNIKV_EXPECTS(h.is_valid(), "invalid FULL host page ", h);
    for (HostPage h : values.swa) UNIKV_EXPECTS(h.is_valid(), "invalid SWA host page ", h);

    // 1. Walk without changing anything: whole nodes into `path_`, then the node the key ends or diverges in.
    const std::uint64_t ns_seed = detail::tree::namespace_seed(key.ns);
    path_.clear();
    std::int32_t covered = 0;
    Id inside = npos;  // the node the walk stops inside, `inside_same` tokens in
    std::int32_t inside_same = 0;
    while (covered < length) {
        const auto [child, same] = descend(path_.empty() ? root : path_.back(), key.ns, ns_seed,
                                           key.tokens.data() + covered, length - covered);
        if (child == npos) break;
        if (same < nodes_[child].length) {
            inside = child;
            inside_same = same;
            break;
        }
        path_.push_back(child);
        covered += same;
    }
    // The cached tokens end where the key leaves the tree, or at the first node without FULL data in any tier.
    std::int32_t cached = covered + inside_same;
    for (std::size_t i = 0; i <= path_.size(); ++i) {
        const Id x = i < path_.size() ? path_[i] : inside;
        if (x != npos && !keeps(nodes_[x], Component::full)) {
            cached = nodes_[x].start;
            break;
        }
    }
    HostInsertResult r;
    if (cached < from) {
        r.node = ref(path_.empty() ? root : path_.back());
        r.unused[Component::full].assign(values.full.begin(), values.full.end());
        r.unused[Component::swa].assign(values.swa.begin(), values.swa.end());
        if (values.state.is_valid()) r.unused[Component::mamba].push_back(values.state);
        return r;
    }

    // 2. Structure: the walk's split, the window's start as a node boundary, new nodes for the rest of the key.
    if (inside != npos) {
        path_.push_back(split(inside, inside_same));
        covered += inside_same;
    }
    const std::int32_t window_start = length - window;
    for (std::size_t i = 0; i < path_.size(); ++i) {
        const Node& n = nodes_[path_[i]];
        if (n.start < window_start && window_start < n.end()) {
            const Id upper = split(path_[i], window_start - n.start);
            path_.insert(path_.begin() + static_cast<std::ptrdiff_t>(i), upper);
            break;
        }
    }
    for (std::int32_t begin = covered; const std::int32_t stop : {window_start, length}) {
        if (stop <= begin) continue;
        const auto tokens = key.tokens.subspan(static_cast<std::size_t>(begin), static_cast<std::size_t>(stop - begin));
        path_.push_back(add_node(path_.empty() ? root : path_.back(), key.ns, begin, tokens, {}, SwaRows::tombstone));
        begin = stop;
    }

    // 3. Values, top-down: FULL, then SWA per node; Mamba on the end node.
    const auto slice = [&](std::span<const HostPage> pages, std::int32_t first, const Node& n) {
        const std::int32_t begin = std::max(n.start, first);
        return pages.subspan(static_cast<std::size_t>((begin - first) / ps),
                             static_cast<std::size_t>((n.end() - begin) / ps));
    };
    const auto graft = [&](Id x, Component c, std::span<const HostPage> host) {
        nodes_[x].host_pages[index_of(c)].assign(host.begin(), host.end());
        host_[c] += nodes_[x].length;
        emit(EventKind::stored, c, Tier::host, x);
    };
    for (const Id x : path_) {
        const Node& n = nodes_[x];
        bool took = false;
        for (const Component c : {Component::full, Component::swa}) {
            const std::int32_t first = c == Component::full ? from : window_start;
            if (!in_set(c) || n.end() <= first) continue;
            const auto host = slice(c == Component::full ? values.full : values.swa, first, n);
            if (keeps(n, c)) {
                r.unused[c].insert(r.unused[c].end(), host.begin(), host.end());
            } else {
                UNIKV_ASSERT(n.start >= first);  // the walk found the key cached up to `from`
                graft(x, c, host);
                took = true;
            }
        }
        if (took) sync(x);
    }
    const Id last = path_.back();
    if constexpr (components::has_mamba) {
        if (keeps(nodes_[last], Component::mamba)) {
            r.unused[Component::mamba].push_back(values.state);
        } else {
            nodes_[last].state_host = values.state;
            host_[Component::mamba] += 1;
            emit(EventKind::stored, Component::mamba, Tier::host, last);
            sync(last);
        }
    }
    r.node = ref(last);
    r.grafted = true;
    return r;
}

}  // namespace unikv

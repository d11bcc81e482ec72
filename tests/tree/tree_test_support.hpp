#pragma once
// Helpers shared by the tree tests, which run on both shipped core tags (`RadixTreeCore`, `ReferenceTreeCore`)
// through TEST_CASE_TEMPLATE: key and id builders, and a canonical form of action lists that compares equal across
// cores (node handles are per tree, ids are not).

#include <array>
#include <cstdint>
#include <initializer_list>
#include <ostream>
#include <numeric>
#include <span>
#include <string>
#include <vector>

#include <unikv/tree/radix_tree.hpp>
#include <unikv/tree/reference_tree.hpp>

#include "broken.hpp"

namespace unikv::test {

inline std::vector<TokenId> toks(std::initializer_list<int> values) { return {values.begin(), values.end()}; }

// `count` tokens starting at `first`, increasing (distinct content per position).
inline std::vector<TokenId> run(int first, int count) {
    std::vector<TokenId> out(static_cast<std::size_t>(count));
    std::iota(out.begin(), out.end(), first);
    return out;
}

inline std::vector<TokenId> cat(std::vector<TokenId> a, const std::vector<TokenId>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
}

inline constexpr Component F = Component::full;
inline constexpr Component S = Component::swa;
inline constexpr Component M = Component::mamba;

// Ids first, first+1, ..., first+count-1 of one id domain.
template <class Id>
std::vector<Id> ids(int first, int count) {
    std::vector<Id> out;
    for (int i = 0; i < count; ++i) out.emplace_back(first + i);
    return out;
}
inline std::vector<VirtualPage> vpages(int first, int count) { return ids<VirtualPage>(first, count); }
inline std::vector<HostPage> hpages(int first, int count) { return ids<HostPage>(first, count); }

inline std::vector<VirtualPage> cat_pages(std::vector<VirtualPage> a, const std::vector<VirtualPage>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
}

// Evictable and protected device sizes of Full, Swa, Mamba, compared in one check.
struct Sizes {
    std::array<std::int64_t, 3> evictable{};
    std::array<std::int64_t, 3> locked{};
    friend bool operator==(const Sizes&, const Sizes&) = default;
    friend std::ostream& operator<<(std::ostream& os, const Sizes& s) {
        return os << "evictable {" << s.evictable[0] << ", " << s.evictable[1] << ", " << s.evictable[2]
                  << "} protected {" << s.locked[0] << ", " << s.locked[1] << ", " << s.locked[2] << "}";
    }
};
template <class Tree>
Sizes sizes(const Tree& t) {
    Sizes s;
    for (Component c : {F, S, M}) {
        s.evictable[index_of(c)] = t.evictable_size(c);
        s.locked[index_of(c)] = t.protected_size(c);
    }
    return s;
}

inline std::vector<int> ints(std::span<const VirtualPage> ids) {
    std::vector<int> out;
    for (auto id : ids) out.push_back(id.value());
    return out;
}

inline std::vector<int> ints(const PageRuns& pages) {
    std::vector<int> out;
    for (auto id : pages) out.push_back(id.value());
    return out;
}

inline std::vector<int> ints(std::span<const HostPage> ids) {
    std::vector<int> out;
    for (auto id : ids) out.push_back(id.value());
    return out;
}

// One action with its ids as plain ints (node handles dropped).
struct Act {
    ActionKind kind;
    Component component;
    std::vector<int> ids;
    std::vector<int> incoming;
    friend bool operator==(const Act&, const Act&) = default;
};

inline std::vector<Act> canon(const TreeActions& actions) {
    std::vector<Act> out;
    for (const TreeAction& a : actions.list()) {
        Act x{a.kind, a.component, {}, {}};
        for (auto p : actions.pages(a)) x.ids.push_back(p.value());
        for (auto s : actions.states(a)) x.ids.push_back(s.value());
        for (auto h : actions.host_pages(a)) x.ids.push_back(h.value());
        for (auto p : actions.incoming_pages(a)) x.incoming.push_back(p.value());
        out.push_back(std::move(x));
    }
    return out;
}

// Builders for expected action lists.
inline Act free_pages(std::vector<int> ids) { return {ActionKind::free_pages, Component::full, std::move(ids), {}}; }
inline Act free_swa(std::vector<int> ids) { return {ActionKind::free_swa, Component::swa, std::move(ids), {}}; }
inline Act free_states(std::vector<int> ids) { return {ActionKind::free_states, Component::mamba, std::move(ids), {}}; }
inline Act free_host(Component c, std::vector<int> ids) { return {ActionKind::free_host, c, std::move(ids), {}}; }
inline Act backup(Component c, std::vector<int> ids) { return {ActionKind::backup, c, std::move(ids), {}}; }
inline Act write_through(Component c, std::vector<int> ids) { return {ActionKind::write_through, c, std::move(ids), {}}; }
inline Act recover_locked(std::vector<int> kept, std::vector<int> incoming) {
    return {ActionKind::recover_swa_locked_full, Component::full, std::move(kept), std::move(incoming)};
}

// Takes the canonical form and marks the list executed.
inline std::vector<Act> executed(TreeActions& actions) {
    auto out = canon(actions);
    actions.mark_executed();
    return out;
}

// Completes a backup and returns what the completion freed (canonical form), marking it executed.
// `host` empty: the copy could not be made (no host room).
template <class Tree>
std::vector<Act> finish(Tree& tree, NodeRef node, Component c, const std::vector<HostPage>& host = {}) {
    auto r = tree.finish_backup(node, c, host);
    return executed(r.actions);
}

using test_verify::broken;

inline std::int64_t tokens_of(std::int64_t pages, int page_size) { return pages * page_size; }

/// The 8-token leaf several tests share (pages 1-4, state 5; page 2, W = 3), evicted with write-back: checks the
/// backups it queues (the tail's SWA window and Mamba state, both parts' FULL rows) and returns the upper part.
template <class Tree>
NodeRef write_back_leaf(Tree& tree, NodeRef leaf) {
    auto ev = tree.evict(F, 8, {.write_back = EvictBackups::on});
    CHECK(executed(ev.actions) == std::vector<Act>{backup(S, {3, 4}), backup(M, {5}), backup(F, {1, 2}),
                                                   backup(F, {3, 4}), free_pages({1, 2, 3, 4}), free_states({5})});
    return tree.node_info(leaf).parent;
}

/// Records every copy `write_back_leaf` asked for, in action order: SWA at host page 10, Mamba at 20, FULL at 30
/// (upper part) and 40 (leaf). The leaf is then host-only in every component.
template <class Tree>
void finish_leaf_backups(Tree& tree, NodeRef leaf, NodeRef upper) {
    CHECK(finish(tree, leaf, S, hpages(10, 2)).empty());
    CHECK(finish(tree, leaf, M, hpages(20, 1)).empty());
    CHECK(finish(tree, upper, F, hpages(30, 2)).empty());
    CHECK(finish(tree, leaf, F, hpages(40, 2)).empty());
}

}  // namespace unikv::test

// KV events, on both tree cores: what is reported per component and tier, and prefix hashes that do not depend on
// how the tree split its nodes.

#include <doctest/doctest.h>

#include <unikv/detail/tree/page_hash.hpp>

#include "tree_test_support.hpp"

using namespace unikv;
using namespace unikv::test;

namespace {

std::uint64_t prefix_hash(const std::vector<TokenId>& tokens, std::int32_t upto, std::int32_t ps, KeyNamespace ns = {}) {
    return detail::tree::chain_pages(detail::tree::namespace_seed(ns), std::span(tokens).first(static_cast<std::size_t>(upto)), ps);
}
}  // namespace

TEST_CASE_TEMPLATE("events report stored and removed data per component and tier", Core, RadixTreeCore,
                   ReferenceTreeCore) {
    typename Core::template impl<Full, Swa, Mamba> tree(
        {.page_size = {2}, .swa_window = 2, .events = EventMode::record});
    const auto key = run(1, 8);
    auto ins = tree.insert({key}, {.pages = vpages(1, 4), .swa_evicted = 4, .state = StateId{3}});
    const std::uint64_t h4 = prefix_hash(key, 4, 2);
    const std::uint64_t h8 = prefix_hash(key, 8, 2);
    const std::uint64_t h0 = prefix_hash(key, 0, 2);
    using E = KvEvent;
    CHECK(tree.take_events() == std::vector<E>{
                                    E{EventKind::stored, F, Tier::device, {}, 0, 4, h0, h4},
                                    E{EventKind::stored, F, Tier::device, {}, 4, 4, h4, h8},
                                    E{EventKind::stored, S, Tier::device, {}, 4, 4, h4, h8},
                                    E{EventKind::stored, M, Tier::device, {}, 4, 4, h4, h8},
                                });
    tree.set_host(ins.node, F, hpages(10, 2));
    CHECK(tree.take_events() == std::vector<E>{E{EventKind::stored, F, Tier::host, {}, 4, 4, h4, h8}});

    // A split emits nothing; a later removal names the smaller range with its own hashes.
    CHECK(tree.match_prefix({std::span(key).first(6)}).full_length == 6);
    CHECK(tree.take_events().empty());
    const std::uint64_t h6 = prefix_hash(key, 6, 2);
    // Host copies of every component keep the leaf as a host-only node when its device data goes.
    tree.set_host(ins.node, S, hpages(20, 1));
    tree.set_host(ins.node, M, hpages(30, 1));
    CHECK(tree.take_events() == std::vector<E>{E{EventKind::stored, S, Tier::host, {}, 6, 2, h6, h8},
                                               E{EventKind::stored, M, Tier::host, {}, 6, 2, h6, h8}});
    auto ev = tree.evict(F, 2);
    CHECK(executed(ev.actions) == std::vector<Act>{free_pages({4}), free_states({3})});
    CHECK(tree.contains(ins.node));
    CHECK(tree.take_events() == std::vector<E>{
                                    E{EventKind::removed, F, Tier::device, {}, 6, 2, h6, h8},
                                    E{EventKind::removed, S, Tier::device, {}, 6, 2, h6, h8},
                                    E{EventKind::removed, M, Tier::device, {}, 6, 2, h6, h8},
                                });
    CHECK(tree.take_events().empty());
}

TEST_CASE_TEMPLATE("prefix hashes do not depend on node boundaries or on other namespaces", Core, RadixTreeCore,
                   ReferenceTreeCore) {
    using Tree = typename Core::template impl<Full>;
    const auto key = run(5, 8);
    Tree whole({.page_size = {2}, .events = EventMode::record});
    Tree pieces({.page_size = {2}, .events = EventMode::record});
    auto a = whole.insert({key}, {.pages = vpages(1, 4)});
    auto b = pieces.insert({std::span(key).first(4)}, {.pages = vpages(1, 2)});
    auto c = pieces.insert({key}, {.pages = vpages(1, 4)});
    CHECK(whole.take_events().back().hash == pieces.take_events().back().hash);

    Tree other({.page_size = {2}, .events = EventMode::record});
    auto d = other.insert({key, KeyNamespace{9}}, {.pages = vpages(1, 4)});
    const auto events = other.take_events();
    REQUIRE(events.size() == 1);
    CHECK(events[0].ns == KeyNamespace{9});
    CHECK(events[0].hash == prefix_hash(key, 8, 2, KeyNamespace{9}));
    CHECK(events[0].hash != prefix_hash(key, 8, 2));
}

TEST_CASE_TEMPLATE("no events are recorded unless asked for", Core, RadixTreeCore, ReferenceTreeCore) {
    typename Core::template impl<Full> tree({.page_size = {1}});
    auto ins = tree.insert({run(1, 4)}, {.pages = vpages(1, 4)});
    CHECK(tree.take_events().empty());
}

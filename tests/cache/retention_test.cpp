// The retention policies (`RetentionConfig`): what a cache keeps of a request's SWA window and Mamba state at
// its prompt's end and at branch points, the eviction order of windows, and states demoted to host and loaded
// back. Every row a forward computes gets a marker; every prefix row and state a later request reuses is read
// back through its handle (`HandleEngine::forward`).

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include <unikv/cache.hpp>
#include <unikv/tree/reference_tree.hpp>

#include "cache/handle_engine.hpp"

namespace retention_test {

using namespace unikv;
using handle_test::HandleEngine;
using handle_test::join;
using handle_test::SwaPolicies;
using handle_test::tokens;
using handle_test::TriPolicies;

// Each case runs over both tree cores: the reference tree keeps the same windows and orders their eviction alike.
template <class Core>
struct SwaOver : SwaPolicies {
    using tree_core = Core;
};
template <class Core>
struct TriOver : TriPolicies {
    using tree_core = Core;
};

// The tokens `HandleEngine::serve` decodes.
std::vector<TokenId> outputs(std::int32_t n) {
    std::vector<TokenId> out;
    for (std::int32_t i = 0; i < n; ++i) out.push_back(static_cast<TokenId>(9000 + i));
    return out;
}

TEST_CASE("retained points: the first after a position, and the window class of each") {
    const RetainPoints p = RetainPoints::of({.every_tokens = 8}, 30, 12, 4);
    CHECK(p.branch == 12);
    CHECK(p.prompt_end == 28);
    CHECK(p.next_after(0, 30) == 8);
    CHECK(p.next_after(8, 30) == 12);
    CHECK(p.next_after(12, 30) == 16);
    CHECK(p.next_after(24, 30) == 28);
    CHECK(p.next_after(28, 30) == 30);  // none: the end itself
    CHECK(p.next_after(0, 6) == 6);
    CHECK(p.class_at(12) == window_class_branch);
    CHECK(p.class_at(16) == window_class_end);
    CHECK(p.class_at(28) == window_class_end);
    CHECK(p.class_at(20 + 2) == window_class_chunk);
    const RetainPoints none = RetainPoints::of({.prompt_ends = false, .branch_points = false}, 30, 12, 4);
    CHECK(none.next_after(0, 30) == 30);
    CHECK(none.class_at(28) == window_class_chunk);
}

TEST_CASE_TEMPLATE("a two-turn chat on an SWA model: turn 2 reuses turn 1's prompt and output, a regenerated turn its "
                   "prompt", Core, RadixTreeCore, ReferenceTreeCore) {
    for (const bool keep : {true, false}) {
        CAPTURE(keep);
        HandleEngine<SwaOver<Core>> e(64, {.prompt_ends = keep, .branch_points = keep});
        const std::vector<TokenId> turn1 = tokens(100, 22);
        REQUIRE(e.serve(turn1, 20) == 0);  // 42 rows: its window slid 34 tokens past the prompt's end
        // The next turn's prompt holds turn 1's prompt and output: the window at turn 1's end serves 40 tokens.
        const std::vector<TokenId> turn2 = join(join(turn1, outputs(20)), tokens(700, 5));
        CHECK(e.cache.match({turn2}).device_length == 40);
        // A regenerated answer shares only the prompt: the window at its end (20) was kept, or slid away.
        const std::vector<TokenId> regenerated = join(turn1, tokens(800, 6));
        CHECK(e.cache.match({regenerated}).device_length == (keep ? 20 : 0));
        CHECK(e.serve(turn2, 3) == 0);  // every prefix row and window row read back
        CHECK(e.serve(regenerated, 3) == 0);
        const ReuseCounters& reuse = e.cache.reuse();
        CHECK(reuse.requests == 3);
        CHECK(reuse.device_hit_tokens == 40 + (keep ? 20 : 0));
        CHECK(reuse.missing_window_tokens == (keep ? 0 : 20));  // the FULL pages were there, the window not
        CHECK(e.broken() == "");
    }
}

TEST_CASE_TEMPLATE("branches of one prefix hit after their windows slid; eviction takes branch-tail windows last", Core,
                   RadixTreeCore, ReferenceTreeCore) {
    HandleEngine<SwaOver<Core>> e(128);
    auto& cache = e.cache;
    const std::vector<TokenId> shared = tokens(100, 16);
    const std::vector<TokenId> a = join(shared, tokens(300, 10));
    const std::vector<TokenId> b = join(shared, tokens(400, 10));
    REQUIRE(e.serve(a, 12) == 0);  // caches its prompt's end (24) and its end; its window at 16 slid
    const std::vector<TokenId> c = join(shared, tokens(500, 3));
    CHECK(cache.match({c}).device_length == 0);  // the FULL pages of `shared` are there, no window at their end
    // B leaves A's path at 16: before its window slides past, the cache keeps the window there.
    REQUIRE(e.serve(b, 12) == 0);
    CHECK(cache.reuse().missing_window_tokens == 16);
    CHECK(cache.match({c}).device_length == 16);
    CHECK(cache.match({join(a, tokens(600, 2))}).device_length == 24);  // both branches' prompt ends
    CHECK(cache.match({join(b, tokens(600, 2))}).device_length == 24);
    CHECK(e.serve(c, 2) == 0);  // reads the shared rows and the branch window back
    CHECK(cache.reuse().device_hit_tokens == 16);
    CHECK(cache.tree().node_info(cache.match({c}).device_node).window_class == window_class_branch);

    // Under pressure on SWA, every other window (prompt ends, request ends) goes before the branch-tail window.
    const std::vector<std::pair<std::vector<TokenId>, std::int32_t>> others = {
        {join(a, tokens(600, 2)), 24}, {join(b, tokens(600, 2)), 24},
        {join(join(a, outputs(12)), tokens(600, 2)), 36}, {join(join(b, outputs(12)), tokens(600, 2)), 36},
        {join(join(c, outputs(2)), tokens(600, 2)), 20}};
    const auto held = [&](const std::vector<TokenId>& key, std::int32_t length) {
        return cache.match({key}).device_length == length;
    };
    int evictions = 0;
    while (std::any_of(others.begin(), others.end(), [&](const auto& o) { return held(o.first, o.second); })) {
        REQUIRE(held(c, 16));
        REQUIRE(evictions++ < 64);
        (void)cache.evict({Component::swa, 1});
    }
    CHECK(evictions > 0);
    CHECK(held(c, 16));
    CHECK(e.serve(join(shared, tokens(900, 5)), 1) == 0);  // the branch window still reads back
    CHECK(e.broken() == "");
}

TEST_CASE_TEMPLATE("a Mamba state at a branch point serves both branches; demoted to host, it comes back with its "
                   "prefix", Core, RadixTreeCore, ReferenceTreeCore) {
    CacheConfig config = handle_test::config(128);
    config.host.tokens_per_state = handle_test::page_size;  // host room for a state per cached page
    HandleEngine<TriOver<Core>> e(config);
    auto& cache = e.cache;
    const std::vector<TokenId> shared = tokens(100, 16);
    REQUIRE(e.serve(join(shared, tokens(300, 10)), 4) == 0);  // A: a state at its prompt's last whole page (24)
    CHECK(cache.match({join(shared, tokens(500, 3))}).device_length == 0);  // FULL pages, no state at 16

    // B leaves A's path at 16: its first chunk stops there so that its checkpoint caches the state at 16.
    Sequence b;
    cache.begin_step({});
    REQUIRE(cache.admit(b, {.prompt = {join(shared, tokens(400, 10))}, .max_new_tokens = 2}));
    CHECK(b.retain_points().branch == 16);
    CHECK(b.retain_points().prompt_end == 24);
    CHECK(b.prefilling());
    CHECK(b.prefix_length() == 0);
    CHECK(b.length() == 16);
    CHECK(e.forward(b) == 0);
    const CacheInsert branch = cache.checkpoint(b);
    const StateId at_branch = cache.tree().node_info(branch.node).state;
    REQUIRE(at_branch.is_valid());
    cache.begin_step({});
    REQUIRE(cache.extend(b));
    CHECK(e.forward(b) == 0);  // starts from the cache's copy of the state at 16
    (void)cache.finish(b);
    CHECK(cache.reuse().missing_state_tokens == 16);

    // Two more branches start from the state at 16 (the forward reads its marker back).
    for (TokenId first : {500, 600}) CHECK(e.serve(join(shared, tokens(first, 3)), 2) == 0);
    CHECK(cache.reuse().device_hit_tokens == 32);

    // Everything goes to host (write-back), the state at 16 with its prefix; a request loads both back.
    (void)cache.evict({Component::full, 1 << 20});
    REQUIRE(cache.match({join(shared, tokens(700, 3))}).device_length == 0);
    CHECK(e.serve(join(shared, tokens(700, 3)), 2) == 0);  // the loaded state reads back byte-exact
    CHECK(cache.reuse().host_hit_tokens >= 16);
    CHECK(e.broken() == "");
}

TEST_CASE("a restored handle caches no SWA row its backup did not bring back, and handles sharing a prompt keep it "
          "once") {
    HandleEngine<SwaPolicies> e(256, {.every_tokens = 4});
    auto& cache = e.cache;
    Sequence s;
    cache.begin_step({});
    const std::vector<TokenId> prompt = tokens(100, 10);
    REQUIRE(cache.admit(s, {.prompt = {prompt}, .max_new_tokens = 40}));
    int wrong = e.forward(s);
    for (TokenId i = 0; i < 20; ++i) {
        Sequence* batch[] = {&s};
        const TokenId next[] = {9000 + i};
        REQUIRE(cache.decode(batch, next));
        wrong += e.forward(s);
    }
    CHECK(s.prefix_length() == 8);  // its first decode kept its points 4 and 8 (the prompt's last whole page)
    const std::vector<TokenId> all(s.tokens().begin(), s.tokens().end());
    REQUIRE(cache.retract(s));
    CHECK(e.serve(tokens(5000, 30), 10) == 0);  // another request takes its memory
    cache.begin_step({});
    REQUIRE(cache.restore(s));
    REQUIRE(s.restored_rows() == 22);
    // The backup held the SWA rows of the window of its first row to compute (29) only: from 20 on.
    CHECK(s.swa_start() == 20);
    wrong += e.forward(s);
    (void)cache.finish(s);
    // Its sparse points 12..24 lost their windows before the retraction: only the prompt's end serves.
    const std::vector<TokenId> again = join(std::vector<TokenId>(all.begin(), all.begin() + 20), tokens(7000, 3));
    CHECK(cache.match({again}).device_length == 8);
    CHECK(e.serve(again, 1) == 0);
    CHECK(wrong == 0);

    // Two handles compute one prompt in the same step; their first decodes cache it once (the second's
    // duplicates are freed, its rows read from the first's pages).
    std::vector<Sequence> twins(2);
    const std::vector<TokenId> shared = tokens(3000, 14);
    cache.begin_step({});
    for (Sequence& t : twins) {
        REQUIRE(cache.admit(t, {.prompt = {shared}, .max_new_tokens = 12}));
        CHECK(t.prefix_length() == 0);
        CHECK(e.forward(t) == 0);
    }
    const std::int64_t live = cache.allocator().live_pages(Component::full);
    for (TokenId i = 0; i < 10; ++i) {
        Sequence* batch[] = {&twins[0], &twins[1]};
        const TokenId next[] = {9100 + i, 9200 + i};
        REQUIRE(cache.decode(batch, next));
        for (Sequence& t : twins) CHECK(e.forward(t) == 0);
        if (i == 0) CHECK(cache.allocator().live_pages(Component::full) == live - 3);  // the duplicates of 12 tokens
    }
    CHECK(twins[0].node() == twins[1].node());
    for (Sequence& t : twins) (void)cache.finish(t);
    CHECK(e.serve(join(shared, tokens(800, 2)), 1) == 0);
    CHECK(e.broken() == "");
}

}  // namespace retention_test

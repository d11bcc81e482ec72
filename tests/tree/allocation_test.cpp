// The hot paths allocate nothing once the tree's scratch buffers have grown: repeated matches (no new splits),
// load-back plans, locks and unlocks, and inserts of cached keys with the cached pages. Counted with a replaced
// global operator new that only counts while a test asks it to.

#include <doctest/doctest.h>

#include <cstdlib>
#include <new>

#include "tree_test_support.hpp"

// GCC 12 flags free() on memory from the replaced operator new once both are inlined at -O2; the pairing is
// deliberate here (both replacements use malloc/free).
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"

namespace {
bool counting = false;
long allocations = 0;
}  // namespace

void* operator new(std::size_t n) {
    if (counting) ++allocations;
    if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
    throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
// Over-aligned types (the tree's 64-byte nodes) allocate through these: count them too.
void* operator new(std::size_t n, std::align_val_t a) {
    if (counting) ++allocations;
    const auto align = static_cast<std::size_t>(a);
    if (void* p = std::aligned_alloc(align, (n + align - 1) / align * align)) return p;
    throw std::bad_alloc();
}
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }

using namespace unikv;
using namespace unikv::test;

TEST_CASE("steady-state match, lock, unlock and cached insert do not allocate") {
    RadixTree<Full, Swa, Mamba> tree({.page_size = {16}, .swa_window = 64});
    std::vector<std::vector<TokenId>> keys;
    std::vector<std::vector<VirtualPage>> pages;
    const auto system = run(1000, 256);
    for (int c = 0; c < 8; ++c) {
        keys.push_back(cat(system, run(10'000 * (c + 1), 512)));
        pages.push_back(cat_pages(vpages(1, 16), vpages(100 * (c + 1), 32)));
        auto r = tree.insert({keys.back()}, {.pages = pages.back(), .state = StateId{c + 1}});
        CHECK(r.actions.empty());
    }
    auto cycle = [&] {
        for (std::size_t i = 0; i < keys.size(); ++i) {
            const MatchResult m = tree.match_prefix({keys[i]});
            CHECK(tree.load_back_plan(m.device_node).empty());  // a device hit: nothing to load
            LockReceipt r = tree.lock(m.device_node);
            tree.unlock(std::move(r));
            auto again = tree.insert({keys[i]}, {.pages = pages[i]});
            CHECK(again.actions.empty());
        }
    };
    cycle();  // warm-up: scratch buffers grow here
    allocations = 0;
    counting = true;
    for (int round = 0; round < 50; ++round) cycle();
    counting = false;
    CHECK(allocations == 0);
    CHECK(tree.match_prefix({keys[3]}).device_length == 768);

    // Control: the counter does see allocations (a new key needs a new node's buffers).
    counting = true;
    auto fresh = tree.insert({run(777, 64)}, {.pages = vpages(5000, 4), .state = StateId{99}});
    counting = false;
    CHECK(allocations > 0);
}

TEST_CASE("reserve pre-sizes the arena, the child table and the match scratch") {
    RadixTree<Full> tree({.page_size = {4}});
    tree.reserve({.nodes = 256, .key_tokens = 4096});
    const auto key = run(1, 4096);
    auto first = tree.insert({key}, {.pages = vpages(1, 1024)});
    CHECK(first.actions.empty());

    // The first long match: the page scratch already holds 1024 pages.
    allocations = 0;
    counting = true;
    const MatchResult m = tree.match_prefix({key});
    counting = false;
    CHECK(m.device_length == 4096);
    CHECK(allocations == 0);

    // 255 more one-page leaves: each allocates its token and page buffers, nothing else (the arena, free list,
    // heaps and the child table were sized for 256 nodes).
    std::vector<std::vector<TokenId>> keys;
    for (int i = 0; i < 255; ++i) keys.push_back(run(100'000 + 4 * i, 4));
    const auto page = vpages(5000, 1);
    allocations = 0;
    counting = true;
    for (const auto& k : keys) {
        auto r = tree.insert({k}, {.pages = page});
        r.actions.mark_executed();
    }
    counting = false;
    CHECK(tree.node_count() == 256);
    CHECK(allocations == 2 * 255);
}

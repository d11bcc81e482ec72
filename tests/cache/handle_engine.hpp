#pragma once
// A test engine over `Cache` that computes through request handles (`Sequence`): the forward writes a marker
// into every row and state it computes and reads back every row a handle attends to (sequence_test,
// retention_test).

#include <doctest/doctest.h>

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include <unikv/backend/host_backend.hpp>
#include <unikv/cache.hpp>

#include "broken.hpp"
#include "cache/cache_support.hpp"
#include "row_words.hpp"

namespace handle_test {

using namespace unikv;
using cache_test::marker;
using cache_test::page_size;
using cache_test::window;

struct SwaPolicies : DefaultCachePolicies {
    using backend = HostBackend;
    using layout = SwaFullLayout;
};
struct TriPolicies : DefaultCachePolicies {
    using backend = HostBackend;
    using layout = TriPoolLayout;
};

inline CacheConfig config(std::size_t pages, RetentionConfig retention = {}) {
    const AttentionShape shape{.layers = 2, .kv_heads = 1, .head_dim = 8, .dtype_bytes = 2};
    return CacheConfig{.arena = {.model = {.full = shape, .swa = shape, .swa_window_tokens = window,
                                           .mamba = {.layers = 1, .conv_state_bytes = 32, .temporal_state_bytes = 32}},
                                 .page_sizes = {.full = {page_size}, .swa = {page_size}, .mamba = {1}},
                                 .arena_bytes = pages * page_size * 64},
                       .host = {.total_bytes = std::size_t{64} << 10},
                       .retention = retention};
}

inline std::vector<TokenId> tokens(TokenId first, std::int32_t n) {
    std::vector<TokenId> out;
    for (std::int32_t i = 0; i < n; ++i) out.push_back(first + i);
    return out;
}
inline std::vector<TokenId> join(std::vector<TokenId> a, const std::vector<TokenId>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
}

// An engine over `Cache<P>` that computes through handles: the forward writes a marker into every row (and the
// state) it computes and reads back every row a handle attends to.
template <class P>
struct HandleEngine {
    using TestCache = Cache<P>;
    HostBackend backend{{.mode = ExecutionMode::manual}};
    HostBackend::Stream stream = backend.make_stream();
    TestCache cache;

    explicit HandleEngine(std::size_t pages = 64, RetentionConfig retention = {})
        : HandleEngine(config(pages, retention)) {}
    explicit HandleEngine(const CacheConfig& c) : cache(backend, c, stream) {}

    [[nodiscard]] std::byte* at(Component c, std::int32_t physical) const {
        return cache.allocator().region().data +
               static_cast<std::size_t>(physical) * cache.allocator().spec()[c].entry_bytes;
    }
    [[nodiscard]] std::byte* row(Component c, VirtualToken v) const {
        PhysicalToken p;
        if (c == Component::full) cache.translate_full(std::span(&v, 1), std::span(&p, 1));
        if constexpr (TestCache::has_swa) {
            if (c == Component::swa) cache.translate_swa(std::span(&v, 1), std::span(&p, 1));
        }
        return p.value() <= 0 ? nullptr : at(c, p.value());
    }
    [[nodiscard]] std::byte* state_row(StateId s) const {
        PhysicalPage p;
        if constexpr (TestCache::has_mamba) cache.translate_state(std::span(&s, 1), std::span(&p, 1));
        return p.value() <= 0 ? nullptr : at(Component::mamba, p.value());
    }
    [[nodiscard]] std::size_t entry(Component c) const { return cache.allocator().spec()[c].entry_bytes; }
    static std::uint32_t state_marker(const Sequence& s, std::int32_t len) {
        return marker(Component::mamba, s.tokens()[static_cast<std::size_t>(len) - 1], len);
    }

    // The forward of `s`: reads what it attends to (FULL rows before `compute_from`, SWA rows of the window,
    // the state it starts from), writes rows `[compute_from, length)` and the state after them. Returns the
    // rows read back wrong.
    int forward(Sequence& s) {
        const std::span<const VirtualToken> rows = cache.rows(s);
        cache.sync_for_host();  // the moves queued by allocations and the state copies run first
        int wrong = 0;
        const std::int32_t from = s.compute_from();
        for (std::int32_t pos = 0; pos < s.length(); ++pos) {
            const TokenId t = s.tokens()[static_cast<std::size_t>(pos)];
            std::vector<Component> components{Component::full};
            // Every computed row in both pools (as a kernel writes them); before it, the SWA rows of the window.
            if (TestCache::has_swa && pos >= from - window) components.push_back(Component::swa);
            for (Component c : components) {
                std::byte* r = row(c, rows[static_cast<std::size_t>(pos)]);
                if (pos >= from) {
                    REQUIRE(r != nullptr);
                    test_rows::fill_row(r, entry(c), marker(c, t, pos));
                } else {
                    wrong += r == nullptr || test_rows::uniform_word(r, entry(c)) != marker(c, t, pos);
                }
            }
        }
        if constexpr (TestCache::has_mamba) {
            std::byte* st = state_row(s.state());
            REQUIRE(st != nullptr);
            if (from > 0 && from < s.length()) wrong += test_rows::uniform_word(st, entry(Component::mamba)) != state_marker(s, from);
            test_rows::fill_row(st, entry(Component::mamba), state_marker(s, s.length()));
        }
        return wrong;
    }
    // Admits, prefills (in chunks when the budget cuts) and decodes `decodes` tokens, reading every row back at
    // each step; finishes. Returns the rows read back wrong, or -1 when it was refused.
    int serve(const std::vector<TokenId>& prompt, std::int32_t decodes, std::int32_t chunk = 1 << 20) {
        Sequence s;
        cache.begin_step({.chunk_tokens = chunk});
        if (!cache.admit(s, {.prompt = {prompt}, .max_new_tokens = decodes + 1})) return -1;
        if (s.load_id() != 0) {  // a host hit: its prefix is read once the load is acknowledged
            (void)cache.start_loading();
            cache.transfer_stream().synchronize();
            REQUIRE(cache.loading_check().size() == 1);
        }
        int wrong = forward(s);
        while (s.prefilling()) {
            (void)cache.checkpoint(s);
            cache.begin_step({.chunk_tokens = chunk});
            REQUIRE(cache.extend(s));
            wrong += forward(s);
        }
        for (std::int32_t i = 0; i < decodes; ++i) {
            Sequence* batch[] = {&s};
            const TokenId next[] = {static_cast<TokenId>(9000 + i)};
            REQUIRE(cache.decode(batch, next));
            wrong += forward(s);
        }
        (void)cache.finish(s);
        return wrong;
    }
    [[nodiscard]] std::string broken() const { return test_verify::broken(cache); }
};

}  // namespace handle_test

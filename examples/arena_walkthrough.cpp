// The layers under unikv::Cache, without it: the real allocator (a tri-pool arena: Mamba | SWA float | FULL) and the
// real radix tree, driven together through the action executor on the CPU backend. Requests over a shared
// system prompt are matched, allocated, written, inserted, extended by a second turn (with their out-of-window
// SWA rows dropped), evicted per component while one conversation stays locked, re-served (recovering SWA
// tombstones under its locked FULL pages) and compacted. Every token row carries a marker derived from (token,
// position), read back through translation after each step; the program fails loudly if one row is wrong.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <span>
#include <vector>

#include <unikv/unikv.hpp>

namespace {

using namespace unikv;
using Alloc = UnifiedAllocator<TriPoolLayout, HostBackend>;
using Tree = RadixTree<Full, Swa, Mamba>;

constexpr std::int32_t page = 16, window = 32, system_tokens = 64, turn_tokens = 32, requests = 4;

std::uint32_t marker(Component c, TokenId token, std::int32_t pos) {
    return (static_cast<std::uint32_t>(c) + 1) << 30 ^ static_cast<std::uint32_t>(token) * 2654435761u ^
           static_cast<std::uint32_t>(pos) * 40503u;
}

struct Walkthrough {
    HostBackend backend;  // asynchronous: copies run on worker threads, after they are queued
    HostBackend::Stream stream = backend.make_stream();
    Alloc alloc{backend,
                ArenaConfig{.model = {.full = {.layers = 4, .kv_heads = 2, .head_dim = 16, .dtype_bytes = 2},
                                      .swa = {.layers = 2, .kv_heads = 2, .head_dim = 16, .dtype_bytes = 2},
                                      .swa_window_tokens = window,
                                      .mamba = {.layers = 2, .conv_state_bytes = 256, .temporal_state_bytes = 512}},
                            .page_sizes = {.full = {page}, .swa = {page}, .mamba = {1}},
                            .arena_bytes = std::size_t{1} << 20},
                stream};
    Tree tree{TreeConfig{.page_size = {page}, .swa_window = window}};
    ActionExecutor exec;
    std::size_t checked_rows = 0;

    std::byte* row(Component c, std::int32_t physical) const {
        return alloc.region().data + static_cast<std::size_t>(physical) * alloc.spec()[c].entry_bytes;
    }
    std::int32_t physical(Component c, std::int32_t id) const {
        if (c == Component::mamba) {
            const StateId s{id};
            PhysicalPage p;
            alloc.translate_state(std::span(&s, 1), std::span(&p, 1));
            return p.value();
        }
        const VirtualToken t{id};
        PhysicalToken p;
        if (c == Component::full) alloc.translate_full(std::span(&t, 1), std::span(&p, 1));
        else alloc.translate_swa(std::span(&t, 1), std::span(&p, 1));
        return p.value();
    }
    void write(Component c, std::int32_t id, std::uint32_t m) const {
        std::byte* r = row(c, physical(c, id));
        for (std::size_t w = 0; w < alloc.spec()[c].entry_bytes / 4; ++w) std::memcpy(r + 4 * w, &m, 4);
    }
    bool holds(Component c, std::int32_t id, std::uint32_t m) {
        const std::int32_t p = physical(c, id);
        if (p <= 0) return false;
        ++checked_rows;
        const std::byte* r = row(c, p);
        for (std::size_t w = 0; w < alloc.spec()[c].entry_bytes / 4; ++w) {
            std::uint32_t x = 0;
            std::memcpy(&x, r + 4 * w, 4);
            if (x != m) return false;
        }
        return true;
    }

    void execute(TreeActions&& actions) {
        HostActions host = exec.execute(alloc, std::move(actions));
        exec.complete(alloc, std::move(host));  // no host tier here: nothing comes back
    }

    // Every cached row (FULL, live SWA, Mamba states) reads the marker of the token it encodes; the allocator's
    // accounting is intact and its live pages are exactly the tree's.
    void check(const char* step) {
        stream.ref().synchronize();  // queued moves and fills land first
        bool ok = alloc.verify().empty() && tree.verify().empty();
        for (NodeRef n : tree.nodes()) {
            const NodeInfo info = tree.node_info(n);
            for (std::size_t i = 0; i < info.tokens.size() && !info.pages.empty(); ++i) {
                const std::int32_t pos = info.start + static_cast<std::int32_t>(i);
                const std::int32_t id = info.pages[i / page].value() * page + static_cast<std::int32_t>(i % page);
                ok = ok && holds(Component::full, id, marker(Component::full, info.tokens[i], pos));
                if (info.device[Component::swa]) ok = ok && holds(Component::swa, id, marker(Component::swa, info.tokens[i], pos));
            }
            if (info.state.is_valid()) {
                ok = ok && holds(Component::mamba, info.state.value(), marker(Component::mamba, info.tokens.back(), info.start + info.length));
            }
        }
        for (Component c : all_components) {
            ok = ok && alloc.live_pages(c) == (tree.evictable_size(c) + tree.protected_size(c)) / (c == Component::mamba ? 1 : page);
        }
        std::printf("  %-66s %s\n", step, ok ? "ok" : "FAILED");
        if (!ok) std::exit(1);
    }

    // One request: match, lock, allocate the rest, write its rows (dropping its SWA rows before `swa_evicted`),
    // insert, execute, unlock. Returns the matched tokens.
    std::int32_t serve(const std::vector<TokenId>& key, std::int32_t swa_evicted = 0) {
        MatchResult m = tree.match_prefix(TokenKey{key});
        const std::int32_t hit = m.device_length;
        std::vector<VirtualPage> pages(m.device_pages.begin(), m.device_pages.end());
        LockReceipt lock;
        if (!m.device_node.is_root()) lock = tree.lock(m.device_node);
        const auto seq = static_cast<std::int32_t>(key.size());
        const VirtualToken last = pages.empty() ? VirtualToken{} : VirtualToken{pages.back().value() * page + page - 1};
        std::vector<VirtualToken> tokens(static_cast<std::size_t>(seq - hit));
        if (!alloc.alloc_extend({.prefix_lens = std::span(&hit, 1), .seq_lens = std::span(&seq, 1), .last_locs = std::span(&last, 1)},
                                tokens)) {
            std::printf("  out of room\n");
            std::exit(1);
        }
        StateId state;
        if (!alloc.alloc_state(std::span(&state, 1))) std::exit(1);
        stream.ref().synchronize();
        for (std::size_t i = 0; i < tokens.size(); ++i) {
            const std::int32_t pos = hit + static_cast<std::int32_t>(i);
            write(Component::full, tokens[i].value(), marker(Component::full, key[static_cast<std::size_t>(pos)], pos));
            write(Component::swa, tokens[i].value(), marker(Component::swa, key[static_cast<std::size_t>(pos)], pos));
            if (pos % page == 0) pages.emplace_back(tokens[i].value() / page);
        }
        write(Component::mamba, state.value(), marker(Component::mamba, key.back(), seq));
        if (swa_evicted > hit) {  // decode moved past these rows: the request drops its own SWA copy
            alloc.free_swa(std::span(pages).subspan(static_cast<std::size_t>(hit / page),
                                                    static_cast<std::size_t>((swa_evicted - hit) / page)));
        }
        InsertResult ins = tree.insert(TokenKey{key}, {.pages = pages, .swa_evicted = swa_evicted, .state = state});
        execute(std::move(ins.actions));
        if (!lock.empty()) tree.unlock(std::move(lock));
        return hit;
    }
};

std::vector<TokenId> conversation(std::int32_t r, std::int32_t turns) {
    std::vector<TokenId> key;
    for (std::int32_t pos = 0; pos < system_tokens + turns * turn_tokens; ++pos) {
        key.push_back(pos < system_tokens ? 7 + pos : 1000 * (r + 1) + pos);
    }
    return key;
}

}  // namespace

int main() {
    Walkthrough w;
    std::printf("unikv %d.%d.%d walkthrough: tri-pool arena of %zu KiB (Mamba | SWA float | FULL), page %d tokens, "
                "window %d, %d requests over a %d-token system prompt\n",
                UNIKV_VERSION_MAJOR, UNIKV_VERSION_MINOR, UNIKV_VERSION_PATCH, w.alloc.region().size / 1024, page, window,
                requests, system_tokens);
    std::int32_t hits = w.serve(conversation(0, 0));  // the system prompt, with a Mamba checkpoint at its end
    w.check("system prompt cached with its state checkpoint");
    for (std::int32_t r = 0; r < requests; ++r) hits += w.serve(conversation(r, 1));
    w.check("first turns inserted over the reused system prompt");
    for (std::int32_t r = 0; r < requests; ++r) {
        const std::vector<TokenId> key = conversation(r, 3);
        hits += w.serve(key, static_cast<std::int32_t>(key.size()) - window - page);  // drop out-of-window SWA
    }
    w.check("second turns appended, their out-of-window SWA rows tombstoned");
    // Conversation 0 stays in use (its FULL path locked) while every unlocked SWA row is evicted.
    MatchResult in_use = w.tree.match_prefix(TokenKey{conversation(0, 3)});
    LockReceipt running = w.tree.lock(in_use.device_node);
    EvictResult swa = w.tree.evict(Component::swa, 1 << 20);
    w.execute(std::move(swa.actions));
    EvictResult mamba = w.tree.evict(Component::mamba, 1);
    w.execute(std::move(mamba.actions));
    EvictResult full = w.tree.evict(Component::full, 2 * page);
    w.execute(std::move(full.actions));
    w.check("SWA, Mamba and FULL evicted, the cascade's frees executed");
    // Its first turn again: the SWA tombstones above the lock are recovered from the request's fresh rows,
    // moved under the tree's locked FULL pages (recover_swa_locked_full -> transfer_swa).
    hits += w.serve(conversation(0, 1));
    w.tree.unlock(std::move(running));
    w.check("a re-served prefix recovered its SWA under the locked FULL pages");
    const FlushResult flushed = w.alloc.flush(FlushMode::urgent);
    const std::size_t float_moved = w.alloc.compact_holes(Side::low);
    w.check("flushed and float compacted: rows followed their virtual ids");

    const auto c = w.backend.counters();
    std::printf("tree: %zu nodes, %d tokens matched; pools live: full %d, swa %d, mamba %d pages\n", w.tree.node_count(),
                hits, w.alloc.live_pages(Component::full), w.alloc.live_pages(Component::swa),
                w.alloc.live_pages(Component::mamba));
    std::printf("actions executed: free_pages %llu, free_swa %llu, free_states %llu, recover_swa_locked_full %llu\n",
                static_cast<unsigned long long>(w.exec.executed(ActionKind::free_pages)),
                static_cast<unsigned long long>(w.exec.executed(ActionKind::free_swa)),
                static_cast<unsigned long long>(w.exec.executed(ActionKind::free_states)),
                static_cast<unsigned long long>(w.exec.executed(ActionKind::recover_swa_locked_full)));
    std::printf("moved %zu pages in the flush and %zu in the float; %zu rows checked; bytes copied %llu in %llu copies\n",
                flushed.pages_moved, float_moved, w.checked_rows, static_cast<unsigned long long>(c.bytes_copied),
                static_cast<unsigned long long>(c.copies_queued));
    return 0;
}

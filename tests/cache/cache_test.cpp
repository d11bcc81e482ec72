// The composed `Cache<Policies>`, one deep scenario an engine would run: requests allocate (extend, decode),
// write a marker into every row, finish and insert; a later request matches; eviction writes the cache back
// to host; a host hit loads back layer by layer; a decode request is retracted and restored; the cache is
// moved mid-way. Every row is read back through the cache's translation (device) or a lease (host) after each
// move, and `verify()` stays empty throughout.

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <unikv/backend/host_backend.hpp>
#include <unikv/budget/partitioned_mamba_budget.hpp>
#include <unikv/budget/partitioned_swa_budget.hpp>
#include <unikv/cache.hpp>

#include "cache/cache_support.hpp"

namespace {

using namespace cache_test;

// Write-back (`HostConfig`'s default) unless a test's configuration says otherwise.
struct Policies : DefaultCachePolicies {
    using backend = HostBackend;
    using layout = SwaFullLayout;
};
// Runs `WritePolicy::none` (`device_only`).
struct DeviceOnlyPolicies : Policies {
    using host_pools = NoHostTier;
};

constexpr HostWrites no_writes{.policy = WritePolicy::none};

constexpr std::int32_t layers = 2;
constexpr std::size_t layer_bytes = 32;  // K and V rows of 16 bytes

CacheConfig cache_config() {
    const AttentionShape shape{.layers = layers, .kv_heads = 1, .head_dim = 8, .dtype_bytes = 2};
    return CacheConfig{.arena = {.model = {.full = shape, .swa = shape, .swa_window_tokens = window},
                                 .page_sizes = {.full = {page_size}, .swa = {page_size}},
                                 .arena_bytes = 64 * page_size * layers * layer_bytes},
                       .host = {.pages = {.values = {24, 24, 0}}}};
}

// `config` with the host tier's write policy `writes`.
CacheConfig with_writes(CacheConfig config, const HostWrites& writes) {
    config.host.write = writes;
    return config;
}

std::vector<TokenId> tokens(TokenId first, std::int32_t n) {
    std::vector<TokenId> out;
    for (std::int32_t i = 0; i < n; ++i) out.push_back(first + i);
    return out;
}

// A request as an engine holds it: the tokens it will have and the virtual token of each row it has so far.
struct Request {
    std::vector<TokenId> tokens;
    std::vector<VirtualToken> rows{};
    std::int32_t prefix = 0;  // rows [0, prefix) are the tree's (matched), the rest the request's own

    [[nodiscard]] std::int32_t length() const { return static_cast<std::int32_t>(rows.size()); }
    [[nodiscard]] TokenKey key(std::int32_t n) const {
        return TokenKey{std::span(tokens).first(static_cast<std::size_t>(n))};
    }
    // The virtual pages of rows [from, to), both page aligned (`to` may end a partial page).
    [[nodiscard]] std::vector<VirtualPage> pages(std::int32_t from, std::int32_t to) const {
        std::vector<VirtualPage> out;
        for (std::int32_t pos = from; pos < to; pos += page_size) {
            out.push_back(page_of(rows[static_cast<std::size_t>(pos)], {page_size}));
        }
        return out;
    }
};

template <class P>
struct Engine {
    using TestCache = Cache<P>;
    HostBackend backend{{.mode = ExecutionMode::manual}};
    HostBackend::Stream stream = backend.make_stream();
    std::optional<TestCache> first, second;
    TestCache* cache = nullptr;

    explicit Engine(const CacheConfig& config = cache_config()) { cache = &first.emplace(backend, config, stream); }
    // Moves the cache into a new object; every later call goes to the moved-to one.
    void move_cache() {
        second.emplace(std::move(*first));
        first.reset();
        cache = &*second;
    }

    [[nodiscard]] std::string broken() const { return test_verify::broken(*cache); }
    [[nodiscard]] std::byte* row(Component c, VirtualToken v) const {
        PhysicalToken p;
        if (c == Component::full) cache->translate_full(std::span(&v, 1), std::span(&p, 1));
        if (c == Component::swa) cache->translate_swa(std::span(&v, 1), std::span(&p, 1));
        if (p.value() <= 0) return nullptr;  // the sink: unmapped
        return cache->allocator().region().data + static_cast<std::size_t>(p.value()) * layers * layer_bytes;
    }
    void write(const Request& r, std::int32_t from, std::int32_t to) {
        REQUIRE(drain(backend, stream));  // moves the allocation queued run before the rows are written
        for (std::int32_t pos = from; pos < to; ++pos) {
            for (Component c : {Component::full, Component::swa}) {
                std::byte* p = row(c, r.rows[static_cast<std::size_t>(pos)]);
                REQUIRE(p != nullptr);
                test_rows::fill_row(p, layers * layer_bytes, marker(c, r.tokens[static_cast<std::size_t>(pos)], pos));
            }
        }
    }
    // Rows [from, to) of `c` hold their markers; `layer` narrows the check to one layer's bytes.
    [[nodiscard]] bool holds(const Request& r, Component c, std::int32_t from, std::int32_t to, int layer = -1) const {
        for (std::int32_t pos = from; pos < to; ++pos) {
            const std::byte* p = row(c, r.rows[static_cast<std::size_t>(pos)]);
            if (p == nullptr) return false;
            const std::size_t offset = layer < 0 ? 0 : static_cast<std::size_t>(layer) * layer_bytes;
            const std::size_t bytes = layer < 0 ? layers * layer_bytes : layer_bytes;
            if (test_rows::uniform_word(p + offset, bytes) != marker(c, r.tokens[static_cast<std::size_t>(pos)], pos)) {
                return false;
            }
        }
        return true;
    }
    // Host pages `host` of `c` hold the markers of `r`'s positions from `first_pos`, a page each (up to the
    // request's length: a partial last page holds nothing after it).
    [[nodiscard]] bool host_holds(const Request& r, Component c, std::span<const HostPage> host,
                                  std::int32_t first_pos) {
        if (host.empty()) return false;
        auto lease = cache->host_pools().lease();
        for (std::size_t k = 0; k < host.size(); ++k) {
            std::int32_t physical = -1;
            lease.physical(c, host.subspan(k, 1), std::span(&physical, 1));
            const std::byte* page = lease.region(c).data + static_cast<std::size_t>(physical) * lease.page_bytes(c);
            for (std::int32_t i = 0; i < page_size; ++i) {
                const std::int32_t pos = first_pos + static_cast<std::int32_t>(k) * page_size + i;
                if (pos >= r.length()) break;
                const std::byte* entry = page + static_cast<std::size_t>(i) * layers * layer_bytes;
                if (test_rows::uniform_word(entry, layers * layer_bytes) !=
                    marker(c, r.tokens[static_cast<std::size_t>(pos)], pos)) {
                    return false;
                }
            }
        }
        return true;
    }

    // Prefill: rows up to `to` (after the matched or restored ones), marked.
    void extend(Request& r, std::int32_t to) {
        const std::int32_t from = r.length();
        const std::int32_t prefix_lens[] = {from};
        const std::int32_t seq_lens[] = {to};
        const VirtualToken last_locs[] = {from > 0 ? r.rows.back() : VirtualToken{}};
        std::vector<VirtualToken> out(static_cast<std::size_t>(to - from));
        REQUIRE(cache->alloc_extend({.prefix_lens = prefix_lens, .seq_lens = seq_lens, .last_locs = last_locs}, out));
        r.rows.insert(r.rows.end(), out.begin(), out.end());
        write(r, from, to);
    }
    // `n` decode steps, one row each, marked.
    void decode(Request& r, std::int32_t n) {
        for (std::int32_t i = 0; i < n; ++i) {
            const std::int32_t seq_lens[] = {r.length() + 1};
            const VirtualToken last_locs[] = {r.rows.back()};
            VirtualToken out;
            REQUIRE(cache->alloc_decode({.seq_lens = seq_lens, .last_locs = last_locs}, std::span(&out, 1)));
            r.rows.push_back(out);
            write(r, r.length() - 1, r.length());
        }
    }
    // The request starts from the device part of its match: the tree's rows, locked.
    LockReceipt start(Request& r, const MatchResult& m) {
        r.rows.clear();
        for (VirtualPage p : m.device_pages) {
            for (std::int32_t i = 0; i < page_size; ++i) r.rows.push_back(token_of(p, {page_size}, i));
        }
        r.prefix = m.device_length;
        return cache->lock(m.device_node);
    }
    // Finish: the whole pages go to the tree, the partial tail page is freed, the prefix lock dropped.
    NodeRef finish(Request& r, LockReceipt&& lock) {
        const std::int32_t whole = r.length() / page_size * page_size;
        const std::vector<VirtualPage> pages = r.pages(0, whole);
        const CacheInsert ins = cache->insert(r.key(whole), {.pages = pages});
        if (whole < r.length()) {
            const std::vector<VirtualPage> tail = r.pages(whole, r.length());
            cache->free(tail);
        }
        cache->unlock(std::move(lock));
        return ins.node;
    }
    // Runs the transfer stream, one operation at a time, and the allocator's where the transfers wait on it;
    // `each()` after every transfer operation.
    template <class Each>
    void run_transfers(Each&& each) {
        while (backend.queued(cache->controller().stream()) > 0) {
            if (backend.run_next(cache->controller().stream())) {
                each();
            } else if (!backend.run_next(stream)) {
                break;
            }
        }
    }
};

}  // namespace

TEST_CASE("a cache serves requests through write-back, per-layer load-back, retraction and a move, row-exact") {
    Engine<Policies> e;
    const auto healthy = [&] { return e.broken(); };
    CHECK(e.cache->layers() == layers);  // known before the first load (the controller learns it there)
    CHECK(e.cache->controller().layers() == 0);

    // A: prefill 10 rows, decode 4, finish: tokens [0, 12) go to the tree, the tail page (12, 13) is freed.
    Request a{.tokens = tokens(100, 14)};
    LockReceipt a_lock = e.start(a, e.cache->match(a.key(14)));
    CHECK(a.prefix == 0);
    e.extend(a, 10);
    e.decode(a, 4);
    CHECK(e.holds(a, Component::full, 0, 14));
    CHECK(e.holds(a, Component::swa, 0, 14));
    const NodeRef a_node = e.finish(a, std::move(a_lock));
    CHECK(e.holds(a, Component::full, 0, 12));
    CHECK(healthy() == "");

    // B shares A's 12 tokens: a device hit, then its own 8 rows after them.
    Request b{.tokens = a.tokens};
    b.tokens.resize(12);
    for (TokenId t : tokens(500, 14)) b.tokens.push_back(t);
    {
        const MatchResult m = e.cache->match(b.key(20));
        CHECK(m.device_length == 12);
        CHECK(m.device_node == a_node);
        LockReceipt b_lock = e.start(b, m);
        e.extend(b, 20);
        CHECK(e.holds(b, Component::full, 0, 20));  // the shared rows are A's, read through B's row ids
        (void)e.finish(b, std::move(b_lock));
    }
    CHECK(healthy() == "");

    // Write-back: everything unlocked is evicted; the backups are copied before the rows go.
    const Eviction ev = e.cache->evict({Component::full, 1 << 20});
    CHECK(ev.backed_up >= 2);
    CHECK(ev.dropped == 0);
    CHECK(e.cache->allocator().live_pages(Component::full) == 0);
    CHECK(e.cache->match(b.key(20)).device_length == 0);
    {
        const NodeInfo info = e.cache->tree().node_info(a_node);
        CHECK_FALSE(info.device[Component::full]);
        CHECK(e.host_holds(a, Component::full, info.host[Component::full], info.start));
    }
    CHECK(healthy() == "");
    // Nothing is live on the device: poison every byte above the sink, so only a copy can bring a row back.
    {
        const std::size_t sink = e.cache->allocator().spec().sink_floor_bytes;
        std::memset(e.cache->allocator().region().data + sink, 0x5a, e.cache->allocator().region().size - sink);
    }

    // B comes back (26 tokens in all): a host hit of 20 tokens, loaded back layer by layer. The compute stream
    // waits each layer's event (a stream wait, no host block), so its layer-0 work runs as soon as layer 0 has
    // landed, while layer 1 is still on its way: the arena is captured at that moment.
    const MatchResult hit = e.cache->match(b.key(26));
    CHECK(hit.device_length == 0);
    CHECK(hit.best_length == 20);
    const LoadBackStart load = e.cache->load_back(hit.best_node);
    REQUIRE(load);
    CHECK(e.cache->start_loading() == 1);
    HostBackend::Stream compute = e.backend.make_stream();
    HostBackend::PinnedBuffer scratch = e.backend.allocate_pinned(layers * 64);
    const BackendCounters before = e.backend.counters();
    for (std::int32_t layer = 0; layer < layers; ++layer) {
        e.cache->wait_layer(compute, layer);
        e.backend.fill_pages_async(scratch.region(), std::span(&layer, 1), 64, std::byte{1}, compute);
    }
    CHECK(e.backend.counters().stream_waits == before.stream_waits + layers);
    CHECK(e.backend.counters().host_synchronizations == before.host_synchronizations);
    std::int32_t computed = 0;
    std::vector<std::byte> at_layer0;
    e.run_transfers([&] {
        while (e.backend.run_next(compute)) {
            if (++computed == 2) {  // layer 0's wait, then its work
                const auto arena = e.cache->allocator().region();
                at_layer0.assign(arena.data, arena.data + arena.size);
            }
        }
    });
    CHECK(computed == 2 * layers);
    const std::span<const LoadDone> done = e.cache->loading_check();
    REQUIRE(done.size() == 1);
    CHECK(done[0].id == load.id);
    CHECK(done[0].committed);
    CHECK(healthy() == "");
    // In the capture, the loaded FULL rows held layer 0 and not yet layer 1.
    {
        Request loaded{.tokens = b.tokens};
        LockReceipt lock = e.start(loaded, e.cache->match(b.key(20)));
        REQUIRE(loaded.length() == 20);
        REQUIRE(at_layer0.size() == e.cache->allocator().region().size);
        std::int32_t layer0 = 0, layer1 = 0;
        for (std::int32_t pos = 0; pos < 20; ++pos) {
            const std::byte* r = e.row(Component::full, loaded.rows[static_cast<std::size_t>(pos)]);
            const auto at = static_cast<std::size_t>(r - e.cache->allocator().region().data);
            const std::uint32_t want = marker(Component::full, b.tokens[static_cast<std::size_t>(pos)], pos);
            layer0 += test_rows::uniform_word(at_layer0.data() + at, layer_bytes) == want;
            layer1 += test_rows::uniform_word(at_layer0.data() + at + layer_bytes, layer_bytes) == want;
        }
        CHECK(layer0 == 20);
        CHECK(layer1 == 0);
        e.cache->unlock(std::move(lock));
    }

    // B runs again from its device hit: 20 rows loaded back, then its own up to 22, and decodes to 26.
    const MatchResult again = e.cache->match(b.key(26));
    CHECK(again.device_length == 20);
    LockReceipt b_lock = e.start(b, again);
    CHECK(e.holds(b, Component::full, 0, 20));
    CHECK(e.holds(b, Component::swa, 20 - window, 20));  // the window before the boundary is loaded too
    e.extend(b, 22);
    e.decode(b, 4);
    CHECK(e.holds(b, Component::full, 0, 26));

    // The cache moves mid-run: the rows and the lock stay good through the moved-to object.
    e.move_cache();
    CHECK(e.holds(b, Component::full, 0, 26));
    CHECK(e.holds(b, Component::swa, 26 - window, 26));
    CHECK(healthy() == "");

    // Preemption: B's own rows [20, 26) and its window [18, 26) go to host; B frees them and its lock.
    const std::int32_t host_before = e.cache->host_pools().used(Component::full);
    const std::vector<VirtualPage> own = b.pages(20, 26);
    RetractionBackup backup = e.cache->backup({.own = own, .prefix_tokens = 20, .seq_len = 26});
    REQUIRE(backup);
    CHECK(backup.full_pages() == 2);
    CHECK(e.host_holds(b, Component::full, backup.host(Component::full), 20));
    CHECK(e.host_holds(b, Component::swa, backup.host(Component::swa), 20 + backup.window_first() * page_size));
    e.cache->free(own);
    e.cache->unlock(std::move(b_lock));
    CHECK(healthy() == "");

    // Another request takes the freed rows and scribbles its own markers over them.
    Request c{.tokens = tokens(900, 8)};
    LockReceipt c_lock = e.start(c, e.cache->match(c.key(8)));
    e.extend(c, 8);

    // Restore: B re-matches its prefix, allocates fresh own rows and gets its rows back, byte-exact.
    const MatchResult resumed = e.cache->match(b.key(26));
    CHECK(resumed.device_length == 20);
    b_lock = e.start(b, resumed);
    {
        const std::int32_t prefix_lens[] = {20};
        const std::int32_t seq_lens[] = {26};
        const VirtualToken last_locs[] = {b.rows.back()};
        std::vector<VirtualToken> out(6);
        REQUIRE(e.cache->alloc_extend({.prefix_lens = prefix_lens, .seq_lens = seq_lens, .last_locs = last_locs}, out));
        b.rows.insert(b.rows.end(), out.begin(), out.end());
    }
    REQUIRE(drain(e.backend, e.stream));
    for (std::int32_t pos = 20; pos < 26; ++pos) {  // whatever the fresh rows held, it is not B's
        for (Component comp : {Component::full, Component::swa}) {
            test_rows::fill_row(e.row(comp, b.rows[static_cast<std::size_t>(pos)]), layers * layer_bytes, 0xdeadbeefu);
        }
    }
    CHECK_FALSE(e.holds(b, Component::full, 20, 21));
    const std::vector<VirtualPage> fresh = b.pages(20, 26);
    REQUIRE(e.cache->restore(backup, {.own = fresh, .prefix_tokens = 20, .seq_len = 26}));
    CHECK_FALSE(backup);
    CHECK(e.holds(b, Component::full, 0, 26));
    CHECK(e.holds(b, Component::swa, 26 - window, 26));
    CHECK(e.holds(c, Component::full, 0, 8));
    CHECK(e.cache->host_pools().used(Component::full) == host_before);
    CHECK(healthy() == "");

    // Both finish; B's 24 tokens are served from the device, with A's rows under them.
    (void)e.finish(c, std::move(c_lock));
    (void)e.finish(b, std::move(b_lock));
    const MatchResult last = e.cache->match(b.key(26));
    CHECK(last.device_length == 24);
    Request served{.tokens = b.tokens};
    LockReceipt served_lock = e.start(served, last);
    CHECK(e.holds(served, Component::full, 0, 24));
    CHECK(e.holds(served, Component::swa, 24 - window, 24));
    e.cache->unlock(std::move(served_lock));
    CHECK(healthy() == "");
}

TEST_CASE("a backup under write-through first settles the writes in flight, and writing_check reports them") {
    Engine<Policies> e(with_writes(cache_config(), {.policy = WritePolicy::through}));
    Request a{.tokens = tokens(100, 12)};
    LockReceipt a_lock = e.start(a, e.cache->match(a.key(12)));
    e.extend(a, 12);
    const NodeRef a_node = e.finish(a, std::move(a_lock));
    const std::size_t writes = e.cache->writes_in_flight();
    CHECK(writes == 2);  // FULL and SWA of the inserted node, queued, not submitted

    Request b{.tokens = tokens(700, 10)};
    LockReceipt b_lock = e.start(b, e.cache->match(b.key(10)));
    e.extend(b, 8);
    e.decode(b, 2);
    const std::vector<VirtualPage> own = b.pages(0, 10);
    RetractionBackup backup = e.cache->backup({.own = own, .prefix_tokens = 0, .seq_len = 10});
    REQUIRE(backup);
    CHECK(e.cache->writes_in_flight() == 0);
    const NodeInfo info = e.cache->tree().node_info(a_node);
    CHECK(e.host_holds(a, Component::full, info.host[Component::full], 0));
    const std::size_t swa_from = info.pages.size() - info.host[Component::swa].size();  // the window's pages
    CHECK(e.host_holds(a, Component::swa, info.host[Component::swa], static_cast<std::int32_t>(swa_from) * page_size));
    CHECK(e.host_holds(b, Component::full, backup.host(Component::full), 0));
    const std::span<const WriteDone> acks = e.cache->writing_check();
    CHECK(acks.size() == writes);
    for (const WriteDone& w : acks) CHECK(w.committed);
    CHECK(e.cache->writing_check().empty());
    e.cache->discard(backup);
    e.cache->free(own);
    e.cache->unlock(std::move(b_lock));
    CHECK(e.broken() == "");
}

// The one relief path: an allocation that falls short under write-back evicts host data first when the host is
// full, so the device data it evicts is backed up, not dropped (before the relief paths were one, the allocation's
// relief dropped it while the budget's backed it up).
TEST_CASE("an allocation relieved under write-back with a full host backs up what it evicts, row-exact") {
    Engine<Policies> e;
    constexpr std::int32_t prompt = 6 * page_size;
    const auto cached = [&](TokenId first) {
        Request r{.tokens = tokens(first, prompt)};
        LockReceipt lock = e.start(r, e.cache->match(r.key(prompt)));
        e.extend(r, prompt);
        const NodeRef node = e.finish(r, std::move(lock));
        return std::pair{r, node};
    };
    // Four prefixes, evicted to the host: its FULL pages are all taken by host-only data.
    std::vector<std::pair<Request, NodeRef>> old;
    for (TokenId first = 1000; first <= 4000; first += 1000) old.push_back(cached(first));
    const Eviction to_host = e.cache->evict({Component::full, 1 << 20});
    CHECK(to_host.backed_up >= 4);
    CHECK(to_host.dropped == 0);
    REQUIRE(e.cache->host_pools().available(Component::full) == 0);
    // B is cached on the device only; then C needs more of the arena than is free without B's pages.
    auto [b, b_node] = cached(5000);
    REQUIRE(e.cache->tree().node_info(b_node).host[Component::full].empty());
    // B holds 6 FULL and 6 SWA pages: C takes 5 (FULL, SWA) pages more than are free, more than B's SWA pages
    // alone give back, so B's FULL pages must go too.
    const std::int64_t composite_free = e.cache->allocator().available_size();
    const auto c_length = static_cast<std::int32_t>(composite_free + 5) * page_size;
    Request c{.tokens = tokens(9000, c_length)};
    LockReceipt c_lock = e.start(c, e.cache->match(c.key(c_length)));
    e.extend(c, c_length);  // relieved: B is evicted, after host room was made for its backup
    CHECK(e.holds(c, Component::full, 0, c_length));
    CHECK(e.holds(c, Component::swa, 0, c_length));
    CHECK(e.cache->tree().contains(b_node));  // backed up, not dropped
    if (e.cache->tree().contains(b_node)) {
        const NodeInfo b_info = e.cache->tree().node_info(b_node);
        CHECK_FALSE(b_info.device[Component::full]);
        CHECK(e.host_holds(b, Component::full, b_info.host[Component::full], b_info.start));
    }
    CHECK_FALSE(e.cache->tree().contains(old[0].second));  // the least recently used host copy made the room
    CHECK(e.cache->tree().contains(old[3].second));
    CHECK(e.broken() == "");

    // C is done; B comes back from its backup and reads its markers through translation.
    e.cache->free(c.pages(0, c.length()));
    e.cache->unlock(std::move(c_lock));
    const MatchResult hit = e.cache->match(b.key(prompt));
    REQUIRE(hit.best_length == prompt);
    REQUIRE(e.cache->load_back(hit.best_node));
    CHECK(e.cache->start_loading() == 1);
    e.run_transfers([] {});
    const std::span<const LoadDone> done = e.cache->loading_check();
    REQUIRE(done.size() == 1);
    CHECK(done[0].committed);
    Request again{.tokens = b.tokens};
    LockReceipt lock = e.start(again, e.cache->match(again.key(prompt)));
    REQUIRE(again.length() == prompt);
    CHECK(e.holds(again, Component::full, 0, prompt));
    CHECK(e.holds(again, Component::swa, prompt - window, prompt));
    e.cache->unlock(std::move(lock));
    CHECK(e.broken() == "");
}

TEST_CASE("a device-only cache refuses host memory and drops what it evicts") {
    CacheConfig config = cache_config();
    config.host = {.write = no_writes};
    Engine<DeviceOnlyPolicies> e(config);
    CHECK_THROWS_AS(Cache<DeviceOnlyPolicies>(e.backend, with_writes(cache_config(), no_writes), e.stream),
                    logic_error);
    Request a{.tokens = tokens(100, 12)};
    LockReceipt lock = e.start(a, e.cache->match(a.key(12)));
    e.extend(a, 12);
    (void)e.finish(a, std::move(lock));
    CHECK(e.cache->match(a.key(12)).device_length == 12);
    CHECK(e.holds(a, Component::full, 0, 12));
    const Eviction ev = e.cache->evict({Component::full, 1 << 20});
    CHECK(ev.pages_freed[Component::full] == 3);
    CHECK(ev.backed_up == 0);
    CHECK(e.cache->match(a.key(12)).best_length == 0);  // no host copy to hit
    CHECK(e.broken() == "");
}

TEST_CASE("misuse throws naming it and changes nothing: the tree's pages freed, double frees, foreign or spent receipts") {
    Engine<Policies> e;
    // A caches 12 rows (three pages); B matches them and extends by two pages of its own.
    Request a{.tokens = tokens(100, 12)};
    LockReceipt a_lock = e.start(a, e.cache->match(a.key(12)));
    e.extend(a, 12);
    (void)e.finish(a, std::move(a_lock));
    Request b{.tokens = a.tokens};
    for (TokenId t : tokens(700, 8)) b.tokens.push_back(t);
    LockReceipt b_lock = e.start(b, e.cache->match(b.key(20)));
    REQUIRE(b.prefix == 12);
    e.extend(b, 20);
    const std::vector<VirtualPage> prefix = b.pages(0, 12);
    const std::vector<VirtualPage> own = b.pages(12, 20);
    const auto held = [&](VirtualPage p) {
        return doctest::Contains(("virtual page " + std::to_string(p.value()) + " is held by the tree").c_str());
    };
    const auto unchanged = [&] {
        CHECK(e.broken() == "");
        CHECK(e.cache->allocator().live_pages(Component::full) == 5);
        CHECK(e.cache->allocator().live_pages(Component::swa) == 5);
        CHECK(e.holds(b, Component::full, 0, 20));
        CHECK(e.holds(b, Component::swa, 0, 20));
    };
    unchanged();
    // Each free path refuses a page of the cached prefix: freeing it would let another request take the page
    // under the node, and tombstoning its SWA rows (sliding the window over the prefix) would serve the sink.
    CHECK_THROWS_WITH_AS(e.cache->free(std::span(prefix).first(1)), held(prefix[0]), logic_error);
    CHECK_THROWS_WITH_AS(e.cache->free_swa(std::span(prefix).last(1)), held(prefix[2]), logic_error);
    CHECK_THROWS_WITH_AS(e.cache->allocator().free_full(std::span(prefix).subspan(1, 1)), held(prefix[1]),
                         logic_error);
    // A list with the request's own page first and a held page after it frees neither.
    const VirtualPage mixed[] = {own[1], prefix[2]};
    CHECK_THROWS_WITH_AS(e.cache->free(mixed), held(prefix[2]), logic_error);
    unchanged();
    // A page freed twice: the second free throws naming it.
    std::vector<VirtualPage> spare(1);
    REQUIRE(e.cache->allocator().alloc(spare));
    e.cache->free(spare);
    const std::string twice = "unikv: free: virtual page " + std::to_string(spare[0].value()) + " is not allocated";
    CHECK_THROWS_WITH_AS(e.cache->free(spare), twice.c_str(), logic_error);
    unchanged();
    // B finishes as usual; a fresh request then reads every row of the shared prefix and of B's pages.
    (void)e.finish(b, std::move(b_lock));
    CHECK(e.broken() == "");
    Request c{.tokens = b.tokens};
    LockReceipt c_lock = e.start(c, e.cache->match(c.key(20)));
    CHECK(c.prefix == 20);
    CHECK(e.holds(c, Component::full, 0, 20));
    CHECK(e.holds(c, Component::swa, 0, 20));
    // A receipt of another cache's tree, and one unlocked twice, throw: the locks stay as they are.
    Engine<Policies> other;
    Request d{.tokens = tokens(100, 4)};
    LockReceipt foreign = other.start(d, other.cache->match(d.key(4)));
    CHECK_THROWS_WITH_AS(e.cache->unlock(std::move(foreign)), doctest::Contains("belongs to another tree"),
                         logic_error);
    other.cache->unlock(std::move(foreign));
    LockReceipt moved = std::move(c_lock);
    e.cache->unlock(std::move(moved));
    CHECK_THROWS_WITH_AS(e.cache->unlock(std::move(moved)), doctest::Contains("the receipt is empty"), logic_error);
    CHECK(e.cache->tree().protected_size(Component::full) == 0);
    CHECK(e.broken() == "");
}

TEST_CASE("prefix_rows, alloc_rows and finish carry admitted requests from their prefix to the tree, row-exact") {
    Engine<Policies> e;
    e.cache->begin_step({});

    // A misses: all 14 rows are its own; finish gives tokens [0, 12) to the tree and frees the tail page.
    Request a{.tokens = tokens(100, 14)};
    Admission admit_a = e.cache->try_admit({.prompt = {a.tokens}, .max_new_tokens = 4});
    REQUIRE(admit_a);
    REQUIRE(admit_a.prefix_length == 0);
    a.rows.resize(14);
    e.cache->prefix_rows(admit_a.node, a.rows);
    REQUIRE(e.cache->alloc_rows(a.rows, 0));
    e.write(a, 0, 14);
    const CacheInsert fin_a = e.cache->finish(a.key(14), a.rows, std::move(admit_a.lock));
    CHECK(fin_a.prefix_length == 0);
    CHECK(e.cache->allocator().live_pages(Component::full) == 3);  // the tail page (12, 13) went back
    CHECK(e.cache->match(a.key(14)).device_length == 12);
    CHECK(e.holds(a, Component::full, 0, 12));
    CHECK(e.broken() == "");

    // B shares A's 12 tokens: prefix_rows gives A's very rows, alloc_rows its own 8 after them.
    Request b{.tokens = a.tokens};
    b.tokens.resize(12);
    for (TokenId t : tokens(500, 8)) b.tokens.push_back(t);
    Admission admit_b = e.cache->try_admit({.prompt = {b.tokens}, .max_new_tokens = 4});
    REQUIRE(admit_b);
    REQUIRE(admit_b.prefix_length == 12);
    CHECK(e.cache->tree().node_info(fin_a.node).device_locks[Component::full] == 1);  // B's lock
    b.rows.resize(20);
    CHECK_THROWS_AS(e.cache->prefix_rows(admit_b.node, std::span(b.rows).first(11)), logic_error);
    CHECK(std::all_of(b.rows.begin(), b.rows.end(), [](VirtualToken t) { return t == VirtualToken{}; }));
    e.cache->prefix_rows(admit_b.node, b.rows);
    CHECK(std::equal(b.rows.begin(), b.rows.begin() + 12, a.rows.begin()));
    CHECK(e.holds(b, Component::full, 0, 12));  // A's markers, read through B's rows
    CHECK_THROWS_AS((void)e.cache->alloc_rows(b.rows, 21), logic_error);
    REQUIRE(e.cache->alloc_rows(b.rows, 12));
    CHECK(e.cache->alloc_rows(b.rows, 20));  // nothing left to allocate
    e.write(b, 12, 20);
    CHECK(e.holds(a, Component::full, 0, 12));  // B's rows went elsewhere
    CHECK_THROWS_AS((void)e.cache->finish(b.key(19), b.rows, std::move(admit_b.lock)), logic_error);
    CHECK_FALSE(admit_b.lock.empty());  // still B's after the refusal
    const CacheInsert fin_b = e.cache->finish(b.key(20), b.rows, std::move(admit_b.lock));
    CHECK(fin_b.prefix_length == 12);
    CHECK(e.cache->tree().node_info(fin_a.node).device_locks[Component::full] == 0);
    CHECK(e.cache->allocator().live_pages(Component::full) == 5);  // whole pages: nothing freed
    Request served{.tokens = b.tokens};
    LockReceipt served_lock = e.start(served, e.cache->match(b.key(20)));
    CHECK(served.rows == b.rows);
    CHECK(e.holds(served, Component::full, 0, 20));
    CHECK(e.holds(served, Component::swa, 0, 20));
    e.cache->unlock(std::move(served_lock));
    CHECK(e.broken() == "");

    // C drops the SWA rows that slid out of its window; finish hands the tree its cursor, so the tree keeps
    // FULL for all 16 tokens and SWA only from the cursor on.
    Request c{.tokens = tokens(900, 18)};
    Admission admit_c = e.cache->try_admit({.prompt = {c.tokens}, .max_new_tokens = 0});
    REQUIRE(admit_c);
    c.rows.resize(18);
    REQUIRE(e.cache->alloc_rows(c.rows, 0));
    e.write(c, 0, 18);
    const std::vector<VirtualPage> slid = c.pages(0, 8);
    e.cache->free_swa(slid);
    const CacheInsert fin_c = e.cache->finish(c.key(18), c.rows, std::move(admit_c.lock), {.swa_evicted = 8});
    CHECK(e.cache->allocator().live_pages(Component::full) == 9);
    const MatchResult m = e.cache->match(c.key(16));
    CHECK(m.device_length == 16);  // the last window [8, 16) is live
    CHECK(e.holds(c, Component::full, 0, 16));
    CHECK(e.holds(c, Component::swa, 8, 16));
    const NodeInfo live = e.cache->tree().node_info(fin_c.node);  // the insert split C at its cursor
    CHECK(live.start == 8);
    CHECK(live.device[Component::swa]);
    CHECK_FALSE(e.cache->tree().node_info(live.parent).device[Component::swa]);
    CHECK(e.broken() == "");
}

namespace cache_finish_test {

struct MambaPolicies : DefaultCachePolicies {
    using backend = HostBackend;
    using layout = MambaFullLayout;
    using host_pools = NoHostTier;  // with `WritePolicy::none`
};

}  // namespace cache_finish_test

// The write policy and the host mode are runtime values: what the compile-time rules refused, the constructor
// refuses, before anything is built, each with a message naming the fix.
TEST_CASE("the constructor refuses a write policy or host mode the bundle cannot run, naming the fix") {
    using MambaCache = Cache<cache_finish_test::MambaPolicies>;
    HostBackend backend{{.mode = ExecutionMode::manual}};
    HostBackend::Stream stream = backend.make_stream();
    const auto refused = [&]<class P>(std::type_identity<P>, const CacheConfig& c) { Cache<P> cache(backend, c, stream); };
    const auto host = [](const HostWrites& writes, HostMode mode = HostMode::cache) {
        CacheConfig c = cache_config();
        c.host.write = writes;
        c.host.mode = mode;
        return c;
    };
    const auto device_only = [](const HostWrites& writes, HostMode mode = HostMode::cache) {
        return CacheConfig{.arena = config(64), .host = {.write = writes, .mode = mode}};
    };
    const std::type_identity<Policies> with_host;
    const std::type_identity<DeviceOnlyPolicies> without_host;
    const std::type_identity<cache_finish_test::MambaPolicies> mamba;

    // A selective write-through backs a node up on its threshold-th hit: threshold 0 means never.
    CHECK_THROWS_WITH_AS(refused(with_host, host({.policy = WritePolicy::selective, .threshold = 0})),
                         doctest::Contains("WritePolicy::selective backs a node up on its threshold-th hit, so it "
                                           "needs threshold >= 1, not 0; give threshold 1"),
                         logic_error);
    // A value outside the enums (a cast from a bad configuration file).
    CHECK_THROWS_WITH_AS(refused(with_host, host({.policy = static_cast<WritePolicy>(7)})),
                         doctest::Contains("HostWrites::policy is 7, not a WritePolicy; use WritePolicy::through"),
                         logic_error);
    CHECK_THROWS_WITH_AS(refused(with_host, host({}, static_cast<HostMode>(9))),
                         doctest::Contains("HostConfig::mode is 9, not a HostMode; use HostMode::cache"), logic_error);
    // A policy that copies to the host needs a host tier: every one but `none` under NoHostTier.
    for (const WritePolicy p : {WritePolicy::back, WritePolicy::through, WritePolicy::selective}) {
        const std::string message = std::string("the write policy is ") + write_policy_name(p) +
                                    ", which copies device data to the host tier, but host_pools is NoHostTier; "
                                    "give HostConfig::write = {.policy = WritePolicy::none}";
        INFO("write policy ", write_policy_name(p));
        CHECK_THROWS_WITH_AS(refused(without_host, device_only({.policy = p})), doctest::Contains(message.c_str()),
                             logic_error);
    }
    // Buffer-only host mode stages FULL and SWA pages for a storage tier: no Mamba pool (checked first), and a
    // storage tier (every bundle has NoStorage today).
    CHECK_THROWS_WITH_AS(refused(mamba, device_only(no_writes, HostMode::buffer_only)),
                         doctest::Contains("HostMode::buffer_only stages FULL and SWA pages for the storage tier, but "
                                           "the layout has a Mamba pool"),
                         logic_error);
    CHECK_THROWS_WITH_AS(refused(with_host, host({}, HostMode::buffer_only)),
                         doctest::Contains("HostMode::buffer_only stages host copies for a storage tier, but the "
                                           "bundle's storage is NoStorage"),
                         logic_error);

    // What is allowed: `none` over a host tier (it then serves retraction only), and each policy's threshold.
    const std::pair<HostWrites, std::uint32_t> thresholds[] = {
        {no_writes, 0},
        {{.policy = WritePolicy::back}, 0},
        {{.policy = WritePolicy::through}, 1},
        {{.policy = WritePolicy::selective, .threshold = 3}, 3},
    };
    for (const auto& [writes, threshold] : thresholds) {
        const Cache<Policies> cache(backend, host(writes), stream);
        CHECK(cache.writes().policy == writes.policy);
        CHECK(cache.host_mode() == HostMode::cache);
        CHECK(cache.tree().config().write_through_threshold == threshold);
    }
    const MambaCache device(backend, device_only(no_writes), stream);
    CHECK(device.writes().policy == WritePolicy::none);
}

TEST_CASE("finish hands a page-aligned request's Mamba state to the tree and frees one past a partial page") {
    using MambaCache = Cache<cache_finish_test::MambaPolicies>;
    HostBackend backend{{.mode = ExecutionMode::manual}};
    HostBackend::Stream stream = backend.make_stream();
    MambaCache cache(backend, {.arena = config(64), .host = {.write = no_writes}}, stream);
    const Rows<MambaCache::allocator_type> rows{&cache.allocator()};
    const std::vector<TokenId> prompt = tokens(300, 10);

    // A: 8 rows, page aligned, with its state after token 7.
    std::vector<VirtualToken> a(8);
    REQUIRE(cache.alloc_rows(a, 0));
    StateId a_state;
    REQUIRE(cache.alloc_state(std::span(&a_state, 1)));
    REQUIRE(drain(backend, stream));
    rows.write(Component::mamba, a_state.value(), marker(Component::mamba, prompt[7], 7));
    const CacheInsert fin_a = cache.finish({prompt}, a, LockReceipt{}, {.state = a_state});
    CHECK(cache.tree().node_info(fin_a.node).state == a_state);
    CHECK(cache.allocator().live_pages(Component::mamba) == 1);
    // The state is the tree's now: a request's free of it throws and changes nothing.
    CHECK_THROWS_WITH_AS(cache.free_state(std::span(&a_state, 1)),
                         doctest::Contains("is held by the tree (a cached prefix)"), logic_error);
    CHECK(cache.allocator().live_pages(Component::mamba) == 1);
    const MatchResult m = cache.match({std::span(prompt).first(8)});
    CHECK(m.device_length == 8);
    CHECK(rows.holds(Component::mamba, cache.tree().node_info(m.device_node).state.value(),
                     marker(Component::mamba, prompt[7], 7)));

    // B: 10 rows over A's 8; its state is after token 9, past the whole pages, so it is freed with the tail.
    std::vector<VirtualToken> b(10);
    LockReceipt lock = cache.lock(m.device_node);
    cache.prefix_rows(m.device_node, b);
    REQUIRE(cache.alloc_rows(b, 8));
    StateId b_state;
    REQUIRE(cache.alloc_state(std::span(&b_state, 1)));
    CHECK(cache.allocator().live_pages(Component::mamba) == 2);
    const CacheInsert fin_b = cache.finish({prompt}, b, std::move(lock), {.state = b_state});
    CHECK(fin_b.node == fin_a.node);
    CHECK(cache.allocator().live_pages(Component::mamba) == 1);
    CHECK(cache.allocator().live_pages(Component::full) == 2);
    CHECK(cache.tree().node_info(fin_a.node).device_locks[Component::full] == 0);
    CHECK(rows.holds(Component::mamba, a_state.value(), marker(Component::mamba, prompt[7], 7)));
    CHECK(cache.verify().empty());
}

namespace cache_relief_test {

// Gemma-3-like shapes: an SWA entry of 5 layers to FULL's 1, so an SWA page takes the bytes of 5 FULL pages.
CacheConfig gemma_like(std::size_t arena_bytes) {
    const AttentionShape one{.layers = 1, .kv_heads = 1, .head_dim = 8, .dtype_bytes = 2};
    AttentionShape five = one;
    five.layers = 5;
    return CacheConfig{.arena = {.model = {.full = one, .swa = five, .swa_window_tokens = window},
                                 .page_sizes = {.full = {page_size}, .swa = {page_size}},
                                 .arena_bytes = arena_bytes},
                       .host = {.write = no_writes}};
}

struct Filled {
    std::vector<TokenId> tokens;
    std::vector<VirtualToken> rows;
};

// Caches 16-token requests, their FULL rows marked and their SWA rows before `swa_kept_from(i)` dropped, until
// the next one no longer fits without eviction (the allocator's own call: no relief).
template <class C, class Kept>
std::vector<Filled> fill(C& cache, HostBackend& backend, HostBackend::stream_ref stream, Kept swa_kept_from) {
    const Rows<typename C::allocator_type> rows{&cache.allocator()};
    std::vector<Filled> out;
    for (TokenId first = 1000;; first += 100) {
        Filled f{.tokens = tokens(first, 16), .rows = std::vector<VirtualToken>(16)};
        const std::int32_t prefix_lens[] = {0};
        const std::int32_t seq_lens[] = {16};
        const VirtualToken last_locs[] = {VirtualToken{}};
        if (!cache.allocator().alloc_extend({.prefix_lens = prefix_lens, .seq_lens = seq_lens, .last_locs = last_locs},
                                            f.rows)) {
            return out;
        }
        REQUIRE(drain(backend, stream));
        for (std::int32_t pos = 0; pos < 16; ++pos) {
            const auto at = static_cast<std::size_t>(pos);
            rows.write(Component::full, f.rows[at].value(), marker(Component::full, f.tokens[at], pos));
            rows.write(Component::swa, f.rows[at].value(), marker(Component::swa, f.tokens[at], pos));
        }
        const std::int32_t kept = swa_kept_from(out.size());
        std::vector<VirtualPage> slid;
        for (std::int32_t pos = 0; pos < kept; pos += page_size) {
            slid.push_back(page_of(f.rows[static_cast<std::size_t>(pos)], {page_size}));
        }
        cache.free_swa(slid);
        (void)cache.finish({f.tokens}, f.rows, LockReceipt{}, {.swa_evicted = kept});
        out.push_back(std::move(f));
    }
}

// A 32-token request over a tree that `fill` left: the relief must evict until it fits. Then every cached
// prefix that survived reads back its FULL markers (and SWA ones where it kept SWA), so do the request's rows.
template <class Kept>
void relieve_and_check(Kept swa_kept_from) {
    Engine<DeviceOnlyPolicies> e(gemma_like(640 + 30 * 768));
    auto& cache = *e.cache;
    REQUIRE(cache.allocator().spec()[Component::swa].page_bytes == 5 * cache.allocator().spec()[Component::full].page_bytes);
    const std::vector<Filled> cached = fill(cache, e.backend, e.stream, swa_kept_from);
    REQUIRE(cached.size() >= 8);
    const Rows<Engine<DeviceOnlyPolicies>::TestCache::allocator_type> rows{&cache.allocator()};

    const std::vector<TokenId> big = tokens(5000, 32);
    std::vector<VirtualToken> own(32);
    const std::int32_t prefix_lens[] = {0};
    const std::int32_t seq_lens[] = {32};
    const VirtualToken last_locs[] = {VirtualToken{}};
    const AllocResult unrelieved =
        cache.allocator().alloc_extend({.prefix_lens = prefix_lens, .seq_lens = seq_lens, .last_locs = last_locs}, own);
    REQUIRE_FALSE(unrelieved);  // without eviction it does not fit: SWA is short by more than the tree's SWA
    CHECK(unrelieved.missing.component == Component::swa);
    CHECK(unrelieved.shortfall == Shortfall::room);
    CHECK(unrelieved.missing.count > 2);
    REQUIRE(cache.alloc_rows(own, 0));
    REQUIRE(drain(e.backend, e.stream));
    for (std::int32_t pos = 0; pos < 32; ++pos) {
        const auto at = static_cast<std::size_t>(pos);
        rows.write(Component::full, own[at].value(), marker(Component::full, big[at], pos));
        rows.write(Component::swa, own[at].value(), marker(Component::swa, big[at], pos));
    }
    std::size_t survivors = 0;
    for (std::size_t i = 0; i < cached.size(); ++i) {
        const Filled& f = cached[i];
        const MatchResult m = cache.match({f.tokens});
        if (m.full_length == 0) continue;  // evicted (without live SWA no prefix is a device hit: count FULL)
        ++survivors;
        REQUIRE(m.full_length == 16);
        for (std::int32_t pos = 0; pos < 16; ++pos) {
            const auto at = static_cast<std::size_t>(pos);
            CHECK(rows.holds(Component::full, f.rows[at].value(), marker(Component::full, f.tokens[at], pos)));
        }
    }
    CHECK(survivors > 0);
    CHECK(survivors < cached.size());
    for (std::int32_t pos = 0; pos < 32; ++pos) {
        const auto at = static_cast<std::size_t>(pos);
        CHECK(rows.holds(Component::full, own[at].value(), marker(Component::full, big[at], pos)));
        CHECK(rows.holds(Component::swa, own[at].value(), marker(Component::swa, big[at], pos)));
    }
    CHECK(e.broken() == "");
}

}  // namespace cache_relief_test

TEST_CASE("allocation relief with SWA pages of 5 FULL pages evicts round after round until the request fits") {
    using namespace cache_relief_test;
    SUBCASE("the first prefix keeps its SWA window: evicting it is one round, not enough") {
        relieve_and_check([](std::size_t i) { return i == 0 ? 8 : 16; });
    }
    SUBCASE("no prefix keeps SWA: the SWA shortfall's bytes come from FULL pages") {
        relieve_and_check([](std::size_t) { return 16; });
    }
}

namespace {
namespace cache_partition_test {

using namespace cache_relief_test;

struct PartitionedPolicies : DeviceOnlyPolicies {
    using budget = PartitionedSWABudget;
};

// The relief test's Gemma-like arena (180 FULL pages or 36 SWA pages of room) split 60 FULL : 24 SWA pages.
CacheConfig split_config() {
    CacheConfig c = gemma_like(640 + 30 * 768);
    c.budget = {.full_partition_pages = 60, .swa_partition_pages = 24};
    return c;
}

}  // namespace cache_partition_test
}  // namespace

// The static split over the one arena must behave as two pools: before the pools were bounded, cached FULL
// pages spread over the SWA partition's memory (only admission counted the partitions), and a request needing
// SWA was then refused with nothing to evict; the simulator dropped a quarter of a trace that way.
TEST_CASE("a static partition bounds its pool: cached FULL pages stay in theirs, and SWA admission evicts FULL") {
    using namespace cache_partition_test;
    Engine<PartitionedPolicies> e(split_config());
    auto& cache = *e.cache;
    REQUIRE(cache.allocator().page_bound(Component::full) == 60);
    REQUIRE(cache.allocator().page_bound(Component::swa) == 24);
    const std::vector<Filled> cached = fill(cache, e.backend, e.stream, [](std::size_t) { return 16; });
    CHECK(cached.size() == 15);  // 15 x 4 FULL pages: the partition, where the arena has room for 45
    CHECK(cache.allocator().live_pages(Component::full) == 60);
    CHECK(cache.allocator().live_pages(Component::swa) == 0);
    std::vector<VirtualToken> probe(4);
    const VirtualToken no_last[] = {VirtualToken{}};
    const std::int32_t zero[] = {0}, four[] = {4};
    const AllocResult past =
        cache.allocator().alloc_extend({.prefix_lens = zero, .seq_lens = four, .last_locs = no_last}, probe);
    CHECK(past.shortfall == Shortfall::partition);
    CHECK(past.missing.component == Component::full);
    CHECK(past.missing.count == 1);
    CHECK(cache.allocator().available_size(Component::full) == 0);
    CHECK(cache.allocator().available_size(Component::swa) == 24);

    // 32 tokens: 8 FULL pages (evicted from the tree's FULL), and 8 SWA pages of the untouched SWA partition.
    const std::vector<TokenId> big = tokens(5000, 32);
    cache.begin_step({});
    Admission a = cache.try_admit({.prompt = {big}, .max_new_tokens = 4});
    REQUIRE(a);
    CHECK(a.prefix_length == 0);
    std::vector<VirtualToken> own(32);
    REQUIRE(cache.alloc_rows(own, 0));
    CHECK(cache.allocator().live_pages(Component::full) == 60);
    CHECK(cache.allocator().live_pages(Component::swa) == 8);
    REQUIRE(drain(e.backend, e.stream));
    const Rows<Engine<PartitionedPolicies>::TestCache::allocator_type> rows{&cache.allocator()};
    for (std::int32_t pos = 0; pos < 32; ++pos) {
        const auto at = static_cast<std::size_t>(pos);
        rows.write(Component::full, own[at].value(), marker(Component::full, big[at], pos));
        rows.write(Component::swa, own[at].value(), marker(Component::swa, big[at], pos));
    }
    std::size_t survivors = 0;
    for (const Filled& f : cached) {
        if (cache.match({f.tokens}).full_length == 0) continue;
        ++survivors;
        for (std::int32_t pos = 0; pos < 16; ++pos) {
            const auto at = static_cast<std::size_t>(pos);
            CHECK(rows.holds(Component::full, f.rows[at].value(), marker(Component::full, f.tokens[at], pos)));
        }
    }
    CHECK(survivors == 13);  // two 4-page prefixes made the request's 8 FULL pages
    for (std::int32_t pos = 0; pos < 32; ++pos) {
        const auto at = static_cast<std::size_t>(pos);
        CHECK(rows.holds(Component::full, own[at].value(), marker(Component::full, big[at], pos)));
        CHECK(rows.holds(Component::swa, own[at].value(), marker(Component::swa, big[at], pos)));
    }
    (void)cache.finish({big}, own, std::move(a.lock));
    CHECK(cache.allocator().live_pages(Component::full) == 60);
    CHECK(e.broken() == "");

    CacheConfig too_big = split_config();
    too_big.budget.swa_partition_pages = 25;  // 60 x 128 + 25 x 640 bytes: more than the arena
    CHECK_THROWS_AS(Cache<PartitionedPolicies>(e.backend, too_big, e.stream), logic_error);
}

namespace {
namespace cache_partition_test {

struct MambaSplitPolicies : cache_finish_test::MambaPolicies {
    using budget = PartitionedMambaBudget;
};

}  // namespace cache_partition_test
}  // namespace

// The FULL+Mamba static split: states are bounded to their pool, so a new request's state at the bound evicts a
// cached prefix's state (the allocator alone refuses it), and the surviving state's row and the new one's read
// back their markers.
TEST_CASE("a static Mamba partition bounds the states: at the bound a new state evicts a cached one, row-exact") {
    using SplitCache = Cache<cache_partition_test::MambaSplitPolicies>;
    HostBackend backend{{.mode = ExecutionMode::manual}};
    HostBackend::Stream stream = backend.make_stream();
    SplitCache cache(backend,
                     {.arena = config(64),
                      .host = {.write = no_writes},
                      .budget = {.full_partition_pages = 16, .mamba_partition_pages = 2}},
                     stream);
    REQUIRE(cache.allocator().page_bound(Component::full) == 16);
    REQUIRE(cache.allocator().page_bound(Component::mamba) == 2);
    const Rows<SplitCache::allocator_type> rows{&cache.allocator()};
    std::vector<std::vector<TokenId>> prompts{tokens(100, 8), tokens(200, 8)};
    std::vector<StateId> states;
    for (const std::vector<TokenId>& p : prompts) {
        std::vector<VirtualToken> own(8);
        REQUIRE(cache.alloc_rows(own, 0));
        StateId s;
        REQUIRE(cache.alloc_state(std::span(&s, 1)));
        REQUIRE(drain(backend, stream));
        rows.write(Component::mamba, s.value(), marker(Component::mamba, p[7], 7));
        (void)cache.finish({p}, own, LockReceipt{}, {.state = s});
        states.push_back(s);
    }
    CHECK(cache.allocator().live_pages(Component::mamba) == 2);
    StateId next;
    const AllocResult bare = cache.allocator().alloc_state(std::span(&next, 1));
    CHECK(bare.shortfall == Shortfall::partition);
    CHECK(bare.missing.component == Component::mamba);
    CHECK(bare.missing.count == 1);
    REQUIRE(cache.alloc_state(std::span(&next, 1)));  // the relief evicts one cached state
    CHECK(cache.allocator().live_pages(Component::mamba) == 2);
    REQUIRE(drain(backend, stream));
    rows.write(Component::mamba, next.value(), marker(Component::mamba, 999, 7));
    std::size_t survivors = 0;
    for (std::size_t i = 0; i < prompts.size(); ++i) {
        const MatchResult m = cache.match({prompts[i]});
        if (m.device_length != 8) continue;
        ++survivors;
        CHECK(cache.tree().node_info(m.device_node).state == states[i]);
        CHECK(rows.holds(Component::mamba, states[i].value(), marker(Component::mamba, prompts[i][7], 7)));
    }
    CHECK(survivors == 1);
    CHECK(rows.holds(Component::mamba, next.value(), marker(Component::mamba, 999, 7)));
    cache.free_state(std::span(&next, 1));
    CHECK(cache.verify().empty());
}

TEST_CASE("peek gives match's lengths on device, host and partial keys, and leaves the cache as it was") {
    Engine<Policies> e;
    // A: 12 tokens cached; B: A's 12, then 8 of its own.
    Request a{.tokens = tokens(100, 14)};
    LockReceipt a_lock = e.start(a, e.cache->match(a.key(14)));
    e.extend(a, 14);
    (void)e.finish(a, std::move(a_lock));
    Request b{.tokens = a.tokens};
    b.tokens.resize(12);
    for (TokenId t : tokens(500, 14)) b.tokens.push_back(t);
    LockReceipt b_lock = e.start(b, e.cache->match(b.key(20)));
    e.extend(b, 20);
    (void)e.finish(b, std::move(b_lock));
    REQUIRE(e.broken() == "");

    // Peeks through a const cache; nothing changes (nodes, sizes, verify), then the match agrees.
    const auto peek_then_match = [&](TokenKey key) {
        const auto& view = *e.cache;
        const std::size_t nodes = view.tree().node_count();
        const std::int64_t evictable = view.tree().evictable_size(Component::full);
        const PrefixPeek p = view.peek(key);
        CHECK(view.tree().node_count() == nodes);
        CHECK(view.tree().evictable_size(Component::full) == evictable);
        CHECK(e.broken() == "");
        const MatchResult m = e.cache->match(key);
        CHECK(p.device_length == m.device_length);
        CHECK(p.best_length == m.best_length);
        return p;
    };
    CHECK(peek_then_match(b.key(20)) == PrefixPeek{20, 20});
    CHECK(peek_then_match(b.key(17)) == PrefixPeek{16, 16});  // a partial page
    CHECK(peek_then_match(a.key(6)) == PrefixPeek{4, 4});     // inside A's node (W = 8: tombstone-free from root)
    CHECK(peek_then_match(TokenKey{tokens(900, 8)}) == PrefixPeek{});

    // Write-back of everything unlocked: a peek inside the open run sees the evicted data on neither tier, and
    // after the run the host copies as host hits.
    auto run = e.cache->start_evict({Component::full, 1 << 20});
    CHECK(std::as_const(*e.cache).peek(b.key(20)) == PrefixPeek{});
    const Eviction ev = e.cache->finish_evict(std::move(run));
    CHECK(ev.backed_up >= 2);
    REQUIRE(e.broken() == "");
    CHECK(peek_then_match(b.key(26)) == PrefixPeek{0, 20});
    CHECK(peek_then_match(b.key(15)) == PrefixPeek{0, 12});
    CHECK(peek_then_match(a.key(12)) == PrefixPeek{0, 12});
    CHECK(e.broken() == "");
}

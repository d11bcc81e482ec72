// The request handle (`Sequence`) driven through `Cache`: a shared system prompt, decode that slides each
// handle's SWA window over its own pages only, chunked prefill with Mamba checkpoints copied by the cache,
// retraction and restore, and a misuse table where each misuse changes nothing and a fresh request then
// reads every row. Every row a forward computes gets a marker, written and read back through the handle's rows.

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <new>
#include <random>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <unikv/backend/host_backend.hpp>
#include <unikv/cache.hpp>

#include "broken.hpp"
#include "cache/cache_support.hpp"
#include "cache/handle_engine.hpp"
#include "fuzz_env.hpp"
#include "row_words.hpp"

// GCC 12 flags free() on memory from the replaced operator new once both are inlined at -O2; the pairing is
// deliberate here (both replacements use malloc/free).
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"

// Counts the allocations made while a test asks it to (`sequence_test::counting`): the decode test below.
namespace sequence_test {
bool counting = false;
long allocations = 0;
}  // namespace sequence_test

void* operator new(std::size_t n) {
    if (sequence_test::counting) ++sequence_test::allocations;
    if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
    throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }

namespace sequence_test {

using namespace unikv;
using cache_test::marker;
using cache_test::page_size;
using cache_test::window;

using handle_test::config;
using handle_test::HandleEngine;
using handle_test::join;
using handle_test::SwaPolicies;
using handle_test::tokens;
using handle_test::TriPolicies;


TEST_CASE("a sequence's decode slides its SWA window over its own pages; the shared prompt's window stays cached") {
    HandleEngine<SwaPolicies> e;
    auto& cache = e.cache;
    const std::vector<TokenId> system = tokens(100, 24);  // six pages
    REQUIRE(e.serve(system, 0) == 0);
    const MatchResult cached = cache.match({system});
    REQUIRE(cached.device_length == 24);

    // B: the system prompt and its own turn, then 40 decode steps.
    Sequence b;
    cache.begin_step({});
    REQUIRE(cache.admit(b, {.prompt = {join(system, tokens(500, 6))}, .max_new_tokens = 40}));
    CHECK(b.prefix_length() == 24);
    CHECK(b.compute_from() == 24);
    CHECK(e.forward(b) == 0);  // the prefix's FULL rows and its window's SWA rows read back
    std::vector<VirtualPage> prefix_pages;
    for (std::int32_t pos = 0; pos < 24; pos += page_size)
        prefix_pages.push_back(page_of(cache.rows(b)[static_cast<std::size_t>(pos)], {page_size}));
    std::vector<bool> prefix_swa;
    for (VirtualPage p : prefix_pages) prefix_swa.push_back(cache.allocator().status(p).swa_bound);
    CHECK(prefix_swa.back());  // the window at the prompt's end is cached with it
    for (std::int32_t step = 0; step < 40; ++step) {
        Sequence* batch[] = {&b};
        const TokenId next[] = {static_cast<TokenId>(7000 + step)};
        REQUIRE(cache.decode(batch, next));
        REQUIRE(e.forward(b) == 0);  // every FULL row and every SWA row of the window
        // Own pages wholly before the window are tombstoned, the rest bound; the prefix's pages are untouched.
        const std::span<const VirtualToken> rows = cache.rows(b);
        for (std::int32_t pos = b.prefix_length(); pos < b.length(); pos += page_size) {
            const bool out = pos + page_size <= b.compute_from() - window;
            CHECK(cache.allocator().status(page_of(rows[static_cast<std::size_t>(pos)], {page_size})).swa_bound == !out);
        }
        for (std::size_t k = 0; k < prefix_pages.size(); ++k)
            CHECK(cache.allocator().status(prefix_pages[k]).swa_bound == prefix_swa[k]);
        // Its first decode cached its prompt's 28 whole tokens (the prompt's end keeps its window): its own
        // rows start there.
        CHECK(b.prefix_length() == 28);
        CHECK(b.swa_start() == std::max(28, (b.compute_from() - window) / page_size * page_size));
    }
    CHECK(e.broken() == "");
    // A request on the same system prompt reads its window back while B still runs, and after B finished.
    CHECK(e.serve(join(system, tokens(800, 3)), 2) == 0);
    const CacheInsert done = cache.finish(b);
    CHECK(done.prefix_length == 28);
    // B's prompt end kept its window although B decoded 40 tokens past it.
    CHECK(cache.match({join(system, tokens(500, 6))}).device_length == 28);
    CHECK(e.serve(join(system, tokens(900, 5)), 3) == 0);
    CHECK(e.broken() == "");
}

TEST_CASE("sequences decode in one batch; one is retracted, another request takes its memory, it is restored from host") {
    HandleEngine<SwaPolicies> e;
    auto& cache = e.cache;
    std::vector<Sequence> seqs(3);
    cache.begin_step({});
    for (std::size_t i = 0; i < seqs.size(); ++i) {
        REQUIRE(cache.admit(seqs[i], {.prompt = {tokens(static_cast<TokenId>(1000 * (i + 1)), 10)}, .max_new_tokens = 20}));
        CHECK(e.forward(seqs[i]) == 0);
    }
    std::vector<Sequence*> batch{&seqs[0], &seqs[1], &seqs[2]};
    std::vector<TokenId> next(3);
    for (std::int32_t step = 0; step < 12; ++step) {
        for (std::size_t i = 0; i < 3; ++i) next[i] = static_cast<TokenId>(50000 + 100 * i + static_cast<std::size_t>(step));
        REQUIRE(cache.decode(batch, next));
        for (Sequence* s : batch) CHECK(e.forward(*s) == 0);
    }
    // The newest is preempted: backed up to host, its own pages freed, its lock released.
    const std::int64_t live = cache.allocator().live_pages(Component::full);
    REQUIRE(cache.retract(seqs[2]));
    CHECK(seqs[2].status() == Sequence::Status::retracted);
    CHECK(cache.allocator().live_pages(Component::full) < live);
    CHECK(e.broken() == "");
    // Another request takes memory meanwhile (its rows land where the retracted ones were).
    CHECK(e.serve(tokens(7000, 30), 4) == 0);
    // While a load-back is in flight the backup cannot be copied back: refused `loading`, nothing changed. The
    // retracted prompt's cached pages (its first decode cached them) stay on device: a restore copies its backup
    // after a device prefix only.
    REQUIRE(e.serve(tokens(8000, 21), 0) == 0);
    const MatchResult retracted_prompt = cache.match({tokens(3000, 10)});
    REQUIRE(retracted_prompt.device_length == 8);
    LockReceipt keep = cache.lock(retracted_prompt.device_node);
    (void)cache.evict({Component::full, 1 << 20});  // to host (write-back)
    cache.unlock(std::move(keep));
    Sequence loaded;
    cache.begin_step({});
    REQUIRE(cache.admit(loaded, {.prompt = {tokens(8000, 23)}, .max_new_tokens = 1}));
    REQUIRE(loaded.load_id() != 0);
    const std::int64_t before_restore = cache.allocator().live_pages(Component::full);
    const Admission waits = cache.restore(seqs[2]);
    CHECK_FALSE(waits);
    CHECK(waits.refusal.cause == RefusalCause::loading);
    CHECK(seqs[2].status() == Sequence::Status::retracted);
    CHECK(seqs[2].backed_up());
    CHECK(cache.allocator().live_pages(Component::full) == before_restore);
    CHECK_THROWS_WITH_AS((void)cache.rows(loaded), doctest::Contains("still loading"), logic_error);
    (void)cache.start_loading();
    cache.transfer_stream().synchronize();
    REQUIRE(cache.loading_check().size() == 1);
    CHECK(e.forward(loaded) == 0);  // the loaded prefix's rows read back
    (void)cache.finish(loaded);
    // Restore: fresh rows receive the backup, nothing to compute, and decoding goes on.
    cache.begin_step({});
    REQUIRE(cache.restore(seqs[2]));
    CHECK(seqs[2].restored_rows() == 22 - seqs[2].prefix_length());
    CHECK(seqs[2].compute_from() == seqs[2].length() - 1);  // its last row was not known computed
    CHECK(seqs[2].length() == 22);
    CHECK(e.forward(seqs[2]) == 0);  // reads all 22 FULL rows and the window's SWA rows
    for (std::int32_t step = 12; step < 20; ++step) {
        for (std::size_t i = 0; i < 3; ++i) next[i] = static_cast<TokenId>(50000 + 100 * i + static_cast<std::size_t>(step));
        REQUIRE(cache.decode(batch, next));
        for (Sequence* s : batch) CHECK(e.forward(*s) == 0);
    }
    for (Sequence& s : seqs) (void)cache.finish(s);
    CHECK(e.broken() == "");
    // Each one's rows are cached: a request on its tokens reads them all back.
    CHECK(e.serve(join(tokens(1000, 10), {50000, 50001, 50002, 50003}), 1) == 0);
    CHECK(cache.match({join(tokens(1000, 10), {50000, 50001})}).device_length == 12);
}

TEST_CASE("tri-pool: chunked prefill checkpoints its chunks with a copy of the running state, and a later request starts from it") {
    HandleEngine<TriPolicies> e;
    auto& cache = e.cache;
    const std::vector<TokenId> prompt = tokens(300, 22);
    Sequence a;
    cache.begin_step({.chunk_tokens = 8});
    REQUIRE(cache.admit(a, {.prompt = {prompt}, .max_new_tokens = 4}));
    CHECK(a.prefilling());
    CHECK(a.length() == 8);
    CHECK(e.forward(a) == 0);
    // `extend` before the chunk is cached is a misuse; the handle is unchanged.
    cache.begin_step({.chunk_tokens = 8});
    CHECK_THROWS_WITH_AS((void)cache.extend(a), doctest::Contains("checkpoint the chunk first"), logic_error);
    const CacheInsert chunk = cache.checkpoint(a);
    CHECK(a.prefix_length() == 8);
    const StateId checkpointed = cache.tree().node_info(chunk.node).state;
    REQUIRE(checkpointed.is_valid());
    CHECK_FALSE(a.state().is_valid());  // the tree took the chunk's state; the next chunk starts from a copy
    cache.sync_for_host();
    CHECK(test_rows::uniform_word(e.state_row(checkpointed), e.entry(Component::mamba)) ==
          HandleEngine<TriPolicies>::state_marker(a, 8));
    REQUIRE(cache.extend(a));
    CHECK(a.length() == 16);
    CHECK(e.forward(a) == 0);  // reads its state at 8: the cache's copy of the checkpoint
    (void)cache.checkpoint(a);
    // The third chunk stops at the prompt's last whole page, so that a state is cached at its end.
    cache.begin_step({.chunk_tokens = 8});
    REQUIRE(cache.extend(a));
    CHECK(a.prefilling());
    CHECK(a.length() == 20);
    CHECK(e.forward(a) == 0);
    const CacheInsert prompt_end = cache.checkpoint(a);
    CHECK(cache.tree().node_info(prompt_end.node).state.is_valid());
    CHECK(prompt_end.node == cache.match({prompt}).device_node);
    cache.begin_step({.chunk_tokens = 8});
    REQUIRE(cache.extend(a));
    CHECK_FALSE(a.prefilling());
    CHECK(e.forward(a) == 0);
    Sequence* batch[] = {&a};
    const TokenId next[] = {4242};
    REQUIRE(cache.decode(batch, next));
    CHECK(e.forward(a) == 0);
    // B shares 16 tokens: its state slot receives the checkpoint's copy before its forward reads it.
    Sequence b;
    cache.begin_step({});
    REQUIRE(cache.admit(b, {.prompt = {join(tokens(300, 16), tokens(600, 3))}, .max_new_tokens = 2}));
    CHECK(b.prefix_length() == 16);
    CHECK(b.state() != cache.tree().node_info(b.node()).state);
    CHECK(e.forward(b) == 0);
    (void)cache.finish(a);
    (void)cache.finish(b);
    CHECK(e.broken() == "");
    // Without a host backup (Mamba), a retraction drops the rows and the restore recomputes them.
    Sequence c;
    cache.begin_step({});
    REQUIRE(cache.admit(c, {.prompt = {tokens(2000, 9)}, .max_new_tokens = 3}));
    CHECK(e.forward(c) == 0);
    CHECK_FALSE(cache.retract(c));
    cache.begin_step({});
    REQUIRE(cache.restore(c));
    CHECK(c.compute_from() == c.prefix_length());
    CHECK(e.forward(c) == 0);
    (void)cache.finish(c);
    CHECK(e.serve(tokens(2000, 12), 2) == 0);
    CHECK(e.broken() == "");
}

TEST_CASE("handle misuse throws naming it and changes nothing; a fresh request then reads every row") {
    HandleEngine<SwaPolicies> e;
    auto& cache = e.cache;
    REQUIRE(e.serve(tokens(100, 16), 2) == 0);
    Sequence s;
    cache.begin_step({});
    REQUIRE(cache.admit(s, {.prompt = {join(tokens(100, 16), tokens(400, 5))}, .max_new_tokens = 1}));
    REQUIRE(e.forward(s) == 0);
    const auto snapshot = [&] {
        return std::vector<std::int64_t>{cache.allocator().live_pages(Component::full),
                                         cache.allocator().live_pages(Component::swa),
                                         cache.tree().protected_size(Component::full), s.length(), s.prefix_length(),
                                         s.decoded(), static_cast<std::int64_t>(s.status())};
    };
    const std::vector<std::int64_t> before = snapshot();
    const auto unchanged = [&] {
        CHECK(snapshot() == before);
        CHECK(e.broken() == "");
    };
    // Admitting a running handle again, restoring one never retracted.
    CHECK_THROWS_WITH_AS((void)cache.admit(s, {.prompt = {tokens(1, 3)}}), doctest::Contains("admit: the sequence is running"),
                         logic_error);
    CHECK_THROWS_WITH_AS((void)cache.restore(s), doctest::Contains("restore: the sequence is running, not retracted"),
                         logic_error);
    unchanged();
    // A batch naming it twice; a token count that does not match; past its max_new_tokens.
    Sequence* twice[] = {&s, &s};
    const TokenId two[] = {1, 2};
    CHECK_THROWS_WITH_AS((void)cache.decode(twice, two), doctest::Contains("named twice"), logic_error);
    Sequence* once[] = {&s};
    CHECK_THROWS_AS((void)cache.decode(once, two), logic_error);
    REQUIRE(cache.decode(once, std::span(two).first(1)));
    REQUIRE(e.forward(s) == 0);
    const std::vector<std::int64_t> decoded = snapshot();
    CHECK_THROWS_WITH_AS((void)cache.decode(once, std::span(two).first(1)), doctest::Contains("max_new_tokens"), logic_error);
    CHECK(snapshot() == decoded);
    // A handle of another cache.
    HandleEngine<SwaPolicies> other;
    CHECK_THROWS_WITH_AS((void)other.cache.finish(s), doctest::Contains("another cache"), logic_error);
    CHECK_THROWS_WITH_AS((void)other.cache.retract(s), doctest::Contains("another cache"), logic_error);
    CHECK(snapshot() == decoded);
    // Finish, then every use after it: a second finish, decode, checkpoint, retract, release, rows.
    (void)cache.finish(s);
    const std::int64_t live = cache.allocator().live_pages(Component::full);
    CHECK_THROWS_WITH_AS((void)cache.finish(s), doctest::Contains("finish: the sequence is idle"), logic_error);
    CHECK_THROWS_WITH_AS((void)cache.decode(once, std::span(two).first(1)), doctest::Contains("is idle"), logic_error);
    CHECK_THROWS_AS((void)cache.checkpoint(s), logic_error);
    CHECK_THROWS_AS((void)cache.retract(s), logic_error);
    CHECK_THROWS_AS(cache.release(s), logic_error);
    CHECK_THROWS_AS((void)cache.rows(s), logic_error);
    CHECK(cache.allocator().live_pages(Component::full) == live);
    CHECK(e.broken() == "");
    // Retract twice.
    Sequence r;
    cache.begin_step({});
    REQUIRE(cache.admit(r, {.prompt = {tokens(3000, 9)}, .max_new_tokens = 4}));
    REQUIRE(e.forward(r) == 0);
    Sequence* just_r[] = {&r};
    REQUIRE(cache.decode(just_r, std::span(two).first(1)));
    REQUIRE(e.forward(r) == 0);
    REQUIRE(cache.retract(r));  // its rows known computed are backed up
    const std::int64_t after_retract = cache.allocator().live_pages(Component::full);
    CHECK_THROWS_WITH_AS((void)cache.retract(r), doctest::Contains("retract: the sequence is retracted, not running"),
                         logic_error);
    CHECK(cache.allocator().live_pages(Component::full) == after_retract);
    CHECK(r.backed_up());
    cache.release(r);  // an abort: the backup's host pages go back
    CHECK(r.status() == Sequence::Status::idle);
    CHECK(e.broken() == "");
    // A moved-from handle is idle (a finish of it throws and frees nothing); the moved-to one runs on. A handle
    // finished in another cache decodes here without a stale batch mark.
    Sequence moved_from;
    cache.begin_step({});
    REQUIRE(cache.admit(moved_from, {.prompt = {tokens(3100, 6)}, .max_new_tokens = 2}));
    Sequence moved_to = std::move(moved_from);
    CHECK(moved_from.status() == Sequence::Status::idle);
    CHECK_THROWS_WITH_AS((void)cache.finish(moved_from), doctest::Contains("is idle"), logic_error);
    CHECK(e.forward(moved_to) == 0);
    (void)cache.finish(moved_to);
    Sequence traveller;
    other.cache.begin_step({});
    REQUIRE(other.cache.admit(traveller, {.prompt = {tokens(3200, 6)}, .max_new_tokens = 2}));
    REQUIRE(other.forward(traveller) == 0);
    Sequence* just_traveller[] = {&traveller};
    REQUIRE(other.cache.decode(just_traveller, std::span(two).first(1)));
    (void)other.cache.finish(traveller);
    cache.begin_step({});
    REQUIRE(cache.admit(traveller, {.prompt = {tokens(3300, 6)}, .max_new_tokens = 2}));
    REQUIRE(e.forward(traveller) == 0);
    CHECK(cache.decode(just_traveller, std::span(two).first(1)));
    (void)cache.finish(traveller);
    CHECK(e.broken() == "");
    // Fresh requests read every row: the prefix the misused handle shared, and new ones.
    CHECK(e.serve(join(tokens(100, 16), tokens(400, 6)), 3) == 0);
    CHECK(e.serve(tokens(5000, 13), 3) == 0);
    CHECK(e.broken() == "");
}

TEST_CASE("a batched decode allocates nothing once its scratch has grown, and is one call for the batch") {
    HandleEngine<SwaPolicies> e(1024);
    auto& cache = e.cache;
    std::vector<Sequence> seqs(16);
    std::vector<Sequence*> batch;
    cache.begin_step({});
    for (std::size_t i = 0; i < seqs.size(); ++i) {
        REQUIRE(cache.admit(seqs[i], {.prompt = {tokens(static_cast<TokenId>(100 * (i + 1)), 21)}, .max_new_tokens = 80}));
        batch.push_back(&seqs[i]);
    }
    std::vector<TokenId> next(seqs.size(), 7);
    int wrong = 0;
    for (Sequence* s : batch) wrong += e.forward(*s);
    allocations = 0;
    for (int step = 0; step < 72; ++step) {
        counting = step >= 8;  // once the scratch has grown to the batch
        const bool decoded = static_cast<bool>(cache.decode(batch, next));
        counting = false;
        REQUIRE(decoded);
        for (Sequence* s : batch) wrong += e.forward(*s);
    }
    CHECK(allocations == 0);
    CHECK(wrong == 0);
    CHECK(seqs[0].length() == 21 + 72);
    CHECK(seqs[0].swa_start() > seqs[0].prefix_length());  // the windows slid meanwhile
    for (Sequence& s : seqs) (void)cache.finish(s);
    CHECK(e.broken() == "");
}

// Random calls on eight handles over a small arena: admissions over three shared system prompts (chunked by
// a random step budget; host hits loaded back), forwards that write and read every row, checkpoints, batched
// decodes that retract the newest on a shortfall, restores, finishes, releases, evictions, and a misuse now
// and then that must change nothing. `verify()` after every operation. The seed also picks the retention
// policies (`retention_of`). Length and seed: UNIKV_SEQUENCE_FUZZ_OPS (per layout), UNIKV_SEQUENCE_FUZZ_SEED.
RetentionConfig retention_of(std::uint64_t seed) {
    switch (seed % 4) {
        case 0: return {.every_tokens = 2 * page_size};
        case 1: return {.prompt_ends = false, .branch_points = false};
        case 2: return {.prompt_ends = false, .branch_points = false, .every_tokens = page_size};
        default: return {};
    }
}

template <class P>
void fuzz_handles(std::uint64_t seed, std::int64_t ops) {
    const RetentionConfig retention = retention_of(seed);
    HandleEngine<P> e(64, retention);
    auto& cache = e.cache;
    std::mt19937_64 rng(seed);
    const auto pick = [&](std::int64_t n) { return static_cast<std::int32_t>(rng() % static_cast<std::uint64_t>(n)); };
    std::vector<std::vector<TokenId>> system{tokens(100, 8), tokens(200, 23), tokens(300, 40)};
    struct Slot {
        Sequence seq;
        bool computed = false;  // its rows hold what a forward wrote
    };
    std::vector<Slot> slots(8);
    std::int64_t served = 0, wrong = 0, refused = 0, retracted = 0, restored = 0, misuses = 0, loads = 0, short_of = 0;
    TokenId fresh = 100000;
    const auto ack_loads = [&] {
        if (cache.loads_in_flight() == 0) return;
        (void)cache.start_loading();
        cache.transfer_stream().synchronize();
        (void)cache.loading_check();
    };
    const auto step = [&] {
        std::int32_t decoders = 0;
        for (Slot& s : slots) decoders += s.seq.status() == Sequence::Status::running && !s.seq.prefilling();
        const std::int32_t budgets[] = {8, 16, 64, 1 << 20};
        // Now and then the step forgets its decoders (a sloppy engine): later decodes then fall short.
        cache.begin_step({.decode_tokens = pick(3) == 0 ? 0 : decoders, .chunk_tokens = budgets[pick(4)]});
    };
    for (std::int64_t op = 0; op < ops; ++op) {
        Slot& slot = slots[static_cast<std::size_t>(pick(8))];
        Sequence& s = slot.seq;
        const auto status = s.status();
        const bool running = status == Sequence::Status::running;
        // Decode steps weigh most, as in a serving engine: sixteen draws map to the operations below.
        constexpr std::int32_t kinds[] = {0, 0, 2, 3, 3, 5, 5, 5, 5, 5, 7, 8, 9, 10, 11, 11};
        switch (kinds[pick(16)]) {
            case 0:  // a new request
                if (status != Sequence::Status::idle) break;
                {
                    std::vector<TokenId> prompt = system[static_cast<std::size_t>(pick(3))];
                    for (std::int32_t i = 0, n = 1 + pick(30); i < n; ++i) prompt.push_back(fresh++);
                    step();
                    const Admission a = cache.admit(s, {.prompt = {prompt}, .max_new_tokens = pick(64)});
                    refused += a ? 0 : 1;
                    loads += a.load_id != 0 ? 1 : 0;
                    slot.computed = false;
                }
                break;
            case 2:  // the next chunk
                if (!running || !s.prefilling() || s.length() != s.prefix_length()) break;
                step();
                if (cache.extend(s)) {
                    slot.computed = false;
                } else {
                    ++refused;
                }
                break;
            case 3:  // a forward over every running handle not computed yet; chunks and prompts checkpointed
                ack_loads();
                for (Slot& t : slots) {
                    if (t.seq.status() != Sequence::Status::running || t.computed) continue;
                    wrong += e.forward(t.seq);
                    t.computed = true;
                    if (t.seq.prefilling() || (t.seq.decoded() == 0 && pick(2) == 0)) (void)cache.checkpoint(t.seq);
                }
                break;
            case 5: {  // a batched decode; the newest is retracted while it falls short
                std::vector<Sequence*> batch;
                for (Slot& t : slots) {
                    if (t.seq.status() == Sequence::Status::running && t.computed && !t.seq.prefilling() &&
                        t.seq.decoded() < t.seq.max_new_tokens()) {
                        batch.push_back(&t.seq);
                    }
                }
                std::vector<TokenId> next(batch.size(), static_cast<TokenId>(fresh++));
                while (!batch.empty() && !cache.decode(batch, next)) {
                    ++short_of;
                    retracted += cache.retract(*batch.back()) ? 1 : 0;
                    batch.pop_back();
                    next.pop_back();
                }
                for (Slot& t : slots) {
                    if (std::find(batch.begin(), batch.end(), &t.seq) != batch.end()) t.computed = false;
                }
                break;
            }
            case 7:  // a preemption (its rows computed or not), or its return
                if (running) {
                    retracted += cache.retract(s) ? 1 : 0;
                } else if (status == Sequence::Status::retracted) {
                    step();
                    const Admission a = cache.restore(s);
                    restored += a ? 1 : 0;
                    slot.computed = a && s.compute_from() == s.length();  // else rows to compute
                }
                break;
            case 8:  // done (or an abort)
                if (running && slot.computed && pick(3) != 0) {
                    (void)cache.finish(s);
                    ++served;
                } else if (status != Sequence::Status::idle && pick(4) == 0) {
                    cache.release(s);
                }
                break;
            case 9:  // eviction, device (written back) or host
                if (pick(3) != 0) {
                    (void)cache.evict({Component::full, 1 + pick(40)});
                } else {
                    (void)cache.evict_host({Component::full, 1 + pick(12)});
                }
                break;
            case 10: {  // a misuse: refused, nothing changed
                const std::vector<std::int64_t> before{cache.allocator().live_pages(Component::full), s.length(),
                                                       s.prefix_length(), static_cast<std::int64_t>(status)};
                ++misuses;
                if (status == Sequence::Status::idle) {
                    CHECK_THROWS_AS((void)cache.finish(s), logic_error);
                } else if (status == Sequence::Status::retracted) {
                    CHECK_THROWS_AS((void)cache.retract(s), logic_error);
                } else if (s.prefilling()) {
                    Sequence* one[] = {&s};
                    const TokenId t[] = {1};
                    CHECK_THROWS_AS((void)cache.decode(one, t), logic_error);
                } else {
                    CHECK_THROWS_AS((void)cache.restore(s), logic_error);
                }
                const std::vector<std::int64_t> after{cache.allocator().live_pages(Component::full), s.length(),
                                                      s.prefix_length(), static_cast<std::int64_t>(s.status())};
                CHECK(after == before);
                break;
            }
            default:  // the transfers in flight acknowledged
                ack_loads();
                (void)cache.writing_check();
                break;
        }
        const std::string broken = e.broken();
        if (!broken.empty() || wrong != 0) {
            FAIL("seed ", seed, ", operation ", op, ": ", wrong, " wrong rows; ", broken);
        }
    }
    ack_loads();
    for (Slot& t : slots) {
        if (t.seq.status() != Sequence::Status::idle) cache.release(t.seq);
    }
    CHECK(e.broken() == "");
    MESSAGE("seed ", seed, " (retention: prompt ends ", retention.prompt_ends, ", branch points ",
            retention.branch_points, ", every ", retention.every_tokens, "): ", ops, " operations, ", served,
            " finished, ", refused, " refused, ", loads,
            " loaded back, ", short_of, " decodes short, ", retracted, " retracted with a backup, ", restored,
            " restored, ", misuses, " misuses refused");
    CHECK(served > 0);
    CHECK(restored > 0);
}

TEST_CASE("handles under random calls serve every row and keep the accounting (SwaFull with write-back, TriPool)") {
    const std::uint64_t seed = unikv::test::env_or("UNIKV_SEQUENCE_FUZZ_SEED", 20261207);
    const auto ops = static_cast<std::int64_t>(unikv::test::env_or("UNIKV_SEQUENCE_FUZZ_OPS", 3000));
    SUBCASE("SwaFullLayout") { fuzz_handles<SwaPolicies>(seed, ops); }
    SUBCASE("TriPoolLayout") { fuzz_handles<TriPolicies>(seed + 1, ops); }
}

}  // namespace sequence_test

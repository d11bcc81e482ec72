// A complete small engine (ctest `example.mini_engine`, at most 150 lines): GPT-OSS-20B on the CPU backend through
// request handles (`unikv::Sequence`). Three-turn conversations over shared system prompts, chunked prefill, loads
// from host, batched decode, retraction and restore, write-back; every row is written with a marker and checked.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <span>
#include <string>
#include <vector>

#include <unikv/unikv.hpp>

namespace {

using unikv::Component;
using unikv::TokenId;

struct Policies : unikv::DefaultCachePolicies {
    using layout = unikv::presets::GptOss20B::layout;  // SwaFullLayout (its shapes: arena_config<GptOss20B>)
    using budget = unikv::SharedSWABudget;              // FULL and SWA budgeted jointly over the one arena
};
using ModelCache = unikv::Cache<Policies>;

struct Counters { long steps, finished, device_hit, loaded, chunked, retracted, restored, rows, wrong; };

struct Conversation {
    std::int32_t turn = 0;
    std::vector<TokenId> prompt;  // its system prompt, the earlier turns (user and decoded tokens), new user tokens
    unikv::AdmitRequest request;  // the prompt and the tokens to decode
    bool compute = false;         // rows [compute_from, length) wait for the forward
    unikv::Sequence seq;          // the request of its current turn
};

std::uint32_t lcg(std::uint32_t& s) { return (s = s * 1664525u + 1013904223u) >> 8; }
std::uint32_t marker(TokenId token, std::int32_t pos, Component c) {
    return static_cast<std::uint32_t>(token) * 2654435761u ^ static_cast<std::uint32_t>(pos) * 40503u ^
           static_cast<std::uint32_t>(c) * 0x9E3779B9u;
}

// The token the forward samples for row `pos`: fixed per turn (its last user token) and position.
TokenId sampled(const Conversation& c, std::int32_t pos) { return 60000 + (c.prompt.back() * 7919 + pos * 31) % 30000; }

// The forward as the cache sees it: rows from `from` on get a marker (first and last word, FULL and SWA rows alike,
// as a kernel writes both for every token); before `from`, every FULL row and the window's SWA rows are checked.
void forward(ModelCache& cache, unikv::Sequence& seq, std::int32_t from, Counters& n) {
    const std::span<const unikv::VirtualToken> rows = cache.rows(seq);
    std::vector<unikv::PhysicalToken> at(rows.size());
    cache.sync_for_host();  // the moves queued by allocations and frees run before the host touches rows
    for (Component c : {Component::full, Component::swa}) {
        c == Component::full ? cache.translate_full(rows, at) : cache.translate_swa(rows, at);
        const std::size_t entry = cache.allocator().spec()[c].entry_bytes;
        const std::int32_t attended = c == Component::full ? 0 : from - cache.window_tokens();
        for (std::int32_t pos = 0; pos < seq.length(); ++pos) {
            auto* row = reinterpret_cast<std::uint32_t*>(cache.allocator().region().data + at[pos].value() * entry);
            const std::uint32_t want = marker(seq.tokens()[pos], pos, c);
            if (pos >= from) row[0] = row[entry / 4 - 1] = want;
            else if (pos >= attended) n.wrong += row[0] != want || row[entry / 4 - 1] != want;
        }
        n.rows += std::max(0, from - std::max(0, attended));
    }
}

}  // namespace

int main() {
    unikv::DefaultBackend backend;
    auto compute = backend.make_stream();
    ModelCache cache(backend,
                     {.arena = unikv::arena_config<unikv::presets::GptOss20B>({.arena_bytes = std::size_t{96} << 20, .page_size = {16}}),
                      .host = {.total_bytes = std::size_t{256} << 20, .write = {.policy = unikv::WritePolicy::back}}},
                     compute);
    constexpr long turns = 3;
    std::uint32_t seed = 2024;
    std::vector<std::vector<TokenId>> system(3);  // the shared system prompts, 200 to 299 tokens each
    for (std::size_t s = 0; s < system.size(); ++s)
        for (std::uint32_t i = 0, len = 200 + lcg(seed) % 100; i < len; ++i) system[s].push_back(1000 * (s + 1) + i);
    std::vector<Conversation> convs(20);
    std::deque<Conversation*> waiting;   // FIFO; a retracted request goes back to the front
    std::vector<Conversation*> running;  // in admission order: the newest last
    const auto ask = [&](Conversation& c, std::span<const TokenId> history) {  // the next turn waits, last
        c.prompt.assign(history.begin(), history.end());
        for (std::uint32_t i = 0, len = 20 + lcg(seed) % 60; i < len; ++i) c.prompt.push_back(lcg(seed) % 50000);
        c.request = {.prompt = {c.prompt}, .max_new_tokens = static_cast<std::int32_t>(30 + lcg(seed) % 11)};
        waiting.push_back(&c);
    };
    for (std::size_t i = 0; i < convs.size(); ++i) ask(convs[i], system[i % system.size()]);
    const long total = turns * static_cast<long>(convs.size());
    Counters n{};
    const auto started = [&](Conversation& c, const unikv::Admission& a) {  // a prefix on host is loaded back now
        if (!a) return false;
        c.compute = true;
        n.chunked += a.chunked;
        (a.load_id != 0 ? n.loaded : n.device_hit) += a.prefix_length;
        if (a.load_id == 0) return true;
        cache.start_loading();  // the attention of layer l waits only on layer l's copy
        for (std::int32_t l = 0; l < cache.layers(); ++l) cache.wait_layer(compute, l);
        cache.transfer_stream().synchronize();  // an engine would rather acknowledge it at its next step
        (void)cache.loading_check();            // then `rows` reads the loaded prefix
        return true;
    };
    for (; n.finished < total && n.steps < 100000 && cache.verify().empty(); ++n.steps) {
        std::vector<Conversation*> decoders;  // their prompts were computed by an earlier step
        for (Conversation* c : running) if (!c->seq.prefilling()) decoders.push_back(c);
        cache.begin_step({.decode_tokens = static_cast<std::int32_t>(decoders.size()), .chunk_tokens = 256});
        bool admitting = true;  // running chunked prefills (checkpointed) first, then the waiting ones up to a refusal
        for (Conversation* c : running)
            if (admitting && c->seq.prefilling()) admitting = started(*c, cache.extend(c->seq));
        while (admitting && !waiting.empty()) {
            Conversation& c = *waiting.front();
            const bool back = c.seq.status() == unikv::Sequence::Status::retracted;
            if (!started(c, back ? cache.restore(c.seq) : cache.admit(c.seq, c.request))) break;
            n.restored += back;
            waiting.pop_front();
            running.push_back(&c);
        }
        std::vector<unikv::Sequence*> batch;
        std::vector<TokenId> next;
        for (Conversation* c : decoders) batch.push_back(&c->seq), next.push_back(sampled(*c, c->seq.length()));
        while (!batch.empty() && !cache.decode(batch, next)) {  // short: retract the newest, decode the rest again
            (void)cache.retract(*batch.back());  // its rows backed up to host where they fit
            ++n.retracted;
            std::erase(running, decoders.back());
            waiting.push_front(decoders.back());
            batch.pop_back(), next.pop_back(), decoders.pop_back();
        }
        for (Conversation* c : decoders) c->compute = true;
        std::erase_if(running, [&](Conversation* c) {  // the forward; a chunk or a prompt computed is cached
            forward(cache, c->seq, c->compute ? c->seq.compute_from() : c->seq.length(), n);
            if (c->compute && c->seq.prefilling()) (void)cache.checkpoint(c->seq);  // (a prompt: its first decode)
            c->compute = false;
            if (c->seq.prefilling() || c->seq.decoded() < c->seq.max_new_tokens()) return false;
            if (++c->turn < turns) ask(*c, c->seq.tokens());  // the next turn starts with all of this one's tokens
            (void)cache.finish(c->seq);  // whole pages to the tree, where the next turn finds them
            ++n.finished;
            return true;
        });
    }
    const unikv::BytesMoved moved = cache.bytes_moved();
    for (const std::string& line : cache.verify()) std::printf("verify: %s\n", line.c_str());
    std::printf("%ld steps, %ld of %ld turns finished; prefix tokens: %ld device hits, %ld loaded from host\n", n.steps,
                n.finished, total, n.device_hit, n.loaded);
    std::printf("%ld chunked admissions, %ld retractions, %ld restores; %.0f MiB written back, %.0f MiB loaded; "
                "%ld rows read back, %ld wrong\n", n.chunked, n.retracted, n.restored, moved.written / 1048576.0,
                moved.loaded / 1048576.0, n.rows, n.wrong);
    const bool ok = n.wrong == 0 && cache.verify().empty() && n.finished == total && n.device_hit > 0 && n.loaded > 0 &&
                    moved.written > 0 && moved.loaded > 0 && n.chunked > 0 && n.retracted > 0 && n.restored > 0;
    std::puts(ok ? "mini engine: ok" : "mini engine: FAILED");
    return ok ? 0 : 1;
}

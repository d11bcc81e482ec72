// The README's engine walkthrough, built and run by ctest (`example.engine_walkthrough`); the part between the
// readme markers is the README's text, character for character and at most 30 lines (ctest
// `readme.engine_walkthrough`). An engine serving GPT-OSS-20B on the CPU backend through a request handle
// (`unikv::Sequence`): the budget admits the prompt (a prefix that lives on host is reclaimed for and loaded
// back layer by layer), the forward reads the handle's rows, decode steps add a row each and slide the SWA
// window, and finish inserts its pages. `main` serves a prompt, evicts everything (written back to host) and
// serves the prompt again from the host copy; every forward checks that each cached row it reads holds what
// was written there.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <span>
#include <vector>

#include <unikv/unikv.hpp>

namespace {

using unikv::Component;

std::uint32_t marker(unikv::TokenId token, std::int32_t pos, Component c) {
    return static_cast<std::uint32_t>(token) * 2654435761u ^ static_cast<std::uint32_t>(pos) * 40503u ^
           static_cast<std::uint32_t>(c) * 0x9E3779B9u;
}

// The engine's forward, reduced to what the cache sees: rows from `compute_from` on are written (a marker per
// row, FULL and SWA alike, as a kernel writes both for every token); before it, the FULL rows of every token and
// the SWA rows of the window are read. Returns the rows read that did not hold their marker.
template <class Cache>
int forward(Cache& cache, const unikv::Sequence& seq, std::span<const unikv::PhysicalToken> full,
            std::span<const unikv::PhysicalToken> swa) {
    int wrong = 0;
    for (Component c : {Component::full, Component::swa}) {
        const std::size_t entry = cache.allocator().spec()[c].entry_bytes;
        const std::int32_t attended = c == Component::full ? 0 : seq.compute_from() - cache.window_tokens();
        for (std::int32_t pos = std::max(0, attended); pos < seq.length(); ++pos) {
            const unikv::PhysicalToken p = (c == Component::full ? full : swa)[static_cast<std::size_t>(pos)];
            auto* row = reinterpret_cast<std::uint32_t*>(cache.allocator().region().data + p.value() * entry);
            const std::uint32_t want = marker(seq.tokens()[static_cast<std::size_t>(pos)], pos, c);
            if (pos < seq.compute_from()) {
                wrong += row[0] != want || row[entry / 4 - 1] != want;
            } else {
                row[0] = row[entry / 4 - 1] = want;
            }
        }
    }
    return wrong;
}

}  // namespace

// [readme]
struct Policies : unikv::DefaultCachePolicies {
    using layout = unikv::presets::GptOss20B::layout;  // SwaFullLayout (its shapes: arena_config<GptOss20B>)
    using budget = unikv::SharedSWABudget;  // FULL and SWA budgeted jointly over the one arena
};
using ModelCache = unikv::Cache<Policies>;

int serve(ModelCache& cache, unikv::DefaultBackend::stream_ref compute, std::span<const unikv::TokenId> prompt) {
    cache.begin_step({.decode_tokens = 0});  // the running decodes' tokens are pre-charged here
    unikv::Sequence seq;  // the request: its tokens, rows, prefix lock, SWA cursor (with Mamba, its state)
    if (!cache.admit(seq, {.prompt = {prompt}, .max_new_tokens = 8})) return -1;  // the refusal says why
    if (seq.load_id() != 0) {  // its prefix is on host: loaded layer by layer
        cache.start_loading();  // the attention of layer l waits only on layer l's copy
        for (std::int32_t l = 0; l < cache.layers(); ++l) cache.wait_layer(compute, l);
        cache.transfer_stream().synchronize();  // an engine would rather ack at its next step
        (void)cache.loading_check();
    }
    int wrong = 0;
    for (unikv::TokenId next = 1;; ++next) {  // prefill, then one decode step per token
        std::vector<unikv::PhysicalToken> full(cache.rows(seq).size()), swa(full.size());
        cache.translate_full(cache.rows(seq), full);  // the prefix's rows, then its own
        cache.translate_swa(cache.rows(seq), swa);    // (device_tables() for kernels that translate)
        cache.sync_for_host();  // a host forward (this CPU backend) touches rows only after the queued moves
        wrong += forward(cache, seq, full, swa);  // computes rows [compute_from, length)
        unikv::Sequence* batch[] = {&seq};  // any number: one row each (the first caches the prompt), windows slide
        if (wrong != 0 || seq.decoded() == seq.max_new_tokens() || !cache.decode(batch, std::span(&next, 1))) break;
    }
    (void)cache.finish(seq);  // whole pages to the tree, the tail freed (decode short: an engine retracts one)
    return wrong;
}
// [/readme]

const char* verdict(int wrong) {
    return wrong == 0 ? "every row read back" : wrong < 0 ? "refused" : "WRONG ROWS";
}

int main() {
    unikv::DefaultBackend backend;
    auto compute = backend.make_stream();
    ModelCache cache(backend,
                     {.arena = unikv::arena_config<unikv::presets::GptOss20B>({.arena_bytes = std::size_t{64} << 20, .page_size = {16}}),
                      .host = {.total_bytes = std::size_t{64} << 20, .write = {.policy = unikv::WritePolicy::back}}},
                     compute);
    std::vector<unikv::TokenId> prompt;
    for (unikv::TokenId t = 0; t < 300; ++t) prompt.push_back(1000 + t);

    const int first = serve(cache, compute, prompt);
    const unikv::Eviction ev = cache.evict({Component::full, 1 << 20});  // everything, backed up first
    const unikv::MatchResult hit = cache.match({prompt});
    const int again = serve(cache, compute, prompt);
    const unikv::MatchResult served = cache.match({prompt});
    const bool healthy = cache.verify().empty();
    std::printf("first serve: %s; evicted %lld FULL pages (%d backups); host hit of %d tokens\n", verdict(first),
                static_cast<long long>(ev.pages_freed[Component::full]), ev.backed_up, hit.host_hit_length);
    std::printf("second serve: %s; %d tokens now on device; accounting %s\n", verdict(again), served.device_length,
                healthy ? "healthy" : "BROKEN");
    const bool ok = first == 0 && again == 0 && hit.host_hit_length == 288 && served.device_length == 288 && healthy;
    std::puts(ok ? "engine walkthrough: ok" : "engine walkthrough: FAILED");
    return ok ? 0 : 1;
}

// The README's engine walkthrough, built and run by ctest (`example.engine_walkthrough`); the part between the
// readme markers is the README's text, character for character (ctest `readme.engine_walkthrough`). An engine
// serving GPT-OSS-20B on the CPU backend: a prompt is admitted by the budget (a prefix that lives on host is
// reclaimed for and loaded back layer by layer), its rows are allocated and translated for the kernels, and it
// finishes by inserting its pages. `main` serves a prompt, evicts everything (written back to host) and serves
// the prompt again from the host copy; the forward checks that every cached row it reads holds what was written
// there.
#include <cstdint>
#include <cstdio>
#include <span>
#include <utility>
#include <vector>

#include <unikv/unikv.hpp>

namespace {

using unikv::Component;

std::uint32_t marker(unikv::TokenId token, std::int32_t pos) {
    return static_cast<std::uint32_t>(token) * 2654435761u ^ static_cast<std::uint32_t>(pos) * 40503u;
}

// The engine's forward, reduced to what the cache sees: it reads the FULL rows of the cached prefix and writes
// those of the new tokens (a marker per row). Returns the cached rows that did not hold their marker.
template <class Cache>
int forward(Cache& cache, std::span<const unikv::PhysicalToken> rows, std::span<const unikv::TokenId> prompt,
            std::int32_t cached) {
    const std::size_t entry = cache.allocator().spec()[Component::full].entry_bytes;
    int wrong = 0;
    for (std::size_t pos = 0; pos < rows.size(); ++pos) {
        auto* row = reinterpret_cast<std::uint32_t*>(cache.allocator().region().data + rows[pos].value() * entry);
        const std::uint32_t want = marker(prompt[pos], static_cast<std::int32_t>(pos));
        if (static_cast<std::int32_t>(pos) < cached) {
            wrong += row[0] != want || row[entry / 4 - 1] != want;
        } else {
            row[0] = row[entry / 4 - 1] = want;
        }
    }
    return wrong;
}

}  // namespace

// [readme]
using Model = unikv::presets::GptOss20B;  // SwaFullLayout and the published shapes
struct Policies : unikv::DefaultCachePolicies {
    using layout = Model::layout;
    using budget = unikv::SharedSWABudget;  // FULL and SWA budgeted jointly over the one arena
};
using ModelCache = unikv::Cache<Policies>;

int serve(ModelCache& cache, unikv::DefaultBackend::stream_ref compute, std::span<const unikv::TokenId> prompt) {
    cache.begin_step({.decode_tokens = 0});  // the running decodes' tokens are pre-charged here
    unikv::Admission a = cache.try_admit({.prompt = {prompt}, .max_new_tokens = 16});
    if (!a) return -1;  // a.refusal: which pool, pages short, reclaimable, blocked by transfers, locked
    if (a.load_id != 0) {  // its prefix is on host: loaded layer by layer
        cache.start_loading();  // the attention of layer l waits only on layer l's copy
        for (std::int32_t l = 0; l < cache.layers(); ++l) cache.wait_layer(compute, l);
        cache.controller().stream().synchronize();  // an engine would rather ack at its next step
        (void)cache.loading_check();
    }
    std::vector<unikv::VirtualToken> rows(static_cast<std::size_t>(a.prefix_length + a.extend_length));
    cache.prefix_rows(a.node, rows);  // the tree's rows of the cached prefix (no second match)
    if (!cache.alloc_rows(rows, a.prefix_length)) return -1;    // then the new tokens' own rows
    std::vector<unikv::PhysicalToken> physical(rows.size());
    cache.translate_full(rows, physical);  // (translate_swa likewise; device_tables() for device kernels)
    cache.sync_for_host();  // a host forward (this CPU backend) touches rows only after the queued moves
    const int wrong = forward(cache, physical, prompt, a.prefix_length);
    (void)cache.finish({prompt}, rows, std::move(a.lock));  // whole pages to the tree, the tail freed, unlocked
    return wrong;
}
// [/readme]

int main() {
    unikv::DefaultBackend backend;
    auto compute = backend.make_stream();
    ModelCache cache(backend,
                     {.arena = unikv::arena_config<Model>({.arena_bytes = std::size_t{64} << 20, .page_size = {16}}),
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
    std::printf("first serve: %d wrong rows; evicted %lld FULL pages (%d backups); host hit of %d tokens\n", first,
                static_cast<long long>(ev.pages_freed[Component::full]), ev.backed_up, hit.host_hit_length);
    std::printf("second serve: %d wrong rows; %d tokens now on device; accounting %s\n", again, served.device_length,
                healthy ? "healthy" : "BROKEN");
    const bool ok = first == 0 && again == 0 && hit.host_hit_length == 288 && served.device_length == 288 && healthy;
    std::puts(ok ? "engine walkthrough: ok" : "engine walkthrough: FAILED");
    return ok ? 0 : 1;
}

// The allocator's device page tables on a GPU: after allocations, frees, tombstones and an urgent flush that
// moves pages, device_tables() mirrors every host v2p, and the device gathers translate exactly like the host.
#include <doctest/doctest.h>

#include <type_traits>
#include <vector>

#include <unikv/backend/cuda_backend.cuh>
#include <unikv/pools/device_translate.cuh>
#include <unikv/pools/layouts.hpp>
#include <unikv/pools/unified_allocator.hpp>

using namespace unikv;

namespace {

using Alloc = UnifiedAllocator<TriPoolLayout, CudaBackend>;

template <class T>
std::vector<T> download(const T* device, std::size_t n) {
    std::vector<T> v(n);
    detail::cuda::check(cudaMemcpy(v.data(), device, n * sizeof(T), cudaMemcpyDefault), "cudaMemcpy");
    return v;
}

// Translates `in` on the device through `table` and returns the result (the stream is synchronized). The
// device arrays start `shift` ids past a 16-byte boundary (0: the kernel's vector path; else one by one).
template <class Out, class In>
std::vector<Out> device_translate(CudaBackend& backend, CudaBackend::stream_ref stream, const TranslationTable& table,
                                  const std::vector<In>& in, std::size_t shift = 0) {
    auto buf_in = backend.allocate_device((in.size() + shift) * sizeof(In));
    auto buf_out = backend.allocate_device((in.size() + shift) * sizeof(Out));
    In* const dev_in = reinterpret_cast<In*>(buf_in.data()) + shift;
    detail::cuda::check(cudaMemcpy(dev_in, in.data(), in.size() * sizeof(In), cudaMemcpyDefault), "cudaMemcpy");
    detail::cuda::check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");  // the pageable upload has landed
    const std::span<const In> din(dev_in, in.size());
    const std::span<Out> dout(reinterpret_cast<Out*>(buf_out.data()) + shift, in.size());
    const auto before = backend.counters().host_synchronizations;
    if constexpr (std::is_same_v<In, VirtualToken>) translate_tokens_async(table, din, dout, stream);
    else translate_pages_async(table, din, dout, stream);
    CHECK(backend.counters().host_synchronizations == before);
    stream.synchronize();
    return download(dout.data(), in.size());
}

}  // namespace

TEST_CASE("device_tables mirrors every v2p after moves, and device translation agrees with the host") {
    CudaBackend backend;
    auto stream = backend.make_stream();
    const ArenaConfig config{.model = {.full = {.layers = 1, .kv_heads = 1, .head_dim = 8, .dtype_bytes = 2},
                                       .swa = {.layers = 1, .kv_heads = 1, .head_dim = 8, .dtype_bytes = 2},
                                       .swa_window_tokens = 8,
                                       .mamba = {.layers = 1, .conv_state_bytes = 32, .temporal_state_bytes = 32}},
                             .page_sizes = {.full = {4}, .swa = {4}, .mamba = {1}},
                             .arena_bytes = 512 * 128};
    Alloc alloc(backend, config, stream);
    std::vector<VirtualPage> pages(90);
    REQUIRE(alloc.alloc(pages));
    std::vector<StateId> states(40);
    REQUIRE(alloc.alloc_state(states));
    std::vector<VirtualPage> freed, tombstoned;
    for (std::size_t i = 0; i < pages.size(); ++i) {
        if (i % 3 == 0) freed.push_back(pages[i]);
        else if (i % 5 == 1) tombstoned.push_back(pages[i]);
    }
    alloc.free(freed);
    alloc.free_swa(tombstoned);
    std::vector<StateId> freed_states;
    for (std::size_t i = 0; i < states.size(); i += 2) freed_states.push_back(states[i]);
    alloc.free_state(freed_states);
    const auto before = backend.counters();
    CHECK(alloc.flush(FlushMode::urgent).pages_moved > 0);
    const DeviceTables d = alloc.device_tables();
    CHECK(backend.counters().host_synchronizations == before.host_synchronizations);

    stream.ref().synchronize();
    for (Component c : {Component::full, Component::swa, Component::mamba}) {
        const TranslationTable& t = c == Component::full ? d.full : c == Component::swa ? d.swa : d.mamba;
        const auto host = alloc.page_table(c).v2p();
        CHECK(download(t.v2p, host.size()) == std::vector<std::int32_t>(host.begin(), host.end()));
    }

    // Every token of every page (live, freed or tombstoned), plus ids that must land on the sink.
    std::vector<VirtualToken> tokens{VirtualToken{-5}, VirtualToken{0}, VirtualToken{1 << 30}};
    for (VirtualPage v : pages) {
        for (std::int32_t r = 0; r < 4; ++r) tokens.emplace_back(v.value() * 4 + r);
    }
    std::vector<PhysicalToken> host_full(tokens.size()), host_swa(tokens.size());
    alloc.translate_full(tokens, host_full);
    alloc.translate_swa(tokens, host_swa);
    for (std::size_t shift : {0, 1, 3}) {
        CHECK(device_translate<PhysicalToken>(backend, stream, d.full, tokens, shift) == host_full);
        CHECK(device_translate<PhysicalToken>(backend, stream, d.swa, tokens, shift) == host_swa);
    }

    std::vector<PhysicalPage> host_pages(pages.size());
    alloc.translate_full(pages, host_pages);
    CHECK(device_translate<PhysicalPage>(backend, stream, d.full, pages) == host_pages);
    std::vector<PhysicalPage> host_slots(states.size());
    alloc.translate_state(states, host_slots);
    CHECK(device_translate<PhysicalPage>(backend, stream, d.mamba, states) == host_slots);
    CHECK(alloc.verify().empty());
}

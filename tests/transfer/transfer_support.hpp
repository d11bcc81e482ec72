#pragma once
// Shared by the transfer-controller tests: the allocator fixture of the allocator tests (manual HostBackend,
// markers per row written and read through translation), plus separate host pools and a controller, with
// host rows read back through a lease, so a copy that has not run, ran too early or read a moved page shows
// up as wrong row contents on the host or on the device.

#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include <unikv/host/separate_host_pools.hpp>
#include <unikv/transfer/transfer_controller.hpp>

#include "allocator/alloc_support.hpp"

namespace transfer_test {

using namespace alloc_test;

/// Arena size of the transfer tests, in 512-byte units: `layered_config(envelopes * 512, layers)`.
inline constexpr std::size_t envelopes = 64;

template <class L>
using Host = SeparateHostPools::impl<HostBackend, L>;
template <class L>
using Controller = TransferController<HostBackend, Host<L>, std::uint64_t>;

/// FULL and SWA entries of `layers` layers (K and V rows of 16 bytes each), Mamba slots of 64 bytes.
inline ArenaConfig layered_config(std::size_t arena_bytes, std::int32_t layers, std::int32_t page_size = 4) {
    return ArenaConfig{.model = {.full = {.layers = layers, .kv_heads = 1, .head_dim = 8, .dtype_bytes = 2},
                                 .swa = {.layers = layers, .kv_heads = 1, .head_dim = 8, .dtype_bytes = 2},
                                 .swa_window_tokens = 2 * page_size,
                                 .mamba = {.layers = 1, .conv_state_bytes = 32, .temporal_state_bytes = 32}},
                       .page_sizes = {.full = {page_size}, .swa = {page_size}, .mamba = {1}},
                       .arena_bytes = arena_bytes};
}

template <class L>
struct Rig : Fixture<L> {
    using Alloc = typename Fixture<L>::Alloc;
    static constexpr std::int32_t host_pages_each = 32;

    explicit Rig(const ArenaConfig& config, TransferOptions options = {})
        : Fixture<L>(config),
          host(this->backend, this->alloc.spec(), host_config(this->alloc.spec()), this->stream),
          ctl(this->backend, options) {}

    Host<L> host;
    Controller<L> ctl;

    static HostConfig host_config(const ArenaSpec& spec) {
        HostConfig config;
        for (Component c : all_components) config.pages[c] = spec[c].present ? host_pages_each : 0;
        return config;
    }

    std::vector<HostPage> host_pages(Component c, std::size_t n) {
        std::vector<HostPage> out(n);
        const HostRequest request{.component = c, .out = out};
        REQUIRE(static_cast<bool>(host.alloc(std::span(&request, 1))));
        return out;
    }
    /// The uniform word of row `row` of host page `h` of `c` (`torn_row` for mixed words).
    std::uint32_t host_row(Component c, HostPage h, std::int32_t row) {
        auto lease = host.lease();
        std::int32_t physical = -1;
        lease.physical(c, std::span(&h, 1), std::span(&physical, 1));
        const std::size_t entry = this->entry_bytes(c);
        return uniform_word(lease.region(c).data + static_cast<std::size_t>(physical) * host.page_bytes(c) +
                                static_cast<std::size_t>(row) * entry,
                            entry);
    }
    /// True when host page `host_pages[i]` holds the markers of device page (or state) `ids[i]`, `version`.
    bool host_holds(Component c, std::span<const HostPage> hp, std::span<const std::int32_t> ids,
                    std::uint32_t version = 0) {
        const std::int32_t rows = c == Component::mamba ? 1 : this->page_size();
        for (std::size_t i = 0; i < hp.size(); ++i) {
            for (std::int32_t r = 0; r < rows; ++r) {
                if (host_row(c, hp[i], r) != marker(c, ids[i], r, version)) return false;
            }
        }
        return true;
    }
    /// True when the device rows of `pages[i]` (through translation) hold the markers of `ids[i]`: where a
    /// load put them.
    bool device_holds(Component c, std::span<const VirtualPage> pages, std::span<const std::int32_t> ids,
                      std::uint32_t version = 0) const {
        for (std::size_t i = 0; i < pages.size(); ++i) {
            for (std::int32_t r = 0; r < this->page_size(); ++r) {
                const std::int32_t t = pages[i].value() * this->page_size() + r;
                if (this->read_physical_row(c, this->physical_row(c, t)) != marker(c, ids[i], r, version)) return false;
            }
        }
        return true;
    }
    /// The uniform word of layer `layer` of physical row `row` of `c` in the arena.
    std::uint32_t device_layer_word(Component c, std::int32_t row, std::int32_t layer) const {
        const EnvelopeSlice s = this->alloc.spec()[c].layer_slice(layer);
        return uniform_word(this->row(c, row) + s.offset, s.bytes);
    }
    /// Runs the transfer stream as far as it goes; returns the operations run.
    std::size_t run_transfers() {
        std::size_t n = 0;
        while (this->backend.run_next(ctl.stream())) ++n;
        return n;
    }
};

inline std::vector<std::int32_t> ids_of(std::span<const VirtualPage> pages) {
    std::vector<std::int32_t> out;
    for (VirtualPage v : pages) out.push_back(v.value());
    return out;
}
inline std::vector<std::int32_t> ids_of(std::span<const StateId> states) {
    std::vector<std::int32_t> out;
    for (StateId s : states) out.push_back(s.value());
    return out;
}

}  // namespace transfer_test

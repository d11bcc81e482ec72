#pragma once
// Shared fixtures for the allocator tests: a small model, an allocator on a manual HostBackend, and row
// markers written and read back through translation, so a copy that has not run yet, or a page reused too
// early, shows up as wrong row contents.

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include <unikv/backend/host_backend.hpp>
#include <unikv/pools/layouts.hpp>
#include <unikv/pools/unified_allocator.hpp>

#include "broken.hpp"
#include "row_words.hpp"

namespace alloc_test {

using namespace unikv;

/// The eager twin of `FullLayout` (not shipped: a dense model without a host tier), so the lone-pool eager path runs.
using EagerFullLayout = FullOnly<Pool<Component::full, EagerEndPool<Grow::down>>>;

/// FULL and SWA entries of 32 bytes (1 layer, 1 head, head_dim 8, bf16), Mamba slots of 64 bytes.
inline ArenaConfig small_config(std::size_t arena_bytes, std::int32_t page_size = 4, std::int32_t window = 8) {
    return ArenaConfig{.model = {.full = {.layers = 1, .kv_heads = 1, .head_dim = 8, .dtype_bytes = 2},
                                 .swa = {.layers = 1, .kv_heads = 1, .head_dim = 8, .dtype_bytes = 2},
                                 .swa_window_tokens = window,
                                 .mamba = {.layers = 1, .conv_state_bytes = 32, .temporal_state_bytes = 32}},
                       .page_sizes = {.full = {page_size}, .swa = {page_size}, .mamba = {1}},
                       .arena_bytes = arena_bytes};
}

/// The arena most allocator tests use with `small_config`: 64 envelopes of 128 bytes for both FULL and SWA.
inline constexpr std::size_t arena_bytes = 64 * 128;

/// The key the allocator tests give their loads.
inline constexpr TransferKey load_key{.owner = 1, .direction = TransferDirection::load};

/// A marker naming (component, virtual id, row in page, version); every 4-byte word of the row holds it.
constexpr std::uint32_t marker(Component c, std::int32_t id, std::int32_t row, std::uint32_t version = 0) {
    return ((version & 0xFu) << 28) | (static_cast<std::uint32_t>(c) << 26) |
           ((static_cast<std::uint32_t>(id) & 0xFFFFFu) << 6) | (static_cast<std::uint32_t>(row) & 0x3Fu);
}
using test_rows::torn_row;  // what a row whose words disagree (a torn or partial copy) reads as
using test_rows::uniform_word;

template <class L>
struct Fixture {
    using Alloc = UnifiedAllocator<L, HostBackend>;

    explicit Fixture(const ArenaConfig& config, AllocatorOptions options = {})
        : alloc(backend, config, stream, options) {}

    HostBackend backend{{.mode = ExecutionMode::manual}};
    HostBackend::Stream stream = backend.make_stream();
    Alloc alloc;

    [[nodiscard]] std::int32_t page_size() const { return alloc.spec()[Component::full].page_size; }
    [[nodiscard]] std::size_t entry_bytes(Component c) const { return alloc.spec()[c].entry_bytes; }

    /// Runs the allocator's stream as far as it can go; true when it is empty afterwards.
    bool drain() {
        while (backend.run_next(stream)) {
        }
        return backend.queued(stream) == 0;
    }

    [[nodiscard]] std::byte* row(Component c, std::int32_t physical_row) const {
        return alloc.region().data + static_cast<std::size_t>(physical_row) * entry_bytes(c);
    }
    void write_physical_row(Component c, std::int32_t physical_row, std::uint32_t value) {
        test_rows::fill_row(row(c, physical_row), entry_bytes(c), value);
    }
    [[nodiscard]] std::uint32_t read_physical_row(Component c, std::int32_t physical_row) const {
        return uniform_word(row(c, physical_row), entry_bytes(c));
    }

    /// The physical row of virtual token `t` of component `c` (FULL/SWA) or of state `t` (Mamba).
    [[nodiscard]] std::int32_t physical_row(Component c, std::int32_t t) const {
        if (c == Component::mamba) {
            if constexpr (Alloc::has_mamba) {
                const StateId in{t};
                PhysicalPage out;
                alloc.translate_state(std::span(&in, 1), std::span(&out, 1));
                return out.value();
            }
            return -1;
        }
        const VirtualToken in{t};
        PhysicalToken out;
        if (c == Component::full) {
            alloc.translate_full(std::span(&in, 1), std::span(&out, 1));
        } else {
            if constexpr (Alloc::has_swa) alloc.translate_swa(std::span(&in, 1), std::span(&out, 1));
        }
        return out.value();
    }

    /// Writes the markers of every row of virtual page `v` in component `c` (a state slot for Mamba).
    void write_page(Component c, std::int32_t v, std::uint32_t version = 0) {
        const std::int32_t rows = c == Component::mamba ? 1 : page_size();
        for (std::int32_t r = 0; r < rows; ++r) {
            const std::int32_t t = c == Component::mamba ? v : v * page_size() + r;
            write_physical_row(c, physical_row(c, t), marker(c, v, r, version));
        }
    }
    /// True when every row of virtual page `v` in `c` reads back its marker through translation.
    [[nodiscard]] bool page_holds(Component c, std::int32_t v, std::uint32_t version = 0) const {
        const std::int32_t rows = c == Component::mamba ? 1 : page_size();
        for (std::int32_t r = 0; r < rows; ++r) {
            const std::int32_t t = c == Component::mamba ? v : v * page_size() + r;
            if (read_physical_row(c, physical_row(c, t)) != marker(c, v, r, version)) return false;
        }
        return true;
    }
    void write_pages(Component c, std::span<const VirtualPage> pages, std::uint32_t version = 0) {
        for (VirtualPage v : pages) write_page(c, v.value(), version);
    }
    [[nodiscard]] bool pages_hold(Component c, std::span<const VirtualPage> pages, std::uint32_t version = 0) const {
        for (VirtualPage v : pages) {
            if (!page_holds(c, v.value(), version)) return false;
        }
        return true;
    }
    /// Writes FULL (and SWA, when present) markers of each page.
    void write_kv(std::span<const VirtualPage> pages, std::uint32_t version = 0) {
        write_pages(Component::full, pages, version);
        if constexpr (Alloc::has_swa) write_pages(Component::swa, pages, version);
    }
    [[nodiscard]] bool kv_holds(std::span<const VirtualPage> pages, std::uint32_t version = 0) const {
        bool ok = pages_hold(Component::full, pages, version);
        if constexpr (Alloc::has_swa) ok = ok && pages_hold(Component::swa, pages, version);
        return ok;
    }

    /// The physical pages of `pages` in FULL or SWA.
    [[nodiscard]] std::vector<PhysicalPage> physical_pages(Component c, std::span<const VirtualPage> pages) const {
        std::vector<PhysicalPage> out(pages.size());
        if (c == Component::full) alloc.translate_full(pages, out);
        if constexpr (Alloc::has_swa) {
            if (c == Component::swa) alloc.translate_swa(pages, out);
        }
        return out;
    }
    /// The markers a load writes into the SWA rows of `pages` (version 7 marks "loaded from host").
    [[nodiscard]] std::vector<std::uint32_t> loaded_rows(std::span<const VirtualPage> pages) const {
        std::vector<std::uint32_t> rows;
        for (VirtualPage v : pages) {
            for (std::int32_t r = 0; r < page_size(); ++r) rows.push_back(marker(Component::swa, v.value(), r, 7));
        }
        return rows;
    }

    /// Allocates `n` pages (REQUIREs success) and writes their markers after draining the stream.
    std::vector<VirtualPage> alloc_kv(std::int32_t n, std::uint32_t version = 0) {
        std::vector<VirtualPage> pages(static_cast<std::size_t>(n));
        const AllocResult r = alloc.alloc(pages);
        REQUIRE(static_cast<bool>(r));
        REQUIRE(drain());
        write_kv(pages, version);
        return pages;
    }
    std::vector<StateId> alloc_states(std::int32_t n) {
        std::vector<StateId> states(static_cast<std::size_t>(n));
        const AllocResult r = alloc.alloc_state(states);
        REQUIRE(static_cast<bool>(r));
        REQUIRE(drain());
        for (StateId s : states) write_page(Component::mamba, s.value());
        return states;
    }
    [[nodiscard]] bool states_hold(std::span<const StateId> states) const {
        for (StateId s : states) {
            if (!page_holds(Component::mamba, s.value())) return false;
        }
        return true;
    }

    /// The allocator's broken invariants, one per line (empty when healthy), for readable failures.
    [[nodiscard]] std::string broken() const { return test_verify::broken(alloc); }
};

/// A host<->device transfer engine for tests: its own stream, a pinned host buffer, and an event per transfer.
struct Transfers {
    explicit Transfers(HostBackend& b, std::size_t host_bytes)
        : backend(b), stream(b.make_stream()), host(b.allocate_pinned(host_bytes)) {}
    HostBackend& backend;
    HostBackend::Stream stream;
    HostBackend::PinnedBuffer host;

    /// Queues a host-to-device copy of `rows` (one marker per row, `entry_bytes` each, `page_size` rows per
    /// page) into physical pages `dst` of a pool with `page_bytes` envelopes; returns its done event.
    HostBackend::Event load(device_region_ref arena, std::span<const PhysicalPage> dst, std::size_t page_bytes, std::size_t entry_bytes,
                        const std::vector<std::uint32_t>& rows, std::size_t first_host_page = 0) {
        std::vector<std::int32_t> src_pages;
        std::vector<std::int32_t> dst_pages;
        const std::size_t per_page = page_bytes / entry_bytes;
        for (std::size_t i = 0; i < dst.size(); ++i) {
            const std::size_t hp = first_host_page + i;
            for (std::size_t r = 0; r < per_page; ++r) {
                std::byte* row = host.data() + hp * page_bytes + r * entry_bytes;
                const std::uint32_t value = rows[i * per_page + r];
                test_rows::fill_row(row, entry_bytes, value);
            }
            src_pages.push_back(static_cast<std::int32_t>(hp));
            dst_pages.push_back(dst[i].value());
        }
        backend.copy_pages_async(host.region(), src_pages, arena, dst_pages, page_bytes, stream);
        HostBackend::Event done = backend.make_event();
        done.ref().record(stream);
        return done;
    }
    /// Queues a device-to-host copy of physical pages `src` into host pages from `first_host_page`.
    HostBackend::Event write(device_region_ref arena, std::span<const PhysicalPage> src, std::size_t page_bytes,
                         std::size_t first_host_page = 0) {
        std::vector<std::int32_t> src_pages;
        std::vector<std::int32_t> dst_pages;
        for (std::size_t i = 0; i < src.size(); ++i) {
            src_pages.push_back(src[i].value());
            dst_pages.push_back(static_cast<std::int32_t>(first_host_page + i));
        }
        backend.copy_pages_async(arena, src_pages, host.region(), dst_pages, page_bytes, stream);
        HostBackend::Event done = backend.make_event();
        done.ref().record(stream);
        return done;
    }
    /// Runs this stream's queue as far as it goes.
    void run() {
        while (backend.run_next(stream)) {
        }
    }
};

/// True when host pages `first_host_page...` of `host` (envelopes of `rows_per_page` rows of 32 bytes) hold the
/// markers of `pages` of component `c` at `version`, in order.
inline bool host_rows_hold(const HostBackend::PinnedBuffer& host, Component c, std::span<const VirtualPage> pages,
                           std::uint32_t version = 0, std::int32_t rows_per_page = 4, std::size_t first_host_page = 0) {
    const std::size_t page_bytes = static_cast<std::size_t>(rows_per_page) * 32;
    for (std::size_t k = 0; k < pages.size(); ++k) {
        for (std::int32_t r = 0; r < rows_per_page; ++r) {
            std::uint32_t word = 0;
            std::memcpy(&word, host.data() + (first_host_page + k) * page_bytes + static_cast<std::size_t>(r) * 32, 4);
            if (word != marker(c, pages[k].value(), r, version)) return false;
        }
    }
    return true;
}

/// The device mirror of component `c` among `d` (on HostBackend the "device" is host memory, so tests read it).
inline const TranslationTable& table_of(const DeviceTables& d, Component c) {
    return c == Component::full ? d.full : c == Component::swa ? d.swa : d.mamba;
}
/// The mirror's v2p entries, sink and sentinel included.
inline std::vector<std::int32_t> mirror_entries(const TranslationTable& d) { return {d.v2p, d.v2p + d.sentinel + 1}; }
/// True when the mirror holds exactly the host table's v2p.
inline bool mirror_matches(const TranslationTable& d, const PageTable& t) {
    return d.v2p != nullptr && d.sentinel == static_cast<std::uint32_t>(t.num_virtual()) &&
           std::equal(t.v2p().begin(), t.v2p().end(), d.v2p);
}

/// An arena byte snapshot, to prove a call changed no byte.
inline std::vector<std::byte> snapshot(device_region_ref r) { return {r.data, r.data + r.size}; }
inline bool same_bytes(device_region_ref r, const std::vector<std::byte>& s) {
    return s.size() == r.size && std::memcmp(s.data(), r.data, r.size) == 0;
}

/// HostBackend counters are equal (no sync, no wait, no copy happened in between).
inline bool same_counters(const BackendCounters& a, const BackendCounters& b) {
    return a.host_synchronizations == b.host_synchronizations && a.stream_waits == b.stream_waits &&
           a.copies_queued == b.copies_queued && a.bytes_copied == b.bytes_copied;
}

inline std::vector<VirtualPage> slice(const std::vector<VirtualPage>& v, std::size_t first, std::size_t n) {
    return {v.begin() + static_cast<std::ptrdiff_t>(first), v.begin() + static_cast<std::ptrdiff_t>(first + n)};
}

/// Runs one of every hot-path call on a fixture holding the 4-page rows `a` and `b`: free, alloc, alloc_extend,
/// translate, capacity queries, and where the layout has them tombstone, reserve, bind, cancel, and state alloc,
/// translate and free. None may touch the backend (the callers check the counters).
template <class L>
void run_hot_paths(Fixture<L>& f, std::span<const VirtualPage> a, std::span<const VirtualPage> b) {
    using A = typename Fixture<L>::Alloc;
    f.alloc.free(a.first(2));
    std::vector<VirtualPage> c(3);
    REQUIRE(f.alloc.alloc(c));
    std::vector<VirtualToken> tokens{VirtualToken{b[0].value() * f.page_size()}, VirtualToken{-3}};
    std::vector<PhysicalToken> rows(2);
    f.alloc.translate_full(tokens, rows);
    (void)f.alloc.available_size();
    (void)f.alloc.schedulable_available_size();
    CHECK_FALSE(f.alloc.moves_blocked());
    if constexpr (A::has_swa) {
        f.alloc.translate_swa(tokens, rows);
        f.alloc.free_swa(b.first(2));
        ReserveResult r = f.alloc.alloc_physical(Component::swa, 2);
        REQUIRE(r);
        f.alloc.bind_swa(b.first(2), r.reservation);
        f.alloc.cancel(std::move(r.reservation));
    }
    if constexpr (A::has_mamba) {
        std::vector<StateId> s(3);
        REQUIRE(f.alloc.alloc_state(s));
        std::vector<PhysicalPage> slots(3);
        f.alloc.translate_state(s, slots);
        f.alloc.free_state(s);
    }
    std::vector<std::int32_t> seq{6, 9};
    std::vector<std::int32_t> prefix{0, 0};
    std::vector<VirtualToken> last{VirtualToken{}, VirtualToken{}};
    std::vector<VirtualToken> out(15);
    REQUIRE(f.alloc.alloc_extend({.prefix_lens = prefix, .seq_lens = seq, .last_locs = last}, out));
}

}  // namespace alloc_test

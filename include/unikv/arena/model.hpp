#pragma once
/// \file
/// The runtime description of a hybrid model and of its arena (`ArenaConfig`), and the sub-pool geometry
/// computed from it (`ArenaSpec`, `SubPoolSpec`).
///
/// A token's *entry* of an attention pool lays K and V of every layer back to back, token-major:
/// `[K0|V0|K1|V1|...|pad]`, aligned up to `entry_align_bytes`. A Mamba *slot* lays out the conv state and the
/// temporal state of every Mamba layer the same way. A *page envelope* is `page_size` consecutive entries:
/// the unit every move, zeroing and host transfer copies. Physical page `P` of a pool lives at bytes
/// `[P * page_bytes, (P + 1) * page_bytes)` of the one arena; pools use different strides over the same
/// bytes and never overlap because the allocator keeps their byte frontiers ordered.
///
/// Bytes `[0, sink_floor_bytes)` are the sink: page 0 of every pool lies inside it, padding writes land there,
/// and no page below a pool's `min_page` is ever handed out.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string_view>

#include <unikv/component.hpp>
#include <unikv/backend/page_copy.hpp>
#include <unikv/error.hpp>
#include <unikv/ids.hpp>

namespace unikv {

/// The KV shape of the FULL or SWA attention layers of a model (per tensor-parallel rank).
struct AttentionShape {
    std::int32_t layers = 0;       ///< attention layers of this kind
    std::int32_t kv_heads = 0;     ///< KV heads per rank
    std::int32_t head_dim = 0;     ///< K head dimension
    std::int32_t v_head_dim = 0;   ///< V head dimension; 0 means `head_dim`
    std::int32_t dtype_bytes = 0;  ///< bytes per element (2 for bf16, 1 for fp8)
};

/// The per-slot state of the Mamba layers of a model.
struct MambaShape {
    std::int32_t layers = 0;                ///< Mamba layers
    std::size_t conv_state_bytes = 0;      ///< conv state bytes of one layer for one slot
    std::size_t temporal_state_bytes = 0;  ///< temporal (SSM) state bytes of one layer for one slot
};

/// What the arena needs to know about the model. Only the components present in the layout are read.
struct ModelDescription {
    AttentionShape full{};
    AttentionShape swa{};
    std::int32_t swa_window_tokens = 0;  ///< the sliding window W, in tokens
    MambaShape mamba{};
};

/// Tokens per page of each pool. Mamba must stay 1.
struct PageSizes {
    PageSize full{1};
    PageSize swa{1};
    PageSize mamba{1};
};

/// Runtime configuration of one arena. Use designated initializers; every field has a meaning in its name.
struct ArenaConfig {
    ModelDescription model{};
    PageSizes page_sizes{};
    std::size_t arena_bytes = 0;         ///< size of the one byte buffer shared by every pool
    std::size_t row_align_bytes = 16;    ///< every K row, V row and Mamba state row must be a multiple
    std::size_t entry_align_bytes = 16;  ///< entries (and Mamba slots) are padded up to a multiple
};

/// The geometry of one sub-pool over the arena.
struct SubPoolSpec {
    Component component = Component::full;
    bool present = false;
    std::int32_t layers = 0;
    std::size_t k_row_bytes = 0;  ///< attention: K row of one layer; Mamba: conv state of one layer
    std::size_t v_row_bytes = 0;  ///< attention: V row of one layer; Mamba: temporal state of one layer
    std::size_t entry_bytes = 0;  ///< one token (one Mamba slot), aligned
    std::int32_t page_size = 1;   ///< tokens per page
    std::size_t page_bytes = 0;   ///< the page envelope: `page_size * entry_bytes`
    std::int32_t num_pages = 0;   ///< physical page index limit: `arena_bytes / page_bytes`
    std::int32_t min_page = 1;    ///< first page above the sink floor; lower pages are never handed out

    /// The bytes of `layer` (K then V) in every token of an envelope, for per-layer copies.
    [[nodiscard]] constexpr EnvelopeSlice layer_slice(std::int32_t layer) const noexcept {
        const std::size_t row = k_row_bytes + v_row_bytes;
        return {.offset = static_cast<std::size_t>(layer) * row,
                .bytes = row,
                .stride = entry_bytes,
                .count = static_cast<std::size_t>(page_size)};
    }
    /// Pages a pool can ever hand out.
    [[nodiscard]] constexpr std::int32_t usable_pages() const noexcept { return std::max(0, num_pages - min_page); }
};

/// The geometry of the whole arena.
struct ArenaSpec {
    std::size_t arena_bytes = 0;
    std::size_t sink_floor_bytes = 0;  ///< bytes below this are the sink
    std::size_t min_arena_bytes = 0;   ///< the bs=1 feasibility floor the arena was checked against
    per_component<SubPoolSpec> pools{};  ///< every component's pool; `present` says which the layout has

    /// The pool of component `c` (absent components have `present == false`).
    [[nodiscard]] constexpr const SubPoolSpec& operator[](Component c) const noexcept { return pools[c]; }
    /// The layers a load is copied in, one event each: the most layers of the FULL and SWA pools (1 with
    /// Mamba alone, whose states load whole). O(1).
    [[nodiscard]] constexpr std::int32_t load_layers() const noexcept {
        std::int32_t layers = 1;
        for (Component c : {Component::full, Component::swa}) {
            if (pools[c].present && pools[c].layers > layers) layers = pools[c].layers;
        }
        return layers;
    }
};

namespace detail {

[[nodiscard]] constexpr std::size_t round_up(std::size_t v, std::size_t a) noexcept { return (v + a - 1) / a * a; }
[[nodiscard]] constexpr std::size_t ceil_div(std::size_t v, std::size_t d) noexcept { return (v + d - 1) / d; }

inline void check_attention_shape(const AttentionShape& s, Component c, std::size_t row_align) {
    const std::string_view name = to_string(c);
    if (!(s.layers > 0 && s.kv_heads > 0 && s.head_dim > 0 && s.dtype_bytes > 0 && s.v_head_dim >= 0))
        misuse("make_arena_spec", "model.", name, " needs layers, kv_heads, head_dim and dtype_bytes > 0 (got layers ", s.layers,
                  ", kv_heads ", s.kv_heads, ", head_dim ", s.head_dim, ", dtype_bytes ", s.dtype_bytes,
                  "); describe the ", name, " attention layers of the model");
    const std::size_t k_row = static_cast<std::size_t>(s.kv_heads) * static_cast<std::size_t>(s.head_dim) *
                              static_cast<std::size_t>(s.dtype_bytes);
    const std::size_t v_dim = static_cast<std::size_t>(s.v_head_dim == 0 ? s.head_dim : s.v_head_dim);
    const std::size_t v_row = static_cast<std::size_t>(s.kv_heads) * v_dim * static_cast<std::size_t>(s.dtype_bytes);
    if (k_row % row_align != 0 || v_row % row_align != 0)
        misuse("make_arena_spec", "model.", name, " K row of ", k_row,
                  " bytes or V row of ", v_row, " bytes is not a multiple of row_align_bytes ", row_align,
                  "; change kv_heads / head_dim so each row is aligned, or lower row_align_bytes");
}

inline SubPoolSpec attention_pool(Component c, const AttentionShape& s, std::int32_t page_size,
                                  std::size_t entry_align) {
    SubPoolSpec p;
    p.component = c;
    p.present = true;
    p.layers = s.layers;
    const auto heads_bytes = static_cast<std::size_t>(s.kv_heads) * static_cast<std::size_t>(s.dtype_bytes);
    p.k_row_bytes = heads_bytes * static_cast<std::size_t>(s.head_dim);
    p.v_row_bytes = heads_bytes * static_cast<std::size_t>(s.v_head_dim == 0 ? s.head_dim : s.v_head_dim);
    p.entry_bytes = round_up((p.k_row_bytes + p.v_row_bytes) * static_cast<std::size_t>(s.layers), entry_align);
    p.page_size = page_size;
    return p;
}

}  // namespace detail

/// Computes the sub-pool geometry of an arena holding the components in `present`, and refuses a bad
/// configuration with a `logic_error` that says what to change: zero sizes, misaligned rows, a Mamba page
/// size other than 1, physical ids that overflow int32, or an arena below the bs=1 floor.
///
/// The bs=1 floor is the sink, plus for SWA one window plus one page (FULL is charged the same tokens, since
/// every SWA token has a FULL entry), or one FULL page without SWA, plus three Mamba slots (one active, two
/// checkpoints), plus one largest page envelope of rounding slack per boundary between pools.
[[nodiscard]] inline ArenaSpec make_arena_spec(const ArenaConfig& config, ComponentMask present) {
    UNIKV_EXPECTS(present.has(Component::full), "a layout without a FULL pool cannot mint virtual page ids; add Component::full");
    UNIKV_EXPECTS(config.row_align_bytes > 0 && config.entry_align_bytes > 0,
                  "row_align_bytes and entry_align_bytes must be positive");
    UNIKV_EXPECTS(config.arena_bytes > 0, "arena_bytes is 0; give the arena its byte budget");
    const PageSizes& ps = config.page_sizes;
    UNIKV_EXPECTS(ps.full.tokens > 0 && ps.swa.tokens > 0, "page sizes must be >= 1 token (full ", ps.full.tokens,
                  ", swa ", ps.swa.tokens, ")");
    ArenaSpec spec;
    spec.arena_bytes = config.arena_bytes;
    for (Component c : all_components) spec.pools[c].component = c;

    detail::check_attention_shape(config.model.full, Component::full, config.row_align_bytes);
    spec.pools[Component::full] =
        detail::attention_pool(Component::full, config.model.full, ps.full.tokens, config.entry_align_bytes);
    if (present.has(Component::swa)) {
        detail::check_attention_shape(config.model.swa, Component::swa, config.row_align_bytes);
        UNIKV_EXPECTS(ps.swa.tokens == ps.full.tokens, "page_sizes.swa (", ps.swa.tokens,
                      ") differs from page_sizes.full (", ps.full.tokens,
                      "); SWA binds FULL's virtual pages, so both must use the same page size");
        UNIKV_EXPECTS(config.model.swa_window_tokens > 0,
                      "model.swa_window_tokens is 0; set the sliding window W of the SWA layers");
        spec.pools[Component::swa] =
            detail::attention_pool(Component::swa, config.model.swa, ps.swa.tokens, config.entry_align_bytes);
    }
    if (present.has(Component::mamba)) {
        const MambaShape& m = config.model.mamba;
        UNIKV_EXPECTS(ps.mamba.tokens == 1, "the Mamba page size is ", ps.mamba.tokens,
                      "; Mamba state slots are whole per request, set page_sizes.mamba to 1");
        UNIKV_EXPECTS(m.layers > 0 && m.conv_state_bytes > 0 && m.temporal_state_bytes > 0,
                      "model.mamba needs layers, conv_state_bytes and temporal_state_bytes > 0 (got layers ",
                      m.layers, ", conv ", m.conv_state_bytes, ", temporal ", m.temporal_state_bytes, ")");
        UNIKV_EXPECTS(m.conv_state_bytes % config.row_align_bytes == 0 &&
                          m.temporal_state_bytes % config.row_align_bytes == 0,
                      "model.mamba conv state of ", m.conv_state_bytes, " bytes or temporal state of ",
                      m.temporal_state_bytes, " bytes is not a multiple of row_align_bytes ", config.row_align_bytes,
                      "; pad the state rows or lower row_align_bytes");
        SubPoolSpec& p = spec.pools[Component::mamba];
        p.present = true;
        p.layers = m.layers;
        p.k_row_bytes = m.conv_state_bytes;
        p.v_row_bytes = m.temporal_state_bytes;
        p.entry_bytes = detail::round_up((m.conv_state_bytes + m.temporal_state_bytes) *
                                             static_cast<std::size_t>(m.layers),
                                         config.entry_align_bytes);
        p.page_size = 1;
    }

    std::size_t floor = 0;
    std::size_t members = 0;
    for (SubPoolSpec& p : spec.pools) {
        if (!p.present) continue;
        ++members;
        p.page_bytes = p.entry_bytes * static_cast<std::size_t>(p.page_size);
        floor = std::max(floor, p.page_bytes);
    }
    spec.sink_floor_bytes = floor;
    constexpr auto id_limit = static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max() - 1);
    for (SubPoolSpec& p : spec.pools) {
        if (!p.present) continue;
        const std::size_t pages = config.arena_bytes / p.page_bytes;
        UNIKV_EXPECTS(pages * static_cast<std::size_t>(p.page_size) <= id_limit, "the ", to_string(p.component),
                      " pool would have ", pages * static_cast<std::size_t>(p.page_size),
                      " token slots, more than int32 ids can name; use a smaller arena_bytes or split the arena");
        p.num_pages = static_cast<std::int32_t>(pages);
        p.min_page = static_cast<std::int32_t>(detail::ceil_div(floor, p.page_bytes));
    }

    const SubPoolSpec& full = spec[Component::full];
    std::size_t need = floor + (members - 1) * floor;
    if (present.has(Component::swa)) {
        const SubPoolSpec& swa = spec[Component::swa];
        const auto window = static_cast<std::size_t>(config.model.swa_window_tokens);
        need += (detail::ceil_div(window, static_cast<std::size_t>(swa.page_size)) + 1) * swa.page_bytes;
        need += detail::ceil_div(window + static_cast<std::size_t>(swa.page_size), static_cast<std::size_t>(full.page_size)) *
                full.page_bytes;
    } else {
        need += full.page_bytes;
    }
    if (present.has(Component::mamba)) need += 3 * spec[Component::mamba].page_bytes;
    spec.min_arena_bytes = need;
    UNIKV_EXPECTS(config.arena_bytes >= need, "arena_bytes ", config.arena_bytes,
                  " cannot hold one worst-case request (the bs=1 floor is ", need,
                  " bytes: sink, one SWA window + 1 page, 3 Mamba slots, page rounding); raise arena_bytes to at least ",
                  need, " or use smaller pages / a smaller window");
    return spec;
}

}  // namespace unikv

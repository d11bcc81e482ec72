#pragma once
/// \file
/// The KV-cache components that share the arena (`Component`) and the direction an end pool grows in
/// (`Grow`). Light on purpose: layouts, specs, pools and the tree all name components.

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace unikv {

/// One kind of KV-cache state. Each present component has its own sub-pool in the arena.
enum class Component : std::uint8_t {
    full,   ///< full-attention KV; owns the virtual page ids
    swa,    ///< sliding-window-attention KV; binds FULL's virtual page ids
    mamba,  ///< recurrent (Mamba/SSM) state slots; owns its own ids, page size 1
};

/// Number of `Component` values (for per-component arrays).
inline constexpr std::size_t component_count = 3;

/// The array index of `c`.
[[nodiscard]] constexpr std::size_t index_of(Component c) noexcept { return static_cast<std::size_t>(c); }

/// "full", "swa" or "mamba", for messages.
[[nodiscard]] constexpr std::string_view to_string(Component c) noexcept {
    switch (c) {
        case Component::full: return "full";
        case Component::swa: return "swa";
        case Component::mamba: return "mamba";
    }
    return "unknown";
}

/// The direction an end pool grows in, in byte order of the arena.
enum class Grow : std::uint8_t {
    up,    ///< from the low bytes toward the high bytes (the first pool of a layout)
    down,  ///< from the high bytes toward the low bytes (the last pool of a layout)
};

/// Which side of a floating pool: the low bytes (toward the up end) or the high bytes (toward the down end).
enum class Side : std::uint8_t { low, high };

}  // namespace unikv

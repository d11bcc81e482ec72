#pragma once
/// \file
/// The one component vocabulary of unikv: the kinds of KV-cache state that share the arena (`Component`), sets
/// of them (`ComponentMask`), arrays indexed by them (`per_component<T>`), amounts of one pool (`Pages`), and the
/// directions pools grow in (`Grow`, `Side`). Layouts, specs, pools, capacity demands and the tree all speak it, so "the tree's
/// components match the layout's pools" is one `ComponentMask` comparison. Light on purpose.

#include <array>
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

/// Every component, in index order (for loops over `per_component` entries).
inline constexpr std::array<Component, component_count> all_components{Component::full, Component::swa,
                                                                       Component::mamba};

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

/// A set of components as a bit mask (bit `index_of(c)`): a layout's pools, a tree's components, a lock scope.
class ComponentMask {
public:
    /// The empty mask.
    constexpr ComponentMask() noexcept = default;
    /// The mask with every component.
    [[nodiscard]] static constexpr ComponentMask all() noexcept { return ComponentMask{0b111}; }
    /// The mask with one component.
    [[nodiscard]] static constexpr ComponentMask of(Component c) noexcept {
        return ComponentMask{static_cast<std::uint8_t>(1u << index_of(c))};
    }
    /// True when `c` is in the mask.
    [[nodiscard]] constexpr bool has(Component c) const noexcept { return (bits_ >> index_of(c)) & 1u; }
    /// The mask with `c` added.
    [[nodiscard]] constexpr ComponentMask with(Component c) const noexcept {
        return ComponentMask{static_cast<std::uint8_t>(bits_ | (1u << index_of(c)))};
    }
    /// The mask without `c`.
    [[nodiscard]] constexpr ComponentMask without(Component c) const noexcept {
        return ComponentMask{static_cast<std::uint8_t>(bits_ & ~(1u << index_of(c)))};
    }
    /// The intersection of two masks.
    [[nodiscard]] constexpr ComponentMask operator&(ComponentMask o) const noexcept {
        return ComponentMask{static_cast<std::uint8_t>(bits_ & o.bits_)};
    }
    /// The union of two masks.
    [[nodiscard]] constexpr ComponentMask operator|(ComponentMask o) const noexcept {
        return ComponentMask{static_cast<std::uint8_t>(bits_ | o.bits_)};
    }
    /// True when no component is in the mask.
    [[nodiscard]] constexpr bool empty() const noexcept { return bits_ == 0; }
    /// Number of components in the mask.
    [[nodiscard]] constexpr std::size_t size() const noexcept {
        return static_cast<std::size_t>((bits_ & 1u) + ((bits_ >> 1) & 1u) + ((bits_ >> 2) & 1u));
    }
    /// The raw bits (bit i = component with index i).
    [[nodiscard]] constexpr std::uint8_t bits() const noexcept { return bits_; }
    friend constexpr bool operator==(ComponentMask, ComponentMask) noexcept = default;

    /// The bits; public only so that a mask is a structural type, usable as a template argument
    /// (`tree_core_t<Core, Mask>`). Read it through `bits()` and build masks with `of` / `with`.
    std::uint8_t bits_ = 0;

private:
    constexpr explicit ComponentMask(std::uint8_t bits) noexcept : bits_(bits) {}
};

/// One `T` per component, indexed by `Component`: per-pool demands, sizes and counters. An aggregate, so
/// `per_component<int>{{1, 2, 3}}` lists FULL, SWA and Mamba in that order.
template <class T>
struct per_component {
    std::array<T, component_count> values{};

    [[nodiscard]] constexpr T& operator[](Component c) noexcept { return values[index_of(c)]; }
    [[nodiscard]] constexpr const T& operator[](Component c) const noexcept { return values[index_of(c)]; }
    [[nodiscard]] constexpr auto begin() noexcept { return values.begin(); }
    [[nodiscard]] constexpr auto end() noexcept { return values.end(); }
    [[nodiscard]] constexpr auto begin() const noexcept { return values.begin(); }
    [[nodiscard]] constexpr auto end() const noexcept { return values.end(); }
    friend constexpr bool operator==(const per_component&, const per_component&) = default;
};

/// A number of pages of one component's pool: FULL or SWA pages of the arena's page size in tokens, or Mamba
/// state slots (a Mamba page is one state). The one unit of the cache's surface: what an eviction asks and frees,
/// what an allocation, a host allocation or a load-back misses, what a budget counts and a refusal reports. The
/// tree alone counts its own units (tokens; states for Mamba), and `Cache` converts at its one door to it.
struct Pages {
    Component component = Component::full;
    std::int64_t count = 0;
    friend constexpr bool operator==(const Pages&, const Pages&) = default;
};

/// The direction an end pool grows in, in byte order of the arena.
enum class Grow : std::uint8_t {
    up,    ///< from the low bytes toward the high bytes (the first pool of a layout)
    down,  ///< from the high bytes toward the low bytes (the last pool of a layout)
};

/// Which side of a floating pool: the low bytes (toward the up end) or the high bytes (toward the down end).
enum class Side : std::uint8_t { low, high };

}  // namespace unikv

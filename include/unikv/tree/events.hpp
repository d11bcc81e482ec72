#pragma once
/// \file
/// KV events: what became cached or stopped being cached, per component and tier, so an engine or a router can
/// mirror the tree's contents. Recorded only with `EventMode::record`.
///
/// An event covers one node's token range `[start, start + length)` of the prefix in namespace `ns`. Prefixes are
/// identified by a page-chained hash that does not depend on how the tree split its nodes: `hash` is the hash of
/// the prefix that ends at `start + length`, `parent_hash` of the prefix that ends at `start`. A node split emits
/// nothing (the cached contents do not change); a later removal names the smaller range.

#include <cstdint>

#include <unikv/tree/components.hpp>
#include <unikv/tree/keys.hpp>
#include <unikv/tree/options.hpp>

namespace unikv {

/// Whether data appeared or disappeared.
enum class EventKind : std::uint8_t {
    stored,   ///< the range's data of `component` is now cached in `tier`
    removed,  ///< the range's data of `component` is no longer cached in `tier`
};

/// One KV event.
struct KvEvent {
    /// Stored or removed.
    EventKind kind = EventKind::stored;
    /// The component whose data changed.
    Component component = Component::full;
    /// The tier whose data changed.
    Tier tier = Tier::device;
    /// The key namespace.
    KeyNamespace ns{};
    /// First token position of the range.
    std::int32_t start = 0;
    /// Tokens in the range (a whole number of pages).
    std::int32_t length = 0;
    /// Page-chained hash of the prefix `[0, start)`.
    std::uint64_t parent_hash = 0;
    /// Page-chained hash of the prefix `[0, start + length)`.
    std::uint64_t hash = 0;
    friend constexpr bool operator==(const KvEvent&, const KvEvent&) noexcept = default;
};

}  // namespace unikv

#pragma once
/// \file
/// Strong id and unit types. Each id domain is its own type, so a virtual page can never be passed where a
/// physical page or a host page is expected (the decode-time bug where tree virtual ids were used as host
/// page numbers cannot be written). Conversions between pages and tokens name the page size explicitly.

#include <compare>
#include <cstddef>
#include <cstdint>
#include <functional>

#include <unikv/config.hpp>

namespace unikv {

/// A 32-bit id in the domain named by `Tag`. `-1` is the "none" value: page tables use it as their
/// trailing sentinel, so a gather through it lands on the sink instead of out of bounds.
/// Trivially copyable, so it can be passed to kernels and stored in page tables as-is.
template <class Tag>
class strong_id {
public:
    using rep = std::int32_t;

    /// Constructs the "none" id (-1).
    UNIKV_HOST_DEVICE constexpr strong_id() noexcept {}
    UNIKV_HOST_DEVICE constexpr explicit strong_id(rep v) noexcept : value_(v) {}

    /// The "none" id (-1).
    [[nodiscard]] UNIKV_HOST_DEVICE static constexpr strong_id none() noexcept { return strong_id{}; }

    [[nodiscard]] UNIKV_HOST_DEVICE constexpr rep value() const noexcept { return value_; }
    /// True for any id >= 0 (page 0, the sink, is a valid id that is never handed out).
    [[nodiscard]] UNIKV_HOST_DEVICE constexpr bool is_valid() const noexcept { return value_ >= 0; }

    friend constexpr bool operator==(strong_id, strong_id) noexcept = default;
    friend constexpr auto operator<=>(strong_id, strong_id) noexcept = default;

private:
    rep value_ = -1;
};

struct virtual_page_tag {};
struct virtual_token_tag {};
struct physical_page_tag {};
struct physical_token_tag {};
struct host_page_tag {};
struct state_id_tag {};

/// A page id as the tree, request tables and scheduler see it. Minted by the FULL pool; SWA binds the same ids.
using VirtualPage = strong_id<virtual_page_tag>;
/// A token id in virtual space: `page * page_size + offset`.
using VirtualToken = strong_id<virtual_token_tag>;
/// A page index inside one sub-pool's stride over the arena. Private to the allocator and kernels.
using PhysicalPage = strong_id<physical_page_tag>;
/// A token slot inside one sub-pool's stride over the arena.
using PhysicalToken = strong_id<physical_token_tag>;
/// A page of the host (pinned CPU) tier.
using HostPage = strong_id<host_page_tag>;
/// A Mamba state slot id in virtual space (Mamba owns its ids; page size 1).
using StateId = strong_id<state_id_tag>;

/// Tokens per page of one pool; always >= 1.
struct PageSize {
    std::int32_t tokens = 1;
    friend constexpr bool operator==(PageSize, PageSize) noexcept = default;
};

/// The page holding virtual token `t`.
[[nodiscard]] UNIKV_HOST_DEVICE constexpr VirtualPage page_of(VirtualToken t, PageSize ps) noexcept {
    return VirtualPage{t.value() < 0 ? -1 : t.value() / ps.tokens};
}
/// The page holding physical token `t`.
[[nodiscard]] UNIKV_HOST_DEVICE constexpr PhysicalPage page_of(PhysicalToken t, PageSize ps) noexcept {
    return PhysicalPage{t.value() < 0 ? -1 : t.value() / ps.tokens};
}
/// The token at `offset` within virtual page `p`.
[[nodiscard]] UNIKV_HOST_DEVICE constexpr VirtualToken token_of(VirtualPage p, PageSize ps,
                                                                std::int32_t offset = 0) noexcept {
    return VirtualToken{p.value() * ps.tokens + offset};
}
/// The token at `offset` within physical page `p`.
[[nodiscard]] UNIKV_HOST_DEVICE constexpr PhysicalToken token_of(PhysicalPage p, PageSize ps,
                                                                 std::int32_t offset = 0) noexcept {
    return PhysicalToken{p.value() * ps.tokens + offset};
}

}  // namespace unikv

template <class Tag>
struct std::hash<unikv::strong_id<Tag>> {
    std::size_t operator()(unikv::strong_id<Tag> id) const noexcept {
        return std::hash<std::int32_t>{}(id.value());
    }
};

#pragma once
/// \file
/// Value types of the allocator's surface: flush modes, expected-failure results with their reason, and
/// capacity demands. Expected outcomes (no room, gated) are these return values, never exceptions.

#include <cstddef>
#include <cstdint>
#include <span>

#include <unikv/component.hpp>
#include <unikv/ids.hpp>

namespace unikv {

/// How hard a flush compacts.
enum class FlushMode : std::uint8_t {
    urgent,         ///< pack every hole (waits the running forward on the stream; used before allocations)
    opportunistic,  ///< a capped pass that stops before pages a running forward writes; cheap when idle
};

/// Who frees a page or a state slot. A request frees what it allocated and still owns; once the cache's tree
/// holds a page (`UnifiedAllocator::hold`), only the tree's own action list frees it (`tree`), and a request's
/// free of it is a misuse that throws with nothing changed.
enum class Holder : std::uint8_t {
    request,  ///< the engine, for a request's own pages (the default of every free)
    tree,     ///< the tree's action list (and the cache's load leftovers): frees held pages, and releases the hold
};

/// Why an allocation or reservation failed.
enum class Shortfall : std::uint8_t {
    none,           ///< it succeeded
    virtual_ids,    ///< the id-owning pool ran out of virtual ids
    room,           ///< not enough bytes, even with every allowed compaction
    moves_blocked,  ///< it would fit after compaction, but a reservation or a closed move gate blocks moves
    partition,      ///< the pool would pass its page bound (`UnifiedAllocator::bound_pages`), whatever is free
};

/// The outcome of an allocation. Converts to true on success. On failure it says which pool fell short and by
/// how many pages, so admission can report (and evict) exactly what is missing.
struct [[nodiscard]] AllocResult {
    Shortfall shortfall = Shortfall::none;
    /// The pages missing of the pool that fell short (a count of 0 on success): with `virtual_ids`, the ids
    /// beyond the free ones; with `room`, the pages that do not fit even after every compaction; with
    /// `moves_blocked`, the pages that do not fit without moving any page; with `partition`, the pages past the
    /// pool's bound. The other components' demands stay as asked when it is computed.
    Pages missing{};
    explicit constexpr operator bool() const noexcept { return shortfall == Shortfall::none; }
};

/// The outcome of a flush, `make_room` or `compact_holes`.
struct FlushResult {
    std::size_t pages_moved = 0;
    std::size_t bytes_moved = 0;
    bool blocked = false;             ///< moves were blocked (reservation pending or gate closed): nothing moved
    bool stopped_by_forward = false;  ///< an opportunistic pass stopped before a page the forward writes
};

/// Pages wanted from each pool at once (FULL and SWA pages of a composite allocation are both counted).
/// Written with named fields (`{.full = 8, .swa = 8}`), read per component (`demand[c]`), so code over
/// components loops over `all_components` instead of naming each field.
struct CapacityDemand {
    std::int64_t full = 0;
    std::int64_t swa = 0;
    std::int64_t mamba = 0;

    /// The pages wanted from pool `c`. O(1).
    [[nodiscard]] constexpr std::int64_t& operator[](Component c) noexcept { return this->*fields[c]; }
    [[nodiscard]] constexpr std::int64_t operator[](Component c) const noexcept { return this->*fields[c]; }
    /// `n` pages of pool `c` alone.
    [[nodiscard]] static constexpr CapacityDemand single(Component c, std::int64_t n) noexcept {
        CapacityDemand d;
        d[c] = n;
        return d;
    }

private:
    static constexpr per_component<std::int64_t CapacityDemand::*> fields{
        {&CapacityDemand::full, &CapacityDemand::swa, &CapacityDemand::mamba}};
};

/// One batch of prefill/extend requests for `alloc_extend`. Request `i` has `prefix_lens[i]` tokens
/// already allocated and grows to `seq_lens[i]`; `last_locs[i]` is the virtual token id of its token
/// `prefix_lens[i] - 1` (ignored when the prefix is empty or ends on a page boundary).
struct ExtendBatch {
    std::span<const std::int32_t> prefix_lens;
    std::span<const std::int32_t> seq_lens;
    std::span<const VirtualToken> last_locs;
};

/// One batch of decode steps for `alloc_decode`. Request `i` grows by one token to `seq_lens[i]`;
/// `last_locs[i]` is the virtual token id of its token `seq_lens[i] - 2`.
struct DecodeBatch {
    std::span<const std::int32_t> seq_lens;
    std::span<const VirtualToken> last_locs;
};

}  // namespace unikv

#pragma once
/// \file
/// `MoveGates`: runtime predicates that can forbid page moves. A closed gate blocks every move of every pool
/// of the allocator (the gates are held once by the allocator, so a gate can never reach only some pools);
/// allocation of free pages never consults them. Installing gates needs a layout without eager pools
/// (checked at compile time by `UnifiedAllocator::install_move_gate`).

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <utility>

#include <unikv/error.hpp>

namespace unikv {

/// The two independent gate slots.
enum class MoveGateSlot : std::uint8_t {
    host_transfer,  ///< HiCache: closed while any host<->device transfer is queued or unacknowledged
    disagg,         ///< PD disaggregation: closed while a destination is published to a peer
};

/// Number of `MoveGateSlot` values.
inline constexpr std::size_t move_gate_slot_count = 2;

class MoveGates {
public:
    /// A predicate returning true while moves are allowed.
    using predicate = std::function<bool()>;

    /// Installs `allows_moves` in `slot`, replacing an older one. Throws `logic_error` for an empty predicate.
    void install(MoveGateSlot slot, predicate allows_moves) {
        UNIKV_EXPECTS(static_cast<bool>(allows_moves), "the move gate predicate for slot ", slot, " is empty");
        slots_[static_cast<std::size_t>(slot)] = std::move(allows_moves);
    }
    /// Removes the gate of `slot` (no-op when none).
    void remove(MoveGateSlot slot) noexcept { slots_[static_cast<std::size_t>(slot)] = nullptr; }
    [[nodiscard]] bool installed(MoveGateSlot slot) const noexcept {
        return static_cast<bool>(slots_[static_cast<std::size_t>(slot)]);
    }
    /// True when every installed predicate allows moves. Calls each installed predicate once.
    [[nodiscard]] bool open() const {
        for (const predicate& p : slots_) {
            if (p && !p()) return false;
        }
        return true;
    }

private:
    std::array<predicate, move_gate_slot_count> slots_{};
};

}  // namespace unikv

#pragma once
/// \file
/// `MoveGates` and `MoveGateHold`: gates that can forbid page moves. A closed gate blocks every move of every
/// pool of the allocator (the gates are held once by the allocator, so a gate can never reach only some
/// pools); allocation of free pages never consults them. Installing gates needs a layout without eager pools
/// (checked at compile time by `UnifiedAllocator::install_move_gate`).
///
/// A gate is closed by holding it, not by a predicate: `install_move_gate(slot)` returns a move-only
/// `MoveGateHold`, and the slot stays closed until every hold of it was released (a count per slot, so two
/// holders compose). The count lives in a small heap state that neither the allocator nor the holder
/// contains, so moving either one leaves the gate working, and no gate can call back into a moved or
/// destroyed installer. When the allocator's `MoveGates` goes away while holds remain, the last hold frees
/// the state, so a hold outliving its allocator is harmless. Checking the gates is two loads. Holds are taken
/// and released on the thread that drives the allocator (the counts are plain integers, like its tables).

#include <array>
#include <cstddef>
#include <cstdint>
#include <utility>

namespace unikv {

/// The two independent gate slots.
enum class MoveGateSlot : std::uint8_t {
    host_transfer,  ///< the cache's: closed while any host<->device transfer is queued or unacknowledged
    disagg,         ///< PD disaggregation: closed while a destination is published to a peer
};

/// Number of `MoveGateSlot` values.
inline constexpr std::size_t move_gate_slot_count = 2;

namespace detail {

/// The shared state of one allocator's gates. Owned by its `MoveGates` until that is destroyed with holds
/// outstanding (`orphaned`); the last of those holds then deletes it.
struct move_gate_state {
    std::array<std::uint32_t, move_gate_slot_count> holds{};  // live holds per slot; a slot is closed when > 0
    bool orphaned = false;
    static_assert(move_gate_slot_count == 2, "unikv: any_held() reads every slot; extend it with the new slot");

    [[nodiscard]] bool any_held() const noexcept { return (holds[0] | holds[1]) != 0; }
};

}  // namespace detail

/// A closed move gate: while it lives (and is not released), moves of the allocator that issued it are
/// blocked. Move-only; a moved-from or default-constructed hold holds nothing. Releasing is `noexcept`.
class [[nodiscard]] MoveGateHold {
public:
    /// A hold of nothing.
    MoveGateHold() noexcept = default;
    MoveGateHold(MoveGateHold&& o) noexcept : state_(std::exchange(o.state_, nullptr)), slot_(o.slot_) {}
    MoveGateHold& operator=(MoveGateHold&& o) noexcept {
        if (this != &o) {
            release();
            state_ = std::exchange(o.state_, nullptr);
            slot_ = o.slot_;
        }
        return *this;
    }
    MoveGateHold(const MoveGateHold&) = delete;
    MoveGateHold& operator=(const MoveGateHold&) = delete;
    ~MoveGateHold() { release(); }

    /// Reopens the slot unless another hold still closes it; the hold then holds nothing. No-op when it
    /// holds nothing. O(1).
    void release() noexcept {
        if (state_ == nullptr) return;
        detail::move_gate_state* s = std::exchange(state_, nullptr);
        --s->holds[static_cast<std::size_t>(slot_)];
        if (s->orphaned && !s->any_held()) delete s;
    }
    /// True while the hold closes its slot.
    [[nodiscard]] bool holding() const noexcept { return state_ != nullptr; }
    /// `holding()`.
    explicit operator bool() const noexcept { return holding(); }
    /// The slot it closes (meaningful while `holding()`).
    [[nodiscard]] MoveGateSlot slot() const noexcept { return slot_; }

private:
    friend class MoveGates;
    MoveGateHold(detail::move_gate_state* s, MoveGateSlot slot) noexcept : state_(s), slot_(slot) {
        ++s->holds[static_cast<std::size_t>(slot)];
    }
    detail::move_gate_state* state_ = nullptr;
    MoveGateSlot slot_ = MoveGateSlot::host_transfer;
};

/// The gates of one allocator: owns the gate state on the heap (see the file comment). Move-only; a
/// moved-from `MoveGates` may only be destroyed or assigned to.
class MoveGates {
public:
    /// All gates open. Throws `std::bad_alloc` when the state cannot be allocated.
    MoveGates() : state_(new detail::move_gate_state()) {}
    MoveGates(MoveGates&& o) noexcept : state_(std::exchange(o.state_, nullptr)) {}
    MoveGates& operator=(MoveGates&& o) noexcept {
        if (this != &o) {
            retire();
            state_ = std::exchange(o.state_, nullptr);
        }
        return *this;
    }
    MoveGates(const MoveGates&) = delete;
    MoveGates& operator=(const MoveGates&) = delete;
    ~MoveGates() { retire(); }

    /// Closes `slot` until the returned hold is released or destroyed. Never fails. O(1).
    [[nodiscard]] MoveGateHold hold(MoveGateSlot slot) noexcept { return MoveGateHold(state_, slot); }
    /// True when no slot is held. O(1), two loads: it is consulted before every move.
    [[nodiscard]] bool open() const noexcept { return !state_->any_held(); }

private:
    // Frees the state, or hands it to the holds still outstanding (the last one frees it).
    void retire() noexcept {
        if (state_ == nullptr) return;
        if (state_->any_held()) {
            state_->orphaned = true;
        } else {
            delete state_;
        }
        state_ = nullptr;
    }
    detail::move_gate_state* state_;
};

}  // namespace unikv

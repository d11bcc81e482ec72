#pragma once
/// \file
/// `Reservation`: physical pages taken by `alloc_physical` for a host-to-device load. A move-only value that
/// must be consumed: its load is submitted (`set_transfer_done_event` with a load key) or it is cancelled
/// (`cancel`). Until then its pages count as pending load pages and block every move of their pool.
///
/// Dropping a reservation that was never submitted nor cancelled is a caller bug the library detects: the
/// allocator's unconsumed-reservation count goes up, it is reported as `Dropped::reservation` (`dropped.hpp`:
/// by default a line on stderr, and an abort when asserts are enabled), and the pages are cancelled so that
/// moves do not stay blocked forever. A reservation must not outlive its allocator.

#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include <unikv/component.hpp>
#include <unikv/dropped.hpp>
#include <unikv/error.hpp>
#include <unikv/ids.hpp>

namespace unikv {

namespace detail {

enum class reservation_state : std::uint8_t { free, pending, submitted };

struct reservation_slot {
    std::vector<PhysicalPage> pages;
    Component component = Component::swa;
    std::uint32_t generation = 0;
    reservation_state state = reservation_state::free;
};

/// The allocator's table of reservations. Heap-allocated by the allocator so its address survives moves of
/// the allocator; `Reservation` values point at it.
class reservation_registry {
public:
    /// Called with the owner, the registry and the slot of a pending reservation that was dropped; cancels
    /// its pages and closes the slot.
    using drop_hook = void (*)(void* owner, reservation_registry& registry, std::uint32_t slot) noexcept;

    /// Opens a pending slot for `component`, its page list empty; returns its index. Amortized O(1).
    std::uint32_t open(Component component) {
        std::uint32_t index = 0;
        if (!free_slots_.empty()) {
            index = free_slots_.back();
            free_slots_.pop_back();
        } else {
            index = static_cast<std::uint32_t>(slots_.size());
            slots_.emplace_back();
            free_slots_.reserve(slots_.size());  // so close() never allocates
        }
        reservation_slot& s = slots_[index];
        s.pages.clear();
        s.component = component;
        s.state = reservation_state::pending;
        ++outstanding_;
        return index;
    }
    /// Frees a slot; the generation changes so old handles are recognized as stale.
    void close(std::uint32_t index) noexcept {
        reservation_slot& s = slots_[index];
        s.state = reservation_state::free;
        ++s.generation;
        --outstanding_;
        free_slots_.push_back(index);  // capacity reserved in open(), so this does not allocate
    }
    [[nodiscard]] reservation_slot& slot(std::uint32_t index) noexcept { return slots_[index]; }
    [[nodiscard]] const reservation_slot& slot(std::uint32_t index) const noexcept { return slots_[index]; }
    [[nodiscard]] std::size_t size() const noexcept { return slots_.size(); }
    /// Reservations handed out and not yet destroyed or cancelled.
    [[nodiscard]] std::size_t outstanding() const noexcept { return outstanding_; }
    /// Reservations dropped without being submitted or cancelled, since construction.
    [[nodiscard]] std::size_t unconsumed() const noexcept { return unconsumed_; }

    void set_owner(void* owner, drop_hook hook) noexcept {
        owner_ = owner;
        hook_ = hook;
    }

    /// A handle was destroyed. Submitted slots are freed; pending ones are reported and cancelled.
    void on_handle_destroyed(std::uint32_t index) noexcept {
        reservation_slot& s = slots_[index];
        if (s.state == reservation_state::submitted) {
            close(index);
            return;
        }
        ++unconsumed_;
        DropReport::report(Dropped::reservation);
        if (hook_ != nullptr) hook_(owner_, *this, index);
        else close(index);  // the allocator is gone (a caller bug): nothing left to cancel
    }
    /// Forgets the owner (the allocator is being destroyed while reservations are outstanding).
    void detach() noexcept {
        owner_ = nullptr;
        hook_ = nullptr;
    }

private:
    std::vector<reservation_slot> slots_;
    std::vector<std::uint32_t> free_slots_;
    std::size_t outstanding_ = 0;
    std::size_t unconsumed_ = 0;
    void* owner_ = nullptr;
    drop_hook hook_ = nullptr;
};

/// Owns the registry. If the allocator dies while reservations are outstanding (a caller bug), the registry
/// is detached and deliberately leaked, so those reservations can still be destroyed safely.
class registry_owner {
public:
    registry_owner() : registry_(new reservation_registry()) {}
    registry_owner(const registry_owner&) = delete;
    registry_owner& operator=(const registry_owner&) = delete;
    registry_owner(registry_owner&& o) noexcept : registry_(std::exchange(o.registry_, nullptr)) {}
    registry_owner& operator=(registry_owner&& o) noexcept {
        if (this != &o) {
            retire();
            registry_ = std::exchange(o.registry_, nullptr);
        }
        return *this;
    }
    ~registry_owner() { retire(); }
    [[nodiscard]] reservation_registry* get() const noexcept { return registry_; }
    reservation_registry* operator->() const noexcept { return registry_; }

private:
    void retire() noexcept {
        if (registry_ == nullptr) return;
        if (registry_->outstanding() != 0) {
            registry_->detach();
        } else {
            delete registry_;
        }
        registry_ = nullptr;
    }
    reservation_registry* registry_;
};

struct reservation_access;

}  // namespace detail

/// Physical pages reserved for one load. Move-only; see the file comment for its lifecycle.
class [[nodiscard]] Reservation {
public:
    /// An empty reservation (what a failed `alloc_physical` returns).
    Reservation() noexcept = default;
    Reservation(const Reservation&) = delete;
    Reservation& operator=(const Reservation&) = delete;
    Reservation(Reservation&& o) noexcept
        : registry_(std::exchange(o.registry_, nullptr)), slot_(o.slot_), generation_(o.generation_) {}
    Reservation& operator=(Reservation&& o) noexcept {
        if (this != &o) {
            release();
            registry_ = std::exchange(o.registry_, nullptr);
            slot_ = o.slot_;
            generation_ = o.generation_;
        }
        return *this;
    }
    ~Reservation() { release(); }

    /// True when this value holds no reservation (moved from, cancelled, or a failed allocation).
    [[nodiscard]] bool empty() const noexcept { return registry_ == nullptr; }
    explicit operator bool() const noexcept { return !empty(); }
    /// The component whose pool the pages belong to. Precondition: not empty.
    [[nodiscard]] Component component() const noexcept { return registry_->slot(slot_).component; }
    /// The reserved physical pages, in the order `bind_swa` indexes them. Empty when `empty()`.
    [[nodiscard]] std::span<const PhysicalPage> pages() const noexcept {
        if (registry_ == nullptr) return {};
        return registry_->slot(slot_).pages;
    }
    /// True once a load was registered after this reservation was made (it can no longer be cancelled).
    [[nodiscard]] bool submitted() const noexcept {
        return registry_ != nullptr && registry_->slot(slot_).state == detail::reservation_state::submitted;
    }

private:
    friend struct detail::reservation_access;
    Reservation(detail::reservation_registry* registry, std::uint32_t slot) noexcept
        : registry_(registry), slot_(slot), generation_(registry->slot(slot).generation) {}
    void release() noexcept {
        if (registry_ == nullptr) return;
        UNIKV_ASSERT(registry_->slot(slot_).generation == generation_);
        registry_->on_handle_destroyed(slot_);
        registry_ = nullptr;
    }

    detail::reservation_registry* registry_ = nullptr;
    std::uint32_t slot_ = 0;
    std::uint32_t generation_ = 0;
};

namespace detail {

/// The allocator's access to a reservation's internals.
struct reservation_access {
    static Reservation make(reservation_registry* registry, std::uint32_t slot) noexcept {
        return Reservation(registry, slot);
    }
    [[nodiscard]] static reservation_registry* registry(const Reservation& r) noexcept { return r.registry_; }
    [[nodiscard]] static std::uint32_t slot(const Reservation& r) noexcept { return r.slot_; }
    [[nodiscard]] static bool current(const Reservation& r) noexcept {
        return r.registry_ != nullptr && r.registry_->slot(r.slot_).generation == r.generation_;
    }
    /// Empties `r` without running its destructor logic (the allocator consumed it).
    static void forget(Reservation& r) noexcept { r.registry_ = nullptr; }
};

}  // namespace detail
}  // namespace unikv

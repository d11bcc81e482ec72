#pragma once
/// \file
/// Handles a tree hands out: `NodeRef` (a node, checked against slot reuse) and `LockReceipt` (the move-only
/// proof of a lock, replayed by `unlock`).

#include <atomic>
#include <cstdint>
#include <utility>

#include <unikv/dropped.hpp>
#include <unikv/tree/components.hpp>
#include <unikv/tree/options.hpp>

namespace unikv {

/// A node of one tree: arena slot plus generation. A handle to a node that was deleted (its slot possibly reused)
/// is detected by the generation and rejected with `logic_error`. The default handle is the root.
class NodeRef {
public:
    /// The root.
    constexpr NodeRef() noexcept = default;
    /// A handle to slot `index` at generation `generation` (tree cores build these).
    constexpr NodeRef(std::uint32_t index, std::uint32_t generation) noexcept
        : index_(index), generation_(generation) {}

    /// The arena slot.
    [[nodiscard]] constexpr std::uint32_t index() const noexcept { return index_; }
    /// The slot's generation when the handle was made.
    [[nodiscard]] constexpr std::uint32_t generation() const noexcept { return generation_; }
    /// True for the root (slot 0).
    [[nodiscard]] constexpr bool is_root() const noexcept { return index_ == 0; }
    friend constexpr bool operator==(NodeRef, NodeRef) noexcept = default;

private:
    std::uint32_t index_ = 0;
    std::uint32_t generation_ = 0;
};

class LockReceipt;
template <class... Components>
class RadixTree;
template <class... Components>
class ReferenceTree;

namespace detail {
/// Tree cores build and read receipts through this; its members are private to the two cores, so users
/// cannot forge, rewrite or silently consume a receipt.
class ReceiptAccess;
}  // namespace detail

/// Proof of one `lock` call. Move-only: `unlock(std::move(receipt))` consumes it, so a lock cannot be released
/// twice. It records the tree, the anchor node, the tier, the components it still holds and where its SWA
/// window segment begins (a token position, stable under splits). A receipt destroyed while it still holds
/// locks is reported as `Dropped::receipt`.
class LockReceipt {
public:
    /// An empty receipt (holds nothing; `unlock` rejects it).
    LockReceipt() noexcept = default;
    LockReceipt(const LockReceipt&) = delete;
    LockReceipt& operator=(const LockReceipt&) = delete;
    /// Takes over `other`'s locks; `other` becomes empty.
    LockReceipt(LockReceipt&& other) noexcept { take(other); }
    /// Takes over `other`'s locks; the locks this receipt held are reported as dropped.
    LockReceipt& operator=(LockReceipt&& other) noexcept {
        if (this != &other) {
            report_if_held();
            take(other);
        }
        return *this;
    }
    /// Reports `Dropped::receipt` when the receipt still holds locks (they can no longer be released).
    ~LockReceipt() { report_if_held(); }

    /// True for a default-constructed or moved-from receipt.
    [[nodiscard]] bool empty() const noexcept { return tree_id_ == 0; }
    /// The node the lock was taken on.
    [[nodiscard]] NodeRef node() const noexcept { return node_; }
    /// The tier the lock protects.
    [[nodiscard]] Tier tier() const noexcept { return tier_; }
    /// True while the receipt still holds component `c`'s lock.
    [[nodiscard]] bool holds(Component c) const noexcept { return held_.has(c); }
    /// The start (token position) of the SWA window segment this lock covers; 0 when it reaches the root.
    [[nodiscard]] std::int32_t swa_segment_start() const noexcept { return swa_start_; }

private:
    friend class detail::ReceiptAccess;

    void take(LockReceipt& other) noexcept {
        tree_id_ = std::exchange(other.tree_id_, 0);
        node_ = other.node_;
        tier_ = other.tier_;
        held_ = std::exchange(other.held_, ComponentMask{});
        swa_start_ = other.swa_start_;
    }
    void report_if_held() noexcept {
        if (tree_id_ != 0 && !held_.empty()) detail::DropReport::report(Dropped::receipt);
        tree_id_ = 0;
        held_ = ComponentMask{};
    }

    std::uint64_t tree_id_ = 0;  // 0 = empty; otherwise the id of the tree that issued it
    NodeRef node_{};
    Tier tier_ = Tier::device;
    ComponentMask held_{};
    std::int32_t swa_start_ = 0;
};

namespace detail {

class ReceiptAccess {
    template <class...>
    friend class ::unikv::RadixTree;
    template <class...>
    friend class ::unikv::ReferenceTree;

    static LockReceipt make(std::uint64_t tree_id, NodeRef node, Tier tier, ComponentMask held,
                            std::int32_t swa_start) noexcept {
        LockReceipt r;
        r.tree_id_ = tree_id;
        r.node_ = node;
        r.tier_ = tier;
        r.held_ = held;
        r.swa_start_ = swa_start;
        return r;
    }
    static std::uint64_t tree_id(const LockReceipt& r) noexcept { return r.tree_id_; }
    static ComponentMask held(const LockReceipt& r) noexcept { return r.held_; }
    static void set_held(LockReceipt& r, ComponentMask held) noexcept { r.held_ = held; }
    /// Marks the receipt consumed without reporting it.
    static void consume(LockReceipt& r) noexcept {
        r.tree_id_ = 0;
        r.held_ = ComponentMask{};
    }
};

/// A process-unique id for each tree instance, so a receipt from another tree is rejected.
inline std::uint64_t next_tree_id() noexcept {
    static std::atomic<std::uint64_t> next{1};
    return next.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace detail
}  // namespace unikv

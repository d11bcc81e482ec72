#pragma once
/// \file
/// `held_lock`: a tree lock taken for the length of one call, released on every way out of it (a throw
/// included) unless the call hands it on.

#include <utility>

#include <unikv/tree/handles.hpp>

namespace unikv::detail {

/// Holds `receipt` for `owner` (a tree, or a cache with its `unlock(LockReceipt&&)`) and unlocks it on
/// destruction unless `release()` handed it on, e.g. to a record that outlives the call. An empty receipt is
/// held as nothing. No allocation; the unlock costs what the owner's does (O(depth)).
template <class Owner>
class held_lock {
public:
    held_lock(Owner& owner, LockReceipt&& receipt) noexcept : owner_(owner), receipt_(std::move(receipt)) {}
    held_lock(const held_lock&) = delete;
    held_lock& operator=(const held_lock&) = delete;
    /// The receipt came from `owner`, so its unlock does not throw.
    ~held_lock() {
        if (!receipt_.empty()) owner_.unlock(std::move(receipt_));
    }

    /// Hands the receipt on; the guard holds nothing afterwards.
    [[nodiscard]] LockReceipt release() noexcept { return std::move(receipt_); }
    /// The receipt held, for a call that takes it over only when it succeeds (it moves from it then, and the
    /// guard holds nothing afterwards).
    [[nodiscard]] LockReceipt& receipt() noexcept { return receipt_; }

private:
    Owner& owner_;
    LockReceipt receipt_;
};

}  // namespace unikv::detail

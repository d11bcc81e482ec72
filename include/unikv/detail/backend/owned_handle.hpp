#pragma once
/// \file
/// `owned_handle`: the move-only owner every backend builds its `Stream` and `Event` from, so the ownership
/// rules (release once, on destruction or when overwritten; a moved-from owner is empty) live in one place.

#include <utility>

namespace unikv::detail {

/// Owns one backend handle `Ref` (a non-owning view with an empty default value). `Release(ref)` runs once
/// for a non-empty handle, when the owner is destroyed or assigned over; it must tolerate an empty `Ref`.
/// A backend derives its owners from it and keeps their constructor from a `Ref` private. Only an owner that
/// lives on hands its view out: a temporary's (`stream_ref s = backend.make_stream();`) would dangle at the
/// end of the statement, so that does not compile.
template <class Ref, void (*Release)(const Ref&) noexcept>
class owned_handle {
public:
    owned_handle(owned_handle&& o) noexcept : ref_(std::exchange(o.ref_, Ref{})) {}
    owned_handle& operator=(owned_handle&& o) noexcept {
        if (this != &o) {
            Release(ref_);
            ref_ = std::exchange(o.ref_, Ref{});
        }
        return *this;
    }
    owned_handle(const owned_handle&) = delete;
    owned_handle& operator=(const owned_handle&) = delete;
    ~owned_handle() { Release(ref_); }

    [[nodiscard]] Ref ref() const& noexcept { return ref_; }
    Ref ref() const&& = delete;
    operator Ref() const& noexcept { return ref_; }  // NOLINT: an owner converts to its view
    operator Ref() const&& = delete;
    /// Blocks the host until the work queued before the call has executed (the view's `synchronize`).
    void synchronize() const
        requires requires(const Ref& r) { r.synchronize(); }
    {
        ref_.synchronize();
    }

protected:
    explicit owned_handle(Ref r) noexcept : ref_(std::move(r)) {}

private:
    Ref ref_;
};

}  // namespace unikv::detail

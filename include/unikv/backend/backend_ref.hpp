#pragma once
/// \file
/// `backend_ref<B>`: a non-owning, trivially copyable reference to a backend, the way RMM's `resource_ref`
/// refers to a memory resource. Everything built on a backend (the allocator, its page-table mirrors, their
/// move contexts) holds one, so moving those owners copies an address and never a backend.
///
/// Lifetime rule: the backend outlives everything built on it (allocators, mirrors, and the streams, events
/// and buffers it handed out), and stays at its address meanwhile: moving a backend keeps its own handles
/// valid, but a `backend_ref` names the backend object, not its state.

#include <cstddef>
#include <type_traits>
#include <utility>

namespace unikv {

/// Refers to the backend `B`; forwards the calls the allocator and `PageTableMirror` make. Cheap to copy
/// (one pointer), never empty. See the file comment for the lifetime rule.
template <class B>
class backend_ref {
public:
    /// Refers to `backend`. Implicit, so a `B&` can be passed wherever a `backend_ref<B>` is taken.
    backend_ref(B& backend) noexcept : backend_(&backend) {}  // NOLINT: a reference converts to its ref
    /// A temporary backend would be gone before anything built on it.
    backend_ref(B&&) = delete;

    /// The backend referred to.
    [[nodiscard]] B& get() const noexcept { return *backend_; }

    /// `B::allocate_device(bytes)`.
    [[nodiscard]] auto allocate_device(std::size_t bytes) const { return backend_->allocate_device(bytes); }
    /// `B::allocate_pinned(bytes)`.
    [[nodiscard]] auto allocate_pinned(std::size_t bytes) const { return backend_->allocate_pinned(bytes); }
    /// `B::make_stream()`.
    [[nodiscard]] auto make_stream() const { return backend_->make_stream(); }
    /// `B::make_event()`.
    [[nodiscard]] auto make_event() const { return backend_->make_event(); }
    /// `B::copy_pages_async(...)`: same arguments, same guarantees.
    template <class... Args>
    void copy_pages_async(Args&&... args) const {
        backend_->copy_pages_async(std::forward<Args>(args)...);
    }
    /// `B::copy_page_slices_async(...)`: same arguments, same guarantees.
    template <class... Args>
    void copy_page_slices_async(Args&&... args) const {
        backend_->copy_page_slices_async(std::forward<Args>(args)...);
    }
    /// `B::fill_pages_async(...)`: same arguments, same guarantees.
    template <class... Args>
    void fill_pages_async(Args&&... args) const {
        backend_->fill_pages_async(std::forward<Args>(args)...);
    }
    /// `B::counters()`.
    [[nodiscard]] auto counters() const noexcept { return backend_->counters(); }

    /// True when both refer to the same backend object.
    friend bool operator==(backend_ref, backend_ref) = default;

private:
    B* backend_;
};

namespace detail {
struct backend_ref_probe;
}  // namespace detail
static_assert(std::is_trivially_copyable_v<backend_ref<detail::backend_ref_probe>>,
              "unikv: backend_ref is copied into kernels' and owners' state by value; keep it trivially copyable");

}  // namespace unikv

#pragma once
/// \file
/// The backend policy kind: what the arena, pools and transfer code need from a backend. One detection
/// trait per requirement, so a host class can `static_assert` each one and name the missing member.

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <span>
#include <type_traits>
#include <utility>

#include <unikv/backend/counters.hpp>
#include <unikv/backend/page_copy.hpp>

namespace unikv {

/// Has `B::stream_ref` with `wait(event_ref)` and `synchronize()`.
template <class B>
inline constexpr bool has_stream_ref_v = requires(const typename B::stream_ref s, const typename B::event_ref e) {
    s.wait(e);
    s.synchronize();
};

/// Has `B::event_ref` with `record(stream_ref)`, `query()` and `synchronize()`.
template <class B>
inline constexpr bool has_event_ref_v = requires(const typename B::event_ref e, const typename B::stream_ref s) {
    e.record(s);
    { e.query() } -> std::same_as<bool>;
    e.synchronize();
};

/// Has `event_ref::failed()`: true when the work the event's latest record marks completed with a failed copy
/// (a transfer controller must not commit it).
template <class B>
inline constexpr bool has_failure_report_v = requires(const typename B::event_ref e) {
    { e.failed() } -> std::same_as<bool>;
};

/// Optional capability (tests): `inject_copy_failure(stream_ref)` makes the next copy queued on the stream fail
/// and `clear_copy_failure(stream_ref)` ends the failure (`HostBackend`; not part of `Backend`).
template <class B>
inline constexpr bool has_copy_failure_injection_v = requires(B& b, typename B::stream_ref s) {
    b.inject_copy_failure(s);
    b.clear_copy_failure(s);
};

/// Has `allocate_device(bytes)` and `allocate_pinned(bytes)` returning buffers whose `region()` is a
/// `device_region_ref` and a `pinned_region_ref`.
template <class B>
inline constexpr bool has_memory_v = requires(B& b, std::size_t n) {
    { b.allocate_device(n).region() } -> std::same_as<device_region_ref>;
    { b.allocate_pinned(n).region() } -> std::same_as<pinned_region_ref>;
};

/// The buffer type `B::allocate_device` returns (device memory: the arena, device tables).
template <class B>
using device_buffer_t = decltype(std::declval<B&>().allocate_device(std::size_t{}));
/// The buffer type `B::allocate_pinned` returns (pinned host memory).
template <class B>
using pinned_buffer_t = decltype(std::declval<B&>().allocate_pinned(std::size_t{}));
/// The owned event type `B::make_event` returns.
template <class B>
using owned_event_t = decltype(std::declval<B&>().make_event());
/// The owned stream type `B::make_stream` returns.
template <class B>
using owned_stream_t = decltype(std::declval<B&>().make_stream());

/// Has `make_stream()` and `make_event()` returning owners whose refs (read from a live owner) are the
/// backend's, and a `synchronize()` on the stream owner.
template <class B>
inline constexpr bool has_stream_factory_v = requires(owned_stream_t<B>& stream, owned_event_t<B>& event) {
    { stream.ref() } -> std::same_as<typename B::stream_ref>;
    { event.ref() } -> std::same_as<typename B::event_ref>;
    stream.synchronize();
};

/// Has the whole-envelope and sliced page copies between any pair of memory spaces, and the page fill.
template <class B>
inline constexpr bool has_page_copies_v =
    requires(B& b, device_region_ref d, pinned_region_ref h, std::span<const std::int32_t> p, std::size_t n,
             EnvelopeSlice sl, typename B::stream_ref s) {
        b.copy_pages_async(d, p, d, p, n, s);
        b.copy_pages_async(h, p, d, p, n, s);
        b.copy_pages_async(d, p, h, p, n, s);
        b.copy_pages_async(h, p, h, p, n, s);
        b.copy_page_slices_async(h, p, d, p, n, sl, s);
        b.copy_page_slices_async(d, p, h, p, n, sl, s);
        b.fill_pages_async(d, p, n, std::byte{0}, s);
        b.fill_pages_async(h, p, n, std::byte{0}, s);
    };

/// Has `counters()` returning `BackendCounters`, so tests can prove a path synchronized nothing.
template <class B>
inline constexpr bool has_counters_v = requires(const B& b) {
    { b.counters() } -> std::same_as<BackendCounters>;
};

/// True when `B` models every backend requirement.
template <class B>
inline constexpr bool is_backend_v = has_stream_ref_v<B> && has_event_ref_v<B> && has_failure_report_v<B> &&
                                     has_memory_v<B> && has_stream_factory_v<B> && has_page_copies_v<B> &&
                                     has_counters_v<B>;

/// A backend: memory, streams, events and page-envelope copies with the same API on host and device.
template <class B>
concept Backend = is_backend_v<B>;

namespace detail {

/// Checks each backend requirement on its own, so a missing member is named in the error. Returns true.
template <class B>
consteval bool check_backend() {
    static_assert(has_stream_ref_v<B>, "unikv: a Backend needs stream_ref with wait(event_ref) and synchronize()");
    static_assert(has_event_ref_v<B>, "unikv: a Backend needs event_ref with record(stream_ref), query(), synchronize()");
    static_assert(has_failure_report_v<B>, "unikv: a Backend needs event_ref::failed() (a failed copy behind the "
                  "latest record); report false when copies cannot fail");
    static_assert(has_memory_v<B>, "unikv: a Backend needs allocate_device(bytes) and allocate_pinned(bytes)");
    static_assert(has_stream_factory_v<B>, "unikv: a Backend needs make_stream() and make_event()");
    static_assert(has_page_copies_v<B>,
                  "unikv: a Backend needs copy_pages_async, copy_page_slices_async and fill_pages_async");
    static_assert(has_counters_v<B>, "unikv: a Backend needs counters() returning BackendCounters");
    return true;
}

}  // namespace detail

}  // namespace unikv

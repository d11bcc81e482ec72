#pragma once
/// \file
/// `move_context`: everything one compaction call needs to move pages: the backend, the arena region, the
/// allocator's stream, the transfer events to order after, the forward hazard, scratch buffers, and what
/// the call already did (waited the events, settled the forward). Every move in every policy goes through
/// `commit`: copy the envelopes on the stream, then rebind; the data follows the virtual id.

#include <cstddef>
#include <cstdint>
#include <vector>

#include <unikv/backend/backend_ref.hpp>
#include <unikv/backend/page_copy.hpp>
#include <unikv/detail/pools/pool_core.hpp>
#include <unikv/error.hpp>
#include <unikv/pools/forward_hazards.hpp>
#include <unikv/pools/transfer_events.hpp>

namespace unikv::detail {

template <class B>
struct move_context {
    using stream_ref = typename B::stream_ref;

    move_context(backend_ref<B> backend_, device_region_ref arena_, stream_ref stream_, TransferEvents<B>& events_,
                 ForwardHazard<B>& forward_, std::vector<std::int32_t>& src_, std::vector<std::int32_t>& dst_)
        : backend(backend_),
          arena(arena_),
          stream(stream_),
          events(&events_),
          forward(&forward_),
          src(&src_),
          dst(&dst_),
          forward_running(forward_.running()) {}

    backend_ref<B> backend;
    device_region_ref arena;
    stream_ref stream;
    TransferEvents<B>* events;
    ForwardHazard<B>* forward;
    std::vector<std::int32_t>* src;  // scratch: sources of the batch being built
    std::vector<std::int32_t>* dst;  // scratch: destinations, pairwise with `src`
    bool forward_running;            // the registered forward had not fired when the call began
    bool forward_settled = false;    // the stream already waits the forward in this call
    bool events_waited = false;      // the stream already waits every transfer event in this call
    std::size_t pages_moved = 0;
    std::size_t bytes_moved = 0;

    /// Makes the stream wait the running forward, once per call: later copies then neither race its writes
    /// nor free pages it still reads.
    void settle_forward() {
        if (forward_settled) return;
        if (forward_running) forward->wait(stream);
        forward_settled = true;
    }
    /// True when a moved source page can be reused at once (no forward that may read it is still running).
    [[nodiscard]] bool sources_reusable() const noexcept { return forward_settled || !forward_running; }
    /// True when the running forward writes virtual id `v` of `c` and the call has not settled it.
    [[nodiscard]] bool write_hazard(Component c, std::int32_t v) const noexcept {
        return forward_running && !forward_settled && forward->writes(c, v);
    }

    /// Throws `logic_error`, before anything changes, unless every page of `*src` is a live, bound page of
    /// `core`: a reserved or free page (p2v -1) is never moved.
    void validate_sources(const pool_core& core) const {
        for (std::int32_t p : *src) {
            UNIKV_EXPECTS(core.state(p) == page_state::live && core.table().virtual_of(p) > 0, "physical page ", p,
                          " of the ", to_string(core.spec().component),
                          " pool is not a live bound page; only bound pages move");
        }
    }

    /// Queues the batch `*src -> *dst` (whole envelopes, one copy) on the stream after every registered
    /// transfer event, then rebinds each page in the host tables. Preconditions: `validate_sources` passed and
    /// every destination is unowned. No host synchronization.
    void commit(pool_core& core) {
        if (src->empty()) return;
        if (!events_waited) {
            events->wait_all(stream);
            events_waited = true;
        }
        const std::size_t page_bytes = core.spec().page_bytes;
        backend.copy_pages_async(arena, *src, arena, *dst, page_bytes, stream);
        for (std::size_t i = 0; i < src->size(); ++i) core.move_page((*src)[i], (*dst)[i]);
        pages_moved += src->size();
        bytes_moved += src->size() * page_bytes;
    }
};

}  // namespace unikv::detail

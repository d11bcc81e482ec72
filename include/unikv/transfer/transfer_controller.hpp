#pragma once
/// \file
/// `TransferController<B, HostPools, Tag>`: the write (device to host) and load (host to device) queues of the
/// host tier, their submission on one transfer stream, the acknowledgements, the per-layer load events and
/// the host-transfer move gate.
///
/// Composition (move safety): the controller holds a `backend_ref<B>`, its own transfer stream, its queues
/// and events, and the allocator's host-transfer gate hold. The allocator and the host pools are arguments
/// of each call, never members: a cache that composes allocator, host pools, tree and controller side by
/// side can be moved with transfers in flight, because no part points at another. The gate hold points at
/// the allocator's heap gate state, and a host lease lives only inside one `start_*` call.
///
/// Ordering rules (reference §11 rules 1, 3, 4):
/// * queueing translates device ids to physical pages; they stay valid because the host-transfer gate
///   (`MoveGateSlot::host_transfer`) is held from the first queued transfer until none is queued or
///   unacknowledged, so no page moves under a queued or running copy;
/// * `start_*` makes the transfer stream wait for everything queued on the allocator's stream so far (moves
///   that ran before the ids were translated), submits, then registers the done event with the allocator
///   (`set_transfer_done_event({owner(), direction}, event)`), so every later move waits for the copy;
/// * acks come back in submission order (one stream, FIFO) and only for copies whose event completed; a
///   D2H source or H2D target must stay owned (locked) by the caller until its ack.
///
/// Threading: one thread drives a controller, like the allocator it serves. A controller serves one allocator
/// (its gate hold and its registered events are that allocator's). Declare it after the allocator and the
/// host pools in a composed owner: it is destroyed first, and its stream finishes the copies into their
/// memory before they go. The allocator may still name its done events: do not flush an allocator whose
/// controller is gone (tear the two down together).

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <type_traits>
#include <utility>
#include <vector>

#include <unikv/backend/backend_concept.hpp>
#include <unikv/backend/backend_ref.hpp>
#include <unikv/component.hpp>
#include <unikv/error.hpp>
#include <unikv/ids.hpp>
#include <unikv/pools/move_gates.hpp>
#include <unikv/pools/transfer_events.hpp>
#include <unikv/pools/unified_allocator.hpp>

namespace unikv {

/// How a load is submitted.
enum class LoadEvents : std::uint8_t {
    per_layer,  ///< layer by layer, one event per layer: layer i computes while layer i+1 loads
    whole,      ///< whole envelopes in one go; every layer waits on the batch's one event
};

/// Runtime options of a `TransferController`.
struct TransferOptions {
    /// How loads are submitted (and what `wait_layer` waits on).
    LoadEvents load_events = LoadEvents::per_layer;
    /// The owner half of the controller's `TransferKey`s; 0 picks a fresh process-wide id.
    std::uint64_t owner = 0;
};

/// The device and host sides of one transfer, per component; a component with empty spans takes no part.
/// * FULL: virtual pages and their host pages.
/// * SWA: virtual pages whose SWA rows are read (write) or written (load) through the FULL->SWA mapping live
///   at queue time, or, for a load only, `swa_reserved`: the physical pages of a `Reservation` (bound or
///   not), e.g. `reservation.pages()`. At most one of `swa` and `swa_reserved` is non-empty.
/// * Mamba: state ids and their host pages (one host page per state slot).
/// Host pages are logical pages the caller allocated from the host pools for this transfer.
struct TransferRequest {
    std::span<const VirtualPage> full{};           ///< FULL device pages
    std::span<const HostPage> full_host{};         ///< their host pages, one each
    std::span<const VirtualPage> swa{};            ///< SWA rows through the live FULL->SWA mapping
    std::span<const PhysicalPage> swa_reserved{};  ///< or (loads) reserved SWA physical pages
    std::span<const HostPage> swa_host{};          ///< host pages of `swa` or `swa_reserved`, one each
    std::span<const StateId> mamba{};              ///< Mamba state slots
    std::span<const HostPage> mamba_host{};        ///< their host pages, one each
};

/// The acknowledgement of one finished transfer. Its spans stay valid until the next check (or drain) of the
/// same direction on the controller that returned it.
template <class Tag>
struct TransferAck {
    /// The tag given when the transfer was queued.
    Tag tag{};
    /// Write (device to host) or load (host to device).
    TransferDirection direction = TransferDirection::write;
    /// The components the transfer copied.
    ComponentMask components{};
    /// The host pages of each component, in the order queued.
    per_component<std::span<const HostPage>> host{};
    /// False when the transfer's done event reports `failed()` (a copy behind it on the transfer stream
    /// failed): a failed load must not be committed (its rows hold garbage), a failed write must not become a
    /// host value; the caller frees what it allocated for it.
    bool succeeded = true;
};

/// The transfer controller (see the file comment). `HostPools` is a host-pool impl (`P::impl<B, L>` of a
/// policy of `host/host_pool_concept.hpp`) offering `lease()`; `Tag` is what each ack hands back (a node
/// ref, a request id). Move-only. No template argument has a default: nvcc mishandles one on a class
/// template whose members are defined out of line.
template <class B, class HostPools, class Tag>
class TransferController {
    static_assert(is_backend_v<B>, "unikv: TransferController needs a Backend (see backend/backend_concept.hpp)");
    static_assert(std::is_copy_constructible_v<Tag> && std::is_nothrow_move_constructible_v<Tag>,
                  "unikv: TransferController's Tag is returned in each ack by copy and moved with its record; use a "
                  "copyable, nothrow-movable tag (a node ref, a request id)");

public:
    using backend_type = B;
    using host_pools_type = HostPools;
    using tag_type = Tag;
    using ack_type = TransferAck<Tag>;
    using stream_ref = typename B::stream_ref;
    using event_ref = typename B::event_ref;

    /// A controller with its own transfer stream from `backend` (which must outlive it at its address).
    explicit TransferController(B& backend, TransferOptions options = {});
    TransferController(const TransferController&) = delete;
    TransferController& operator=(const TransferController&) = delete;
    /// Moves every queue, event and the gate hold; transfers in flight stay valid and are acked through the
    /// moved-to controller.
    TransferController(TransferController&&) noexcept = default;
    /// Precondition: `*this` has nothing in flight (its stream is finished and its unacked transfers would
    /// be lost with their acks).
    TransferController& operator=(TransferController&&) noexcept = default;
    /// Finishes the transfer stream's queued work (the owned stream does), then releases the gate.
    ~TransferController() = default;

    // ---- queueing (hot) ------------------------------------------------------------------------------------
    /// Queues a device-to-host copy of `request`'s device rows into its host pages, handing `tag` back at the
    /// ack. Translates the device ids now (the gate keeps them in place) and closes the host-transfer gate
    /// if it is open. Nothing is submitted until `start_writing`. Throws `logic_error` (nothing queued) for
    /// unequal device/host counts, a component the layout lacks, `swa_reserved` on a write, or an id that
    /// translates to the sink (unallocated, or an SWA tombstone). O(pages); allocates only while a recycled
    /// record is smaller than the request.
    template <class L>
    void queue_write(UnifiedAllocator<L, B>& alloc, const TransferRequest& request, Tag tag);
    /// Queues a host-to-device copy of `request`'s host pages into its device rows (see `queue_write`).
    template <class L>
    void queue_load(UnifiedAllocator<L, B>& alloc, const TransferRequest& request, Tag tag);

    // ---- submission ----------------------------------------------------------------------------------------
    /// Submits every queued write on the transfer stream (O(pages), one stream wait, one event record per
    /// transfer): one host lease translates the host pages,
    /// `copy_pages_async` copies each component's envelopes, an event is recorded after each transfer, the
    /// lease is released after the last one, and that event is registered with `alloc` under
    /// `{owner(), write}`. First makes the transfer stream wait the allocator's stream (one stream wait).
    /// Never blocks the host. Returns the number of transfers submitted (0: no stream work at all).
    /// Throws `logic_error` (what the lease throws) for a host page not allocated to its component, and for
    /// a write that lists one host page twice; every queued write is then dropped, unsubmitted (the caller
    /// still owns what it locked and allocated for them).
    template <class L>
    std::size_t start_writing(UnifiedAllocator<L, B>& alloc, HostPools& host);
    /// Submits every queued load like `start_writing`. With `LoadEvents::per_layer` the copies go layer by
    /// layer (`copy_page_slices_async` with each pool's `layer_slice(l)`; Mamba whole envelopes before layer
    /// 0) and an event is recorded after each layer; `wait_layer` waits on them. Registers the last event
    /// under `{owner(), load}`, which submits every pending reservation of `alloc`. Throws like
    /// `start_writing`, and for queued loads that write one device page twice (the queue is dropped).
    template <class L>
    std::size_t start_loading(UnifiedAllocator<L, B>& alloc, HostPools& host);

    // ---- acknowledgement -----------------------------------------------------------------------------------
    /// Acknowledges, in submission order, the submitted writes whose event completed, stopping at the first
    /// one still running. Never blocks (`event.query()`). The acks stay valid until the next write check or
    /// drain. Reopens the gate when nothing is queued or unacknowledged any more. O(acks + 1).
    [[nodiscard]] std::span<const ack_type> writing_check();
    /// Acknowledges finished loads like `writing_check`.
    [[nodiscard]] std::span<const ack_type> loading_check();
    /// The write-back drain: blocks the host until every submitted write finished (one synchronization, of
    /// the last write's event), then acknowledges them all. Throws `logic_error` when writes are queued but
    /// not submitted (call `start_writing` first: a drain that skipped them would let the caller free rows a
    /// queued copy still reads).
    [[nodiscard]] std::span<const ack_type> drain_writes();

    // ---- per-layer load events -----------------------------------------------------------------------------
    /// Makes `compute` wait until layer `layer` of the latest submitted load batch (and so of every earlier
    /// one: one FIFO stream) is on the device. A stream wait, never a host block; no-op before the first
    /// load. Throws `logic_error` for a layer outside `[0, layers())`. O(1).
    void wait_layer(stream_ref compute, std::int32_t layer) const;
    /// Layers of the load events: the most layers of the FULL and SWA pools (1 for Mamba only); 0 before
    /// the first load.
    [[nodiscard]] std::int32_t layers() const noexcept { return layers_; }

    // ---- state ---------------------------------------------------------------------------------------------
    /// True while a transfer is queued or submitted and not yet acknowledged (the gate is held exactly then).
    [[nodiscard]] bool has_inflight() const noexcept {
        return !writes_.queued.empty() || !loads_.queued.empty() || in_flight(TransferDirection::write) > 0 ||
               in_flight(TransferDirection::load) > 0;
    }
    /// Transfers queued and not yet submitted, per direction.
    [[nodiscard]] std::size_t queued(TransferDirection d) const noexcept { return lane(d).queued.size(); }
    /// Transfers submitted and not yet acknowledged, per direction.
    [[nodiscard]] std::size_t in_flight(TransferDirection d) const noexcept {
        const lane_state& l = lane(d);
        return l.running.size() - l.head;
    }
    /// Bytes of the copies submitted so far in direction `d` (whole envelopes per page, counted at
    /// submission): what the host link carried or will carry. O(1).
    [[nodiscard]] std::uint64_t bytes_submitted(TransferDirection d) const noexcept { return lane(d).bytes; }
    /// The transfer stream every copy is queued on. A caller whose writes read rows that a forward computes
    /// makes this stream wait the forward's event before `start_writing`.
    [[nodiscard]] stream_ref stream() const noexcept { return stream_.ref(); }
    /// The owner of this controller's transfer keys.
    [[nodiscard]] std::uint64_t owner() const noexcept { return owner_; }

private:
    using owned_event = owned_event_t<B>;
    using owned_stream = decltype(std::declval<B&>().make_stream());

    // One transfer. Records are recycled (their vectors keep their capacity), so steady-state queueing
    // allocates nothing. `done` is made on first use and kept for the record's next lives. Records move
    // when `records_` grows (nothrow, so their vectors' buffers, which acks point into, stay put).
    struct record {
        Tag tag{};
        ComponentMask components{};
        per_component<std::vector<std::int32_t>> device{};  // physical device pages, translated at queue time
        per_component<std::vector<HostPage>> host{};         // logical host pages
        per_component<std::vector<std::int32_t>> host_physical{};  // filled through the lease at submission
        std::optional<owned_event> done{};
    };
    // The records of one direction: queued (not submitted), running (a FIFO from `head`: submitted, not
    // acked), and retired (acked; their host pages back the spans of the acks last returned).
    struct lane_state {
        std::vector<std::uint32_t> queued;
        std::vector<std::uint32_t> running;
        std::size_t head = 0;
        std::vector<std::uint32_t> retired;
        std::vector<ack_type> acks;
        std::uint64_t bytes = 0;  // bytes submitted so far (`bytes_submitted`)
    };

    [[nodiscard]] lane_state& lane(TransferDirection d) noexcept { return d == TransferDirection::write ? writes_ : loads_; }
    [[nodiscard]] const lane_state& lane(TransferDirection d) const noexcept {
        return d == TransferDirection::write ? writes_ : loads_;
    }
    template <class L>
    void enqueue(UnifiedAllocator<L, B>& alloc, const TransferRequest& request, Tag&& tag, TransferDirection d,
                 const char* call);
    template <class L>
    void translate(const UnifiedAllocator<L, B>& alloc, const TransferRequest& request, record& r, Component c,
                   const char* call);
    // The lease's physical host pages of every queued record of `l` (and a load batch's gathered pages), the
    // checks of every copy's destinations, then the order wait on the allocator.
    template <class L, class Lease>
    void prepare_submission(UnifiedAllocator<L, B>& alloc, Lease& lease, lane_state& l, TransferDirection d);
    // True when no page repeats in `pages`. O(n) with `marks_`, which it leaves all zero.
    [[nodiscard]] bool distinct(std::span<const std::int32_t> pages);
    // Moves the queued records to the running FIFO, registers `last` and releases `lease` after it.
    template <class L, class Lease>
    void finish_submission(UnifiedAllocator<L, B>& alloc, Lease&& lease, lane_state& l, TransferDirection d,
                           event_ref last);
    [[nodiscard]] event_ref done_event(record& r);
    [[nodiscard]] std::span<const ack_type> acknowledge(lane_state& l, TransferDirection d);
    void recycle(lane_state& l) noexcept;
    void release_gate_if_idle() noexcept;

    backend_ref<B> backend_;
    TransferOptions options_;
    std::uint64_t owner_;
    owned_stream stream_;
    std::optional<owned_event> order_;        // recorded on the allocator's stream at each submission
    std::vector<owned_event> layer_events_;   // per layer of the latest load batch
    std::int32_t layers_ = 0;
    std::vector<record> records_;             // indexed by the lanes; addresses change, vector buffers do not
    std::vector<std::uint32_t> free_records_;
    lane_state writes_;
    lane_state loads_;
    std::vector<PhysicalPage> scratch_;       // translation output, reused
    per_component<std::vector<std::int32_t>> batch_device_{};  // a load batch's pages, gathered per component
    per_component<std::vector<std::int32_t>> batch_host_{};
    std::vector<std::uint8_t> marks_;         // per page index: seen by the current `distinct` call
    MoveGateHold hold_;                       // held exactly while a transfer is queued or unacked
};

}  // namespace unikv

#include <unikv/detail/transfer/transfer_controller.inl>

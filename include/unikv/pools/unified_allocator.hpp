#pragma once
/// \file
/// `UnifiedAllocator<Layout, Backend>`: the engine-facing allocator over one arena shared by the FULL, SWA
/// and Mamba sub-pools of a layout. It mints virtual page ids (FULL) and state ids (Mamba), binds SWA to
/// FULL's ids, translates virtual ids to physical ones for kernels, hands out physical reservations for
/// host-to-device loads, and moves pages (always through the backend's copies on its stream, then a
/// rebind: the data follows the virtual id) only when no reservation, move gate or running forward forbids
/// it.
///
/// Threading: one thread drives an allocator. Synchronization: allocation, frees, tombstones, translation,
/// reservations, binds and cancels never touch the stream (they only mark page-table chunks dirty), except
/// where they move or fill pages: an eager pool's free, an allocation whose shortfall ladder compacts, and
/// handed-out pages under `HandoutFill::zero`. Compaction only queues copies, stream waits and the refresh
/// of the device page tables on the stream, and never blocks the host. Kernels that use translated ids take
/// `device_tables()` right before they are queued on `stream()` (or on a stream that waits it), so that they
/// run after the moves queued before them.
///
/// Misuse (double free, freeing a tombstone or an unallocated id, binding an unreserved page, cancelling a
/// submitted reservation, a component the layout lacks) throws `logic_error` naming the call and the id
/// and leaves the allocator exactly as it was. Expected failures (no room, moves blocked) are results.

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <unikv/component.hpp>
#include <unikv/pools/layout.hpp>
#include <unikv/arena/model.hpp>
#include <unikv/backend/backend_concept.hpp>
#include <unikv/backend/backend_ref.hpp>
#include <unikv/backend/page_copy.hpp>
#include <unikv/detail/pools/move_context.hpp>
#include <unikv/error.hpp>
#include <unikv/ids.hpp>
#include <unikv/pools/eager_end_pool.hpp>
#include <unikv/pools/float_pool.hpp>
#include <unikv/pools/forward_hazards.hpp>
#include <unikv/pools/lazy_end_pool.hpp>
#include <unikv/pools/move_gates.hpp>
#include <unikv/pools/page_table.hpp>
#include <unikv/pools/page_table_mirror.hpp>
#include <unikv/pools/pool_policy_concept.hpp>
#include <unikv/pools/reservation.hpp>
#include <unikv/pools/results.hpp>
#include <unikv/pools/transfer_events.hpp>

namespace unikv {

/// What the allocator writes into freshly handed-out pages.
enum class HandoutFill : std::uint8_t {
    none,  ///< nothing (the page keeps whatever bytes it had)
    zero,  ///< zero the envelope with a fill queued on the stream (kernels that read whole pages need it)
};

/// Runtime options of a `UnifiedAllocator` beyond the arena geometry.
struct AllocatorOptions {
    std::size_t max_moves_per_opportunistic_flush = 64;  ///< page moves per pool per opportunistic flush
    HandoutFill handout_fill = HandoutFill::none;
};

/// A reservation that was returned by `alloc_physical`, or why none was.
struct [[nodiscard]] ReserveResult {
    Reservation reservation;
    Shortfall shortfall = Shortfall::none;
    /// The pages missing of the pool that fell short (a count of 0 on success); see `AllocResult::missing`.
    Pages missing{};
    explicit operator bool() const noexcept { return shortfall == Shortfall::none; }
};

namespace detail {
/// Owns the arena buffer. Queued copies and fills on the allocator's stream write into the arena, so the
/// owner synchronizes that stream once before the buffer is freed (destruction, or being assigned over).
template <class B>
class arena_owner {
public:
    using buffer_t = device_buffer_t<B>;
    arena_owner(buffer_t buffer, typename B::stream_ref stream) : buffer_(std::move(buffer)), stream_(stream), engaged_(true) {}
    arena_owner(const arena_owner&) = delete;
    arena_owner& operator=(const arena_owner&) = delete;
    arena_owner(arena_owner&& o) noexcept
        : buffer_(std::move(o.buffer_)), stream_(o.stream_), engaged_(std::exchange(o.engaged_, false)) {}
    arena_owner& operator=(arena_owner&& o) noexcept {
        if (this != &o) {
            quiesce();
            buffer_ = std::move(o.buffer_);
            stream_ = o.stream_;
            engaged_ = std::exchange(o.engaged_, false);
        }
        return *this;
    }
    ~arena_owner() { quiesce(); }
    [[nodiscard]] device_region_ref region() const noexcept { return buffer_.region(); }

private:
    void quiesce() noexcept {
        if (!engaged_) return;
        engaged_ = false;
        try {
            stream_.synchronize();
        } catch (...) {  // a destructor must not throw; the stream is gone with the backend anyway
        }
    }
    buffer_t buffer_;
    typename B::stream_ref stream_;
    bool engaged_;
};

/// Checks, one requirement at a time so the error names what is missing, that policy `P`'s `impl<B>` offers
/// what the unified allocator calls on a pool in `P`'s role. Returns true, so it sits in a `static_assert`.
template <class P, class B>
consteval bool check_pool_impl() {
    using I = typename P::template impl<B>;
    using C = move_context<B>;
    static_assert(has_pool_constructor_v<I>,
                  "unikv: a pool policy's impl<Backend> lacks a constructor impl(const SubPoolSpec&, std::int32_t "
                  "num_virtual, detail::id_source)");
    static_assert(has_pool_core_v<I>,
                  "unikv: a pool policy's impl<Backend> lacks core() returning detail::pool_core& (and const&)");
    static_assert(has_take_bound_v<I>,
                  "unikv: a pool policy's impl<Backend> lacks take_bound(ids, ByteBand, handed); add it (a template "
                  "over the id type) binding each id to a hole or a page grown inside the band");
    static_assert(has_take_reserved_v<I>,
                  "unikv: a pool policy's impl<Backend> lacks take_reserved(n, ByteBand, out, handed)");
    static_assert(has_release_page_v<I>, "unikv: a pool policy's impl<Backend> lacks release_page(page)");
    static_assert(has_after_release_v<I, C>, "unikv: a pool policy's impl<Backend> lacks after_release(move_context&)");
    static_assert(has_flush_v<I, C>,
                  "unikv: a pool policy's impl<Backend> lacks flush(move_context&, FlushMode, bool blocked, "
                  "std::size_t cap) returning FlushResult");
    static_assert(has_idle_v<I>, "unikv: a pool policy's impl<Backend> lacks idle() const returning bool");
    static_assert(has_flushable_v<I>, "unikv: a pool policy's impl<Backend> lacks flushable() const returning int32");
    static_assert(has_verify_v<I>,
                  "unikv: a pool policy's impl<Backend> lacks std::vector<std::string> verify() const");
    static_assert(has_byte_span_v<I>, "unikv: a pool policy's impl<Backend> lacks low_bytes() or high_bytes() const");
    static_assert(has_transparent_v<I>, "unikv: a pool policy's impl<Backend> lacks transparent() const");
    static_assert(has_project_v<I>,
                  "unikv: a pool policy's impl<Backend> lacks project(ByteBand room, std::int64_t pages, Projection) "
                  "const returning std::optional<ByteBand>; add it, answering the bytes the pool would claim in room "
                  "after taking pages more pages, or nullopt when they do not fit");
    if constexpr (!is_end_policy_v<P>) {
        static_assert(has_relocation_v<I, C>,
                      "unikv: a middle pool policy's impl<Backend> lacks relocatable() const or relocate_into(ByteBand, "
                      "move_context&)");
        static_assert(has_float_moves_v<I, C>,
                      "unikv: a middle pool policy's impl<Backend> lacks make_room(Side, bytes, ByteBand, "
                      "move_context&, blocked) or compact_holes(Side, move_context&, blocked)");
    }
    return true;
}

template <class L, class B, class Seq = std::make_index_sequence<L::size>>
struct pool_tuple;
template <class L, class B, std::size_t... I>
struct pool_tuple<L, B, std::index_sequence<I...>> {
    using type = std::tuple<typename layout_member_t<L, I>::policy::template impl<B>...>;
};
}  // namespace detail

/// The allocator over layout `L` on backend `B` (any `Backend`; it includes no backend itself, so a CUDA unit
/// pulls in no host backend and a host unit no CUDA). `B` has no default
/// argument because nvcc mishandles one on a class template whose members are defined out of line.
template <class L, class B>
class UnifiedAllocator {
    static_assert(has_stream_ref_v<B>, "unikv: UnifiedAllocator needs Backend::stream_ref with wait() and synchronize()");
    static_assert(has_event_ref_v<B>, "unikv: UnifiedAllocator needs Backend::event_ref with record(), query(), synchronize()");
    static_assert(has_memory_v<B>, "unikv: UnifiedAllocator needs Backend::allocate_device(bytes)");
    static_assert(has_page_copies_v<B>, "unikv: UnifiedAllocator needs Backend::copy_pages_async and fill_pages_async");
    // A layout that breaks a rule selects the stand-in below instead: one message, from `check_layout`.

    static constexpr std::size_t size_ = L::size;
    // A FULL-only layout has no up end: FULL grows down to the sink floor and has no growth-side neighbour.
    static constexpr bool has_up_end_ = size_ > 1;
    // The members by role, in chain order. A role the layout lacks gets `size_`, an index no member has, so a
    // use outside an `if constexpr` on the role does not compile.
    static constexpr std::size_t up_index = has_up_end_ ? 0 : size_;
    static constexpr std::size_t float_index = layout_has_float_v<L> ? 1 : size_;
    static constexpr std::size_t down_index = size_ - 1;  // always FULL
    static constexpr std::size_t full_index = down_index;
    static constexpr std::size_t swa_index = layout_index_of_v<L, Component::swa>;
    static constexpr std::size_t mamba_index = layout_index_of_v<L, Component::mamba>;
    template <std::size_t I>
    using impl_t = std::tuple_element_t<I, typename detail::pool_tuple<L, B>::type>;
    template <std::size_t I>
    static constexpr bool is_lazy_v = compaction_of_v<typename layout_member_t<L, I>::policy> == Compaction::lazy;
    static_assert([]<std::size_t... I>(std::index_sequence<I...>) {
        return (detail::check_pool_impl<typename layout_member_t<L, I>::policy, B>() && ...);
    }(std::make_index_sequence<size_>{}));
    static constexpr bool has_eager_ = !layout_allows_move_gates_v<L>;

public:
    using layout_type = L;
    using backend_type = B;
    using stream_ref = typename B::stream_ref;
    using event_ref = typename B::event_ref;
    /// The layout has an SWA pool (composite allocations bind FULL and SWA pages under one id).
    static constexpr bool has_swa = layout_has_v<L, Component::swa>;
    /// The layout has a Mamba pool (`alloc_state` / `free_state`).
    static constexpr bool has_mamba = layout_has_v<L, Component::mamba>;
    /// The layout is a tri-pool with a floating SWA pool (`make_room` / `compact_holes`).
    static constexpr bool has_float = layout_has_float_v<L>;
    /// Some pool takes physical reservations (`alloc_physical` and friends).
    static constexpr bool has_reservations =
        has_swa && reservations_enabled_v<typename layout_member_t<L, (swa_index < size_ ? swa_index : 0)>::reservations>;

    /// Builds the arena (`config.arena_bytes` from `backend.allocate_device`), its pools and the device
    /// mirrors of their v2p tables (uploaded by copies queued on `stream`). Throws `logic_error` for a bad
    /// configuration (with what to change), `out_of_memory` if the arena cannot be allocated. Every copy,
    /// fill and stream wait the allocator issues goes to `stream`. Destroying the allocator synchronizes
    /// `stream` once (its queued moves write into the arena and mirrors it frees); reservations must not
    /// outlive it, and `backend` must outlive it at the same address (it is held as a `backend_ref`).
    UnifiedAllocator(B& backend, const ArenaConfig& config, stream_ref stream, AllocatorOptions options = {});
    UnifiedAllocator(const UnifiedAllocator&) = delete;
    UnifiedAllocator& operator=(const UnifiedAllocator&) = delete;
    UnifiedAllocator(UnifiedAllocator&&) noexcept = default;
    UnifiedAllocator& operator=(UnifiedAllocator&&) noexcept = default;
    ~UnifiedAllocator() = default;

    // ---- geometry ----------------------------------------------------------------------------------------
    [[nodiscard]] const ArenaSpec& spec() const noexcept { return spec_; }
    /// The arena: physical page `P` of pool `c` is bytes `[P * spec()[c].page_bytes, (P + 1) * ...)`.
    [[nodiscard]] device_region_ref region() const noexcept { return arena_.region(); }
    [[nodiscard]] stream_ref stream() const noexcept { return stream_; }
    /// The page table of pool `c` (v2p is indexed by FULL's virtual pages for SWA). Throws for an absent `c`.
    [[nodiscard]] const PageTable& page_table(Component c) const { return core_of(c, "page_table").table(); }

    // ---- allocation (hot) --------------------------------------------------------------------------------
    /// Allocates `out.size()` virtual pages: a FULL page each and, with SWA, an SWA page under the same id.
    /// Runs the shortfall ladder (flush the growth-side neighbours, ask the float for room) when needed.
    /// On failure nothing changes and the result says why. O(n) without compaction; no allocation.
    AllocResult alloc(std::span<VirtualPage> out);
    /// Allocates `out.size()` virtual pages with a FULL page each and an SWA tombstone under each id: the
    /// destination of a FULL load-back, whose SWA rows (if any) come later through `alloc_physical` and
    /// `bind_swa`. Without an SWA pool it is exactly `alloc`. Same shortfall ladder, failure results and cost
    /// as `alloc`: O(n) without compaction; no allocation.
    AllocResult alloc_full(std::span<VirtualPage> out);
    /// Allocates the tokens `[prefix_lens[i], seq_lens[i])` of each request: first the rest of the page
    /// that holds token `prefix_lens[i] - 1` (continuing `last_locs[i]`), then new pages. `out` receives
    /// the virtual token ids in request order and must hold exactly the sum of the extensions. Throws
    /// `logic_error` for inconsistent inputs. O(tokens).
    AllocResult alloc_extend(const ExtendBatch& batch, std::span<VirtualToken> out);
    /// Allocates one token per request: a new page when `seq_lens[i] - 1` starts one, else
    /// `last_locs[i] + 1`. `out.size()` must equal the batch size. O(batch).
    AllocResult alloc_decode(const DecodeBatch& batch, std::span<VirtualToken> out);
    /// Frees whole virtual pages: the SWA page where one is bound (tombstones are skipped), then the FULL page
    /// and the id. Throws `logic_error` (nothing freed) for an id that is not allocated, listed twice, bound to
    /// an SWA page of a pending reservation, or, freed `by` a request, held by the tree (`hold`). A free `by`
    /// the tree releases the hold. Lazy pools: O(n), no copy, no stream work.
    void free(std::span<const VirtualPage> pages, Holder by = Holder::request) {
        free_virtual<free_part::whole>(pages, by, "free");
    }
    /// Tombstones: frees only the SWA pages of `pages` (FULL stays live, and so does a hold). Throws as `free`,
    /// and for an id whose SWA entry already is a tombstone (never free a tombstone). Needs an SWA pool (compile
    /// time).
    void free_swa(std::span<const VirtualPage> pages, Holder by = Holder::request) {
        free_virtual<free_part::swa>(pages, by, "free_swa");
    }
    /// Frees only the FULL pages (and ids) of `pages`, whose SWA entries must already be tombstones. Throws
    /// as `free`, and for an id that still has an SWA page.
    void free_full(std::span<const VirtualPage> pages, Holder by = Holder::request) {
        free_virtual<free_part::full>(pages, by, "free_full");
    }
    /// Throws `logic_error` naming `call` and the page (nothing changes) unless every page of `pages` is
    /// allocated: what the cache checks before its tree takes pages. O(n).
    void expect_allocated(std::span<const VirtualPage> pages, const char* call) const;
    /// As above, for Mamba state slots. Needs a Mamba pool.
    void expect_allocated(std::span<const StateId> states, const char* call) const;
    /// Marks allocated `pages` as held by the cache's tree: from then on a request's `free`, `free_swa` or
    /// `free_full` of one throws, and only a free by `Holder::tree` frees it (and releases the hold). Idempotent
    /// for a page already held. Precondition (`expect_allocated`): every page is allocated. O(n).
    void hold(std::span<const VirtualPage> pages) noexcept;
    /// As `hold`, for Mamba state slots (`free_state`); precondition as above. Needs a Mamba pool.
    void hold(std::span<const StateId> states) noexcept;
    /// How the allocator sees virtual page `v`, for cross-checks (`Cache::verify`). O(1).
    struct PageStatus {
        bool allocated = false;  ///< a live FULL page
        bool swa_bound = false;  ///< an SWA page is bound under it (not a tombstone)
        bool held = false;       ///< held by the tree (`hold`)
    };
    [[nodiscard]] PageStatus status(VirtualPage v) const noexcept;
    /// As above, for a Mamba state slot (`swa_bound` is false). O(1).
    [[nodiscard]] PageStatus status(StateId s) const noexcept;
    /// Pages held by the tree now (`hold`, less those freed by it). O(1).
    [[nodiscard]] std::int64_t held_pages() const noexcept { return held_pages_; }
    /// Executes the tree's `recover_swa_locked_full` action: the SWA page bound under `incoming[i]` is rebound
    /// under `kept[i]` (no copy: only page-table writes, whose dirty chunks the next publish sends to the
    /// device mirror), and `incoming[i]` is left with an SWA tombstone (the action's later `free_pages` frees
    /// it). Throws `logic_error` naming the id, with nothing changed, unless the spans have equal sizes, each
    /// `kept[i]` is live with an SWA tombstone, each `incoming[i]` is live with an SWA page that belongs to no
    /// pending reservation, and no id is listed twice. Needs an SWA pool (compile time). O(n), no stream work.
    void transfer_swa(std::span<const VirtualPage> kept, std::span<const VirtualPage> incoming);
    /// Allocates `out.size()` Mamba state slots. Needs a Mamba pool (compile time).
    AllocResult alloc_state(std::span<StateId> out);
    /// Frees Mamba state slots. Throws for a slot that is not allocated, listed twice, or, freed `by` a request,
    /// held by the tree (`hold`); a free `by` the tree releases the hold.
    void free_state(std::span<const StateId> states, Holder by = Holder::request);
    /// Queues a copy of Mamba state `from` into state `to` (whole slots) on `stream()`, after the work queued
    /// there (the forward that computed `from`, earlier moves): a checkpoint of a running state, or a request
    /// starting from a cached one. Throws `logic_error` (nothing queued) unless both are allocated and differ.
    /// Needs a Mamba pool. O(1), no allocation.
    void copy_state(StateId from, StateId to);

    // ---- translation (hot; allocation-free; unmapped, negative, out-of-range ids give the sink) -----------
    /// Physical FULL tokens of virtual tokens. Precondition: `out.size() >= in.size()`. O(n).
    void translate_full(std::span<const VirtualToken> in, std::span<PhysicalToken> out) const;
    /// Physical FULL pages of virtual pages.
    void translate_full(std::span<const VirtualPage> in, std::span<PhysicalPage> out) const;
    /// Physical SWA tokens of virtual tokens (tombstones give the sink). Needs an SWA pool.
    void translate_swa(std::span<const VirtualToken> in, std::span<PhysicalToken> out) const;
    void translate_swa(std::span<const VirtualPage> in, std::span<PhysicalPage> out) const;
    /// Physical Mamba slots (pages of one slot) of state ids. Needs a Mamba pool.
    void translate_state(std::span<const StateId> in, std::span<PhysicalPage> out) const;
    /// The device page tables, for kernels that translate on the device (`pools/device_translate.cuh`):
    /// first publishes every pool's v2p changes since the last publish to its device mirror, one copy per
    /// changed pool queued on `stream()`. Contract: call it right before queueing kernels that read
    /// translated ids on `stream()` (or on a stream that waits it); such a kernel sees the mapping as of this
    /// call, and every move queued before it has run first (same stream). Calls that move pages (flush,
    /// make_room, compact_holes, eager frees, an allocation that compacts) publish on their own. The tables
    /// stay valid (same pointers) while the allocator lives; absent components have `v2p == nullptr`.
    /// Never waits for the device. O(pools) with nothing to publish; else O(changed 64-entry chunks) plus one
    /// copy per changed pool. Allocates a pinned staging slab only while more than two publishes of a pool
    /// are in flight (on CUDA `cudaHostAlloc`, which is slow); `CudaBackend` copies themselves wait (a counted
    /// host synchronization) only when its index ring is full of copies still in flight.
    [[nodiscard]] DeviceTables device_tables();

    // ---- transfers ---------------------------------------------------------------------------------------
    /// Reserves `pages` unbound physical pages of pool `c` for a load (holes first; the shortfall ladder when
    /// short). They block that pool's moves until their load is submitted or they are cancelled. Never waits
    /// on a transfer event. Throws `logic_error` when `c` takes no reservations or `pages < 1`.
    ReserveResult alloc_physical(Component c, std::int32_t pages);
    /// Binds `full_pages[i]` to `reservation.pages()[first + i]`. Each FULL page must be live with a
    /// tombstoned SWA entry; each reserved page unbound. Throws `logic_error` (nothing bound) otherwise.
    void bind_swa(std::span<const VirtualPage> full_pages, const Reservation& reservation, std::size_t first = 0);
    /// Releases a reservation whose load was not submitted: its pages become free and bound ones get their
    /// tombstone back. Throws `logic_error` for a submitted, foreign or empty reservation (it then stays
    /// valid). No stream work.
    void cancel(Reservation&& reservation);
    /// Releases pages of submitted reservations (unbound, or bound: those get a tombstone) or any bound page
    /// of pool `c`. First makes the stream wait every registered transfer event. Throws `logic_error` for a
    /// page of a pending reservation (use `cancel`), a free page, or a page listed twice.
    void free_physical(Component c, std::span<const PhysicalPage> pages);
    /// Registers the done event of a transfer. A load key submits every pending reservation: their pages stop
    /// blocking moves and can no longer be cancelled. Queues nothing, never blocks.
    void set_transfer_done_event(TransferKey key, event_ref event);
    /// Closes the move gate `slot` on every pool at once until the returned hold is released or destroyed;
    /// holds of one slot compose (it reopens when the last is gone). The gate state stays on the heap, so
    /// moving the allocator or the holder keeps the hold working, and a hold that outlives the allocator is
    /// harmless. Compile-time error for a layout with an eager pool. O(1), never fails.
    [[nodiscard]] MoveGateHold install_move_gate(MoveGateSlot slot) noexcept;
    /// True when some pool's moves are blocked (a pending reservation, or a closed gate). O(pools).
    [[nodiscard]] bool moves_blocked() const;
    /// True when pool `c`'s moves are blocked.
    [[nodiscard]] bool moves_blocked(Component c) const;
    /// Registers the latest forward: its done event and the virtual pages / state slots it writes.
    /// Compaction never moves those pages while it runs, and reuses pages it may read only after it ends.
    void set_inflight_forward(event_ref done, std::span<const VirtualPage> written_pages = {},
                              std::span<const StateId> written_states = {}) {
        forward_.set(std::move(done), written_pages, written_states);
    }
    /// Forgets the registered forward.
    void clear_inflight_forward() noexcept { forward_.clear(); }

    // ---- compaction ----------------------------------------------------------------------------------------
    /// Compacts every pool whose moves are allowed (float: absorbs boundary holes only). Urgent packs every
    /// hole; opportunistic is capped and returns at once when there is nothing to do. Never blocks the
    /// host; moves wait every registered transfer event on the stream first.
    FlushResult flush(FlushMode mode);
    /// `flush(FlushMode::opportunistic)`: cheap (O(pools)) when there is nothing to do.
    FlushResult flush_opportunistic() { return flush(FlushMode::opportunistic); }
    /// Float: opens at least `min_bytes` between the float's `side` edge and that end (boundary relocation,
    /// or leapfrog). Returns the bytes open on `side`; fewer than asked means blocked or impossible, with
    /// nothing changed. Needs a FloatPool (compile time).
    std::size_t make_room(Side side, std::size_t min_bytes);
    /// Float: packs its live pages away from `retreat_side`; returns the pages moved (0 when blocked).
    std::size_t compact_holes(Side retreat_side);

    // ---- partitions ----------------------------------------------------------------------------------------
    /// Bounds the pages each pool may hold, bound and reserved together (`bounds[c]`; 0 leaves `c` unbounded):
    /// a static partition of the one arena, as engines with one pool per component have. An allocation past a
    /// bound falls short with `Shortfall::partition` of that pool however much the arena has free, so the
    /// caller evicts that pool's own pages, and every capacity query below counts the bound. Throws
    /// `logic_error` for a negative bound, a bound on a pool the layout lacks, one below what the pool holds
    /// now, or bounds whose pages together take more than the arena. O(pools).
    void bound_pages(const CapacityDemand& bounds);
    /// The page bound of pool `c` (0: unbounded). O(1).
    [[nodiscard]] std::int64_t page_bound(Component c) const noexcept { return bounds_[c]; }

    // ---- capacity (memoized on the chain epoch and the move-permission bits; O(1) on a hit) -----------------
    /// Pages a composite `alloc` can take now without any move (FULL + SWA jointly with SWA).
    [[nodiscard]] std::int64_t available_size() const;
    /// Pages pool `c` alone can take now without any move.
    [[nodiscard]] std::int64_t available_size(Component c) const;
    /// `available_size()` plus what the growth-side neighbours' flushable holes would add, credited only for
    /// lazy neighbours whose moves are allowed now (a gate flip changes it without any allocator write).
    [[nodiscard]] std::int64_t schedulable_available_size() const;
    [[nodiscard]] std::int64_t schedulable_available_size(Component c) const;
    /// True when `demand` fits now, or would fit after the compaction `ensure_capacity` may run.
    [[nodiscard]] bool can_reserve(const CapacityDemand& demand) const;
    /// Makes `demand` fit now, compacting if that is allowed and helps. Does not allocate.
    AllocResult ensure_capacity(const CapacityDemand& demand);
    /// Every broken invariant, one line each; empty means healthy. Callable any time. O(pages + ids).
    [[nodiscard]] std::vector<std::string> verify() const;

    // ---- diagnostics ---------------------------------------------------------------------------------------
    /// Bound pages of pool `c`.
    [[nodiscard]] std::int32_t live_pages(Component c) const { return core_of(c, "live_pages").live_pages(); }
    /// Holes of pool `c`.
    [[nodiscard]] std::int32_t hole_pages(Component c) const { return core_of(c, "hole_pages").hole_pages(); }
    /// Pages of pending reservations in pool `c`.
    [[nodiscard]] std::int32_t pending_load_pages(Component c) const {
        return core_of(c, "pending_load_pages").pending_load_pages();
    }
    /// Unbound reservation pages (pending or submitted) in pool `c`.
    [[nodiscard]] std::int32_t reserved_pages(Component c) const { return core_of(c, "reserved_pages").reserved_pages(); }
    /// Pages of pool `c` that wait for a forward before reuse.
    [[nodiscard]] std::int32_t pending_reuse_pages(Component c) const {
        return core_of(c, "pending_reuse_pages").pending_reuse_pages();
    }
    /// Pool `c`'s byte range `[low, high)` in the arena (empty at `high` for a parked float).
    [[nodiscard]] std::pair<std::size_t, std::size_t> byte_span(Component c) const;
    /// The chain epoch (sum of the pools' capacity epochs).
    [[nodiscard]] std::uint64_t epoch() const noexcept;
    /// Bytes every compaction (flushes, `make_room`, `compact_holes`, the moves an allocation makes) copied
    /// since construction: the page envelopes queued for moves, counted when queued. O(1).
    [[nodiscard]] std::uint64_t bytes_moved() const noexcept { return bytes_moved_; }
    /// Transfer events registered and not yet waited on.
    [[nodiscard]] std::size_t registered_transfer_events() const noexcept { return events_.size(); }
    /// Reservations of this allocator dropped without being submitted or cancelled: each was reported as
    /// `Dropped::reservation` (`dropped.hpp`) and cancelled.
    [[nodiscard]] std::size_t unconsumed_reservations() const noexcept { return registry_->unconsumed(); }

private:
    using pools_t = typename detail::pool_tuple<L, B>::type;

    // The component of the up end (its demand is what the down end's flushed holes must cover). A lone FULL
    // pool names FULL here, read only on paths that `has_up_end_` discards.
    static constexpr Component up_component_ = layout_member_t<L, 0>::component;

    // One flag per chain role (a role the layout lacks stays false).
    struct member_roles {
        bool up = false;
        bool middle = false;
        bool down = false;
        friend constexpr bool operator==(const member_roles&, const member_roles&) = default;
    };
    // What a capacity check assumes the shortfall ladder did first: `relieve` runs exactly these steps.
    struct relief_plan {
        member_roles flushed;         // urgent flushes: an end's holes and pending reuse return to its frontier;
                                      // the float absorbs its boundary holes (zero copy)
        bool relocate_float = false;  // then the float moves anywhere in the band the ends leave
        friend constexpr bool operator==(const relief_plan&, const relief_plan&) = default;
    };

    enum class memo_kind : std::uint8_t { available, schedulable };
    struct memo_entry {
        std::uint64_t epoch = ~std::uint64_t{0};
        relief_plan credit;  // the neighbours credited (schedulable), or none (available)
        std::int64_t value = 0;
    };
    // Memo slots: one per component, and `component_count` for the composite (FULL with SWA).

    template <std::size_t I>
    [[nodiscard]] impl_t<I>& pool() noexcept { return std::get<I>(*pools_); }
    template <std::size_t I>
    [[nodiscard]] const impl_t<I>& pool() const noexcept { return std::get<I>(*pools_); }
    [[nodiscard]] const detail::pool_core& core_of(Component c, const char* call) const;
    [[nodiscard]] detail::pool_core& core_of(Component c, const char* call) {
        return const_cast<detail::pool_core&>(std::as_const(*this).core_of(c, call));
    }
    template <class F>
    void for_each_pool(F&& f);
    template <class F>
    void for_each_pool(F&& f) const;

    // The bytes member I may occupy now: between the facing edges of its nearest non-transparent
    // neighbours (the sink floor and the arena's end where it has none).
    template <std::size_t I>
    [[nodiscard]] ByteBand band_of() const noexcept;
    // Binds `ids` in member I: from holes inline when they cover the batch, else through the policy.
    template <std::size_t I, class Id>
    void take_bound(std::span<const Id> ids);
    template <std::size_t I, class Id>
    void take_bound_slow(std::span<const Id> ids);
    template <std::size_t I>
    void fill_handed();
    // Runs `f(ctx)` with a fresh move context, then publishes the tables if it moved pages, so the device
    // mirrors follow every move at once, on the stream right behind its copies. Returns what `f` returns.
    template <class F>
    decltype(auto) with_moves(F&& f);
    void publish_tables();

    // Capacity engine (unified_allocator_capacity.inl).
    // The roles whose moves are allowed now (gates open, no pending reservation in the pool).
    [[nodiscard]] member_roles movable() const;
    // True when `d` fits once `plan` ran: each pool's `project`, chained. O(pools).
    [[nodiscard]] bool fits(const CapacityDemand& d, relief_plan plan, Blockers b) const;
    // The bytes the ends leave between them once they took their parts of `d` after `plan` (the down end
    // projects inside the arena, the up end inside what the down end leaves), or nullopt when one does not fit.
    [[nodiscard]] std::optional<ByteBand> between_ends(const CapacityDemand& d, relief_plan plan, Blockers b) const;
    // The compaction `relieve` may run for `d`: the lazy growth-side neighbours, and the float.
    [[nodiscard]] relief_plan relief_for(const CapacityDemand& d, Blockers b) const;
    [[nodiscard]] std::int64_t largest_fit(std::size_t shape, relief_plan plan) const;
    [[nodiscard]] relief_plan schedulable_credit(std::size_t shape, member_roles movable) const;
    [[nodiscard]] std::int64_t memoized(memo_kind kind, std::size_t shape) const;
    // Throws `logic_error` naming `call` for a negative demand or one on a pool the layout lacks.
    void check_demand(const CapacityDemand& d, const char* call) const;
    // The first pool whose bound `d` would pass, and by how many pages; {full, 0} when none. O(pools).
    [[nodiscard]] std::pair<Component, std::int64_t> past_bound(const CapacityDemand& d) const;
    // The fast path of `relieve`: holes and free ids cover the whole demand, so nothing else can matter. O(1).
    [[nodiscard]] bool covered_by_holes(const CapacityDemand& d) const noexcept;
    [[nodiscard]] AllocResult relieve(const CapacityDemand& d);
    [[nodiscard]] AllocResult shortfall_of(const CapacityDemand& d) const;

    // Allocation helpers (unified_allocator_alloc.inl).
    // What a new virtual page gets besides its FULL page.
    enum class swa_bind : std::uint8_t { with_swa, tombstone };
    // What the SWA entry of each checked page must be.
    enum class swa_entry : std::uint8_t { any, bound, tombstone };
    // Whether a check leaves the repeat marks of the pages set (the caller's release loop clears them).
    enum class repeat_marks : std::uint8_t { clear, keep };
    // Which part of a virtual page a free releases.
    enum class free_part : std::uint8_t { whole, swa, full };
    template <swa_bind S, class Id>
    AllocResult bind_new_pages(std::span<Id> out);
    AllocResult alloc_pages(std::int32_t n);
    template <swa_entry E, repeat_marks M>
    void check_virtual_pages(std::span<const VirtualPage> pages, Holder by, const char* call);
    template <free_part P>
    void free_virtual(std::span<const VirtualPage> pages, Holder by, const char* call);
    void check_last_loc(VirtualToken last, std::int32_t expected_offset, std::size_t request, const char* call) const;
    static void release_slot_pages(pools_t& pools, detail::reservation_registry& registry, std::uint32_t slot) noexcept;
    static void drop_reservation(void* owner, detail::reservation_registry& registry, std::uint32_t slot) noexcept;
    void verify_composite(std::vector<std::string>& out) const;

    backend_ref<B> backend_;  // the backend outlives the allocator (see backend_ref.hpp)
    ArenaSpec spec_;
    AllocatorOptions options_;
    stream_ref stream_;
    std::unique_ptr<pools_t> pools_;  // on the heap: reservations cancel through it even after a move
    std::array<PageTableMirror<B>, size_> mirrors_;  // one per pool, in layout order
    // Declared after the mirrors so it is destroyed first: its one stream synchronization also covers the
    // copies that read the mirrors' staging slabs and write their device tables.
    detail::arena_owner<B> arena_;
    detail::registry_owner registry_;
    TransferEvents<B> events_;
    MoveGates gates_;  // the gate counts live on its heap state, which holds point at across moves
    ForwardHazard<B> forward_;
    // Scratch buffers reused by every call, so hot paths allocate nothing once they reached peak size.
    std::vector<std::int32_t> ids_;
    std::vector<std::int32_t> handed_;
    std::vector<std::int32_t> move_src_;
    std::vector<std::int32_t> move_dst_;
    std::vector<std::uint8_t> marks_;  // per FULL virtual page (or Mamba id): seen in the current call
    // Per id, what the tree holds: bit `held_page` for FULL virtual page ids, `held_state` for Mamba ids.
    static constexpr std::uint8_t held_page = 1;
    static constexpr std::uint8_t held_state = 2;
    std::vector<std::uint8_t> held_;
    std::int64_t held_pages_ = 0;
    std::uint64_t bytes_moved_ = 0;    // every move's envelopes so far (`bytes_moved()`)
    mutable std::array<std::array<memo_entry, component_count + 1>, 2> memo_{};
    CapacityDemand bounds_{};  // `bound_pages`: 0 is unbounded
};

/// A layout that breaks a layout rule gets this empty stand-in, whose only member is the failing
/// `check_layout`: the rule's message is the one error, where the class above would add errors from members
/// computed over the bad layout.
template <class L, class B>
    requires(!is_valid_layout_v<L, B>)
class UnifiedAllocator<L, B> {
    static_assert(check_layout<L, B>());
};

}  // namespace unikv

#include <unikv/detail/pools/unified_allocator_alloc.inl>
#include <unikv/detail/pools/unified_allocator_capacity.inl>
#include <unikv/detail/pools/unified_allocator_transfer.inl>

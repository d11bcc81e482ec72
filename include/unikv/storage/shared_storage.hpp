#pragma once
/// \file
/// `SharedStorage`: one storage backend shared by several caches that one thread drives (an engine process's
/// data-parallel ranks, the simulator's instances over one storage tier).
///
/// A backend answers whoever polls it: `poll()` returns every batch completed, so two caches attached to one store
/// object would take each other's answers, and a `FileStorage` directory is locked by one store object. A
/// `SharedStorage` owns the one store and hands out **shares** (`share()`): each share is a storage backend of its
/// own (a cache attaches it, directly or inside an `AnyStorage`) that submits its batches to the shared store and
/// remembers their tickets as its own. A share's `poll` returns only its own batches: it hands back the answers
/// already collected for it, else polls the shared store, filing every other share's answers in that share's
/// inbox (their results copied, since the store's span lasts only until its next poll) until one of its own
/// arrives or `wait` has passed. Tickets are the store's, so they are unique across shares.
///
/// Lifetimes: the store's state is held on the heap, so a `SharedStorage` may be moved while shares exist; it must
/// not be destroyed (or assigned to) while any share of it exists (a debug build aborts). A share destroyed with
/// batches in flight does not wait for them: their answers are dropped when they arrive, and their buffers must stay
/// valid until then (a cache's destructor and `detach_storage` wait for its batches, so a cache's share is safe).
///
/// Costs: a submission is O(1) amortized plus the store's (a ticket's owner goes into a hash map whose nodes are
/// reused); a poll is O(answers filed) plus the store's (each answer's results are copied once, into buffers each
/// inbox keeps and reuses). Allocates until the buffers have grown. One thread drives every share and the
/// `SharedStorage` (the shares hold no lock).

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <span>
#include <unordered_map>
#include <utility>
#include <vector>

#include <unikv/storage/storage_concept.hpp>

namespace unikv {

namespace detail::storage {

// One answer collected for a share and not yet returned: its results are `results[first, first + count)` of the
// inbox (offsets, not a span, because the buffer grows while answers are filed).
struct filed_answer {
    StorageTicket ticket{};
    StorageOp op = StorageOp::get;
    std::size_t first = 0;
    std::size_t count = 0;
};

// A share's inbox: what was collected for it, and what its last poll returned (valid until its next poll).
struct share_inbox {
    bool live = false;
    std::size_t in_flight = 0;  // its batches submitted and not yet returned (filed ones included)
    std::vector<filed_answer> filed;
    std::vector<PageResult> filed_results;
    std::vector<StorageDone> out;
    std::vector<PageResult> out_results;
};

// Who owns which ticket of the shared store, and the shares' inboxes. Not a template: only the store is.
class share_board {
public:
    // An inbox for a new share (one a destroyed share left, when there is one).
    std::uint32_t open();
    // Lets go of `inbox`: its batches in flight are dropped when they arrive, its answers at once.
    void close(std::uint32_t inbox) noexcept;
    // Makes sure `own` cannot throw or allocate: a spare map node and bucket room. Call before submitting.
    void prepare();
    // Files `ticket` (just returned by the store) as `inbox`'s. Needs `prepare()` first; does not throw.
    void own(StorageTicket ticket, std::uint32_t inbox) noexcept;
    // Files each of `answers` in its owner's inbox (drops those of closed shares).
    void file(std::span<const StorageDone> answers);
    // Hands `inbox`'s filed answers back (as its `out`), valid until its next `take`.
    std::span<const StorageDone> take(std::uint32_t inbox);

    [[nodiscard]] share_inbox& inbox(std::uint32_t i) noexcept { return inboxes_[i]; }
    [[nodiscard]] const share_inbox& inbox(std::uint32_t i) const noexcept { return inboxes_[i]; }
    [[nodiscard]] std::size_t live() const noexcept { return live_; }

private:
    using owner_map = std::unordered_map<std::uint64_t, std::uint32_t>;
    // The owner of a ticket whose share was destroyed: its answer is dropped.
    static constexpr std::uint32_t dropped = std::numeric_limits<std::uint32_t>::max();

    std::vector<share_inbox> inboxes_;
    // Inboxes of destroyed shares, reused by new ones. Capacity: every inbox, so `close` never allocates.
    std::vector<std::uint32_t> free_;
    // Ticket value -> inbox (or `dropped`), for every batch in the store.
    owner_map owners_;
    // Map nodes of answered tickets, reused by the next submissions. Capacity: every node in existence, so filing
    // an answer never allocates for its node.
    std::vector<owner_map::node_type> spare_;
    std::size_t live_ = 0;
};

}  // namespace detail::storage

/// One storage backend `S` shared by several caches, through shares (see the file comment). Move-only; moving keeps
/// the shares valid. One thread drives it and all its shares. `S` must be a storage backend (a `unikv:` message
/// names the first member it lacks).
template <class S>
class SharedStorage {
    static_assert(check_storage_backend<S>());
    struct state;

public:
    /// A share: a storage backend (storage_concept.hpp) over the shared store that reports only its own batches.
    /// Move-only; an empty one (default-constructed or moved from) throws `logic_error` from `exists`, `get`, `put`
    /// and `poll`. Precondition: the `SharedStorage` it came from outlives it.
    class Share {
    public:
        /// The shared store's.
        static constexpr bool needs_separate_pools = needs_separate_pools_v<S>;

        Share() = default;
        Share(Share&& other) noexcept;
        Share& operator=(Share&& other) noexcept;
        Share(const Share&) = delete;
        Share& operator=(const Share&) = delete;
        /// Leaves its batches in flight to the store: their answers are dropped when they arrive, and their
        /// buffers must stay valid until then. Does not wait. O(batches in the store).
        ~Share();

        /// True when it is a share of a `SharedStorage`.
        [[nodiscard]] explicit operator bool() const noexcept { return state_ != nullptr; }

        // ---- the backend protocol (storage_concept.hpp) -------------------------------------------------------
        /// The shared store's `exists`, its ticket filed as this share's. O(1) amortized plus the store's.
        StorageTicket exists(std::span<const ObjectKey> keys);
        /// The shared store's `get`, its ticket filed as this share's. O(1) amortized plus the store's.
        StorageTicket get(std::span<const ObjectRead> items);
        /// The shared store's `put`, its ticket filed as this share's. O(1) amortized plus the store's.
        StorageTicket put(std::span<const ObjectWrite> items);
        /// This share's batches completed since its last call, valid until its next call: the answers already
        /// collected for it; when there are none and it has batches in flight, the shared store's, polled (up to
        /// `wait` in all) until one of its own arrives, every other share's answers filed for that share. Never
        /// blocks with `wait` 0 (one poll of the store); returns at once with nothing in flight. O(answers filed)
        /// plus the store's.
        std::span<const StorageDone> poll(std::chrono::nanoseconds wait = {});
        /// This share's batches submitted and not yet returned by its `poll`.
        [[nodiscard]] std::size_t in_flight() const noexcept;
        /// The shared store's counters (every share's objects together); zeros for an empty share.
        [[nodiscard]] StorageStats stats() const noexcept;

    private:
        friend class SharedStorage;
        Share(state* s, std::uint32_t inbox) noexcept : state_(s), inbox_(inbox) {}
        state& held(const char* call) const;
        void release() noexcept;

        state* state_ = nullptr;  // null: empty
        std::uint32_t inbox_ = 0;
    };

    /// Takes `store` (moved in) to share it.
    explicit SharedStorage(S store);
    SharedStorage(SharedStorage&&) noexcept = default;
    /// Precondition (debug: aborts): no share of `*this` exists.
    SharedStorage& operator=(SharedStorage&& other) noexcept;
    SharedStorage(const SharedStorage&) = delete;
    SharedStorage& operator=(const SharedStorage&) = delete;
    /// Precondition (debug: aborts): no share exists. Destroys the store (`FileStorage` finishes its batches in
    /// flight, those of destroyed shares included).
    ~SharedStorage();

    /// A new share of the store. Throws `logic_error` when moved from. O(1) amortized.
    [[nodiscard]] Share share();
    /// Shares that exist now.
    [[nodiscard]] std::size_t shares() const noexcept { return state_ != nullptr ? state_->board.live() : 0; }
    /// Batches in the store, every share's (a destroyed share's included until a poll takes their answers).
    [[nodiscard]] std::size_t in_flight() const noexcept { return state_ != nullptr ? state_->store.in_flight() : 0; }
    /// The store's counters.
    [[nodiscard]] StorageStats stats() const noexcept {
        return state_ != nullptr ? state_->store.stats() : StorageStats{};
    }
    /// The store, to inspect (`FileStorage::status()`, `verify()`); only shares submit and poll. Throws
    /// `logic_error` when moved from.
    [[nodiscard]] const S& store() const;

private:
    struct state {
        explicit state(S&& s) : store(std::move(s)) {}
        S store;
        detail::storage::share_board board;
    };

    std::unique_ptr<state> state_;  // heap-held: shares point at it, so moving this object keeps them valid
};

/// The share type of a `SharedStorage<S>`, for a cache bundle (`using storage = StorageShare<FileStorage>;`).
template <class S>
using StorageShare = typename SharedStorage<S>::Share;

}  // namespace unikv

#include <unikv/detail/storage/shared_storage.inl>

#pragma once
/// \file
/// `Sequence`: one request of an engine, as a handle the engine owns and `Cache` drives. It keeps what every
/// engine otherwise rewrites between admission and insert: the request's tokens, the virtual row of each token
/// (the tree's prefix rows, then its own), its lock on the cached prefix, its Mamba state, its SWA cursor and a
/// retraction backup. The engine reads it (`length`, `compute_from`, `Cache::rows`) and changes it only through
/// the cache:
///
/// | call                      | from             | to          | what the cache does                               |
/// |---------------------------|------------------|-------------|---------------------------------------------------|
/// | `Cache::admit`            | idle             | running     | admission, the prefix rows of its one match, the   |
/// |                           |                  |             | first chunk's rows, a state from the prefix's      |
/// | `Cache::extend`           | running, chunked | running     | the next chunk (after `checkpoint`)                |
/// | `Cache::decode` (batch)   | running, decode  | running     | one row each; its SWA window slides                |
/// | `Cache::checkpoint`       | running          | running     | its whole pages into the tree, its lock moved there |
/// | `Cache::retract`          | running          | retracted   | own rows backed up (where it can) and freed        |
/// | `Cache::restore`          | retracted        | running     | admission, the backup copied back or a recompute   |
/// | `Cache::finish`           | running          | idle        | whole pages into the tree, the rest freed          |
/// | `Cache::release`          | running/retracted| idle        | everything freed, nothing cached (an abort)        |
///
/// A call from any other status, or with a handle another cache admitted, throws `logic_error` naming the
/// misuse and changes nothing. The handle never frees or tombstones a row of the prefix the tree owns: its
/// own rows start at `prefix_length()`, which only a checkpoint moves forward (the checkpointed pages become
/// the tree's).
///
/// Allocation: `admit` reserves room for the prompt and `max_new_tokens`, so `decode` never allocates.
/// Move-only (the moved-from handle is idle). A handle destroyed while running reports its lock as dropped and
/// while retracted its backup (`dropped.hpp`); its own pages and state are not freed (the handle cannot reach
/// the cache): finish or release it first. A cache that is moved keeps its handles.

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include <unikv/cache/retention.hpp>
#include <unikv/ids.hpp>
#include <unikv/transfer/retraction.hpp>
#include <unikv/tree/handles.hpp>
#include <unikv/tree/keys.hpp>

namespace unikv {

namespace detail::cache {
template <class P>
class CacheCore;
}  // namespace detail::cache

/// One engine request (see the file comment).
class Sequence {
public:
    /// Where the request stands.
    enum class Status : std::uint8_t {
        idle,       ///< never admitted, finished or released: `admit` starts it
        running,    ///< admitted: prefilling (`prefilling()`) or decoding
        retracted,  ///< preempted by `retract`: `restore` brings it back
    };

    Sequence() = default;
    /// Takes over `other`'s request; `other` becomes idle (empty).
    Sequence(Sequence&& other) noexcept : Sequence() { take(other); }
    /// Takes over `other`'s request; a request this handle still ran is reported as dropped (its lock).
    Sequence& operator=(Sequence&& other) noexcept {
        if (this != &other) take(other);
        return *this;
    }
    Sequence(const Sequence&) = delete;
    Sequence& operator=(const Sequence&) = delete;
    ~Sequence() = default;

    [[nodiscard]] Status status() const noexcept { return status_; }
    /// Rows the request has: tokens `[0, length())`, prefix included (those its next forward computes too).
    [[nodiscard]] std::int32_t length() const noexcept { return static_cast<std::int32_t>(rows_.size()); }
    /// Rows `[0, prefix_length())` are the tree's (read, never written); the request's own rows follow.
    [[nodiscard]] std::int32_t prefix_length() const noexcept { return prefix_; }
    /// The next forward computes rows `[compute_from(), length())`: rows before it are known computed (a
    /// decode, checkpoint or finish says the rows before it were). Empty after a checkpoint; after a restore
    /// that copied rows back, the rows that were not known computed when it was retracted (a decoding
    /// handle's last row).
    [[nodiscard]] std::int32_t compute_from() const noexcept { return compute_from_; }
    /// True while its prompt is not all computed (a chunked prefill: `checkpoint`, then `extend`).
    [[nodiscard]] bool prefilling() const noexcept { return length() < fill_; }
    /// Its tokens: the prompt, then every decoded token (`tokens().size() >= length()`).
    [[nodiscard]] std::span<const TokenId> tokens() const noexcept { return tokens_; }
    /// Tokens decoded so far, of at most `max_new_tokens()`.
    [[nodiscard]] std::int32_t decoded() const noexcept { return decoded_; }
    [[nodiscard]] std::int32_t max_new_tokens() const noexcept { return max_new_; }
    /// Its own SWA rows before this were tombstoned as the window slid (`prefix_length()` when none were).
    [[nodiscard]] std::int32_t swa_start() const noexcept { return swa_start_; }
    /// Its running Mamba state (none without Mamba, and while retracted).
    [[nodiscard]] StateId state() const noexcept { return state_; }
    /// The node its prefix ends at (locked by the request).
    [[nodiscard]] NodeRef node() const noexcept { return node_; }
    /// The load-back its admission queued until the rows are read (`Cache::rows`), else 0.
    [[nodiscard]] std::uint64_t load_id() const noexcept { return load_id_; }
    /// True while retracted with a live host backup (`restore` copies it back instead of recomputing).
    [[nodiscard]] bool backed_up() const noexcept { return static_cast<bool>(backup_); }
    /// Rows the last admission copied back from a retraction backup (0: none, it computes them).
    [[nodiscard]] std::int32_t restored_rows() const noexcept { return restored_; }
    /// Where the cache keeps its SWA window and Mamba state besides its chunk ends (`cache/retention.hpp`).
    [[nodiscard]] const RetainPoints& retain_points() const noexcept { return retain_; }

private:
    template <class P>
    friend class detail::cache::CacheCore;

    // What `decode` reads of every handle comes first, together (a batch walks many handles).
    Status status_ = Status::idle;
    std::int32_t fill_ = 0;  // rows its prefill reaches before it decodes (the prompt; all after a recompute)
    std::int32_t decoded_ = 0;
    std::int32_t max_new_ = 0;
    std::int32_t swa_start_ = 0;
    std::int32_t compute_from_ = 0;
    std::uint64_t cache_ = 0;         // the id of the cache that admitted it (0: none)
    std::uint64_t batch_mark_ = 0;    // `decode`'s check that a batch names each handle once
    std::uint64_t load_id_ = 0;       // rows `[0, prefix_)` are read from the tree once this load is acknowledged
    std::vector<VirtualToken> rows_;  // one per row; the prefix's are the tree's
    std::vector<TokenId> tokens_;
    std::int32_t prefix_ = 0;
    std::int32_t backup_prefix_ = 0;  // `prefix_` when it was retracted with a backup
    std::int32_t restored_ = 0;       // `restored_rows()`
    RetainPoints retain_{};
    KeyNamespace ns_{};
    LockReceipt lock_;
    NodeRef node_{};
    StateId state_{};
    RetractionBackup backup_;

    void take(Sequence& o) noexcept {
        status_ = std::exchange(o.status_, Status::idle);
        fill_ = std::exchange(o.fill_, 0);
        decoded_ = std::exchange(o.decoded_, 0);
        max_new_ = std::exchange(o.max_new_, 0);
        swa_start_ = std::exchange(o.swa_start_, 0);
        compute_from_ = std::exchange(o.compute_from_, 0);
        cache_ = std::exchange(o.cache_, 0);
        batch_mark_ = std::exchange(o.batch_mark_, 0);
        load_id_ = std::exchange(o.load_id_, 0);
        rows_ = std::move(o.rows_);
        o.rows_.clear();
        tokens_ = std::move(o.tokens_);
        o.tokens_.clear();
        prefix_ = std::exchange(o.prefix_, 0);
        backup_prefix_ = std::exchange(o.backup_prefix_, 0);
        restored_ = std::exchange(o.restored_, 0);
        retain_ = std::exchange(o.retain_, RetainPoints{});
        ns_ = o.ns_;
        lock_ = std::move(o.lock_);
        node_ = std::exchange(o.node_, NodeRef{});
        state_ = std::exchange(o.state_, StateId{});
        static_cast<void>(backup_ = std::move(o.backup_));  // (nvcc reads the class's [[nodiscard]] on operator=)
    }
};

}  // namespace unikv

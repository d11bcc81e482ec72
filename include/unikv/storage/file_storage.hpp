#pragma once
/// \file
/// `FileStorage`: the embedded storage backend, a directory on a local disk (ARCHITECTURE.md §1.8).
///
/// * **Slabs**: objects of one payload size share one preallocated-as-needed slab file
///   (`slab-<payload bytes>.dat`) of fixed slots: a slot holds the payload, then the 64-byte header, padded to
///   4 KiB, so a payload starts on a page of the file (the kernel's copies are a third faster than from 64 bytes
///   in). A batch's objects are read and written with one `preadv` / `pwritev` each (payload and header in one
///   call, no staging copy); payloads of whole 4 KiB blocks in aligned buffers go with O_DIRECT
///   (`FileStorageConfig::direct_io`), the header in a block of its own.
/// * **Two lanes**: reads and writes run on their own worker threads (`detail/storage/io_lanes.hpp`), so a large
///   write-back never queues ahead of a prefetch; `poll` hands their batches back on the driving thread.
/// * **Bounded**: `capacity_bytes` bounds the slots held; a put that needs room evicts the least recently used
///   objects (read or written), never one being read or written; a freed slot of another size is returned to
///   the file system (a punched hole), so the disk holds about `capacity_bytes`.
/// * **Journal**: each placement and removal is appended to `journal` after the fact; at start-up the index is
///   rebuilt from it (a record torn by a crash is cut off), so a restart keeps the store and a crash loses at
///   most the objects in flight. Every read is checked against the object's header (key, kind, size,
///   checksums): a torn, stale or corrupt object is a miss (and dropped), never served.
/// * **Faults are results**: a directory that cannot be made or locked makes the store unavailable (`status()`
///   says why; every object of every call is `error`); a failed write (a full disk) is `error` for that object
///   and leaves nothing behind; a failed read is `error`. Only a bad configuration throws.
/// A directory is used by one store at a time (an exclusive lock on its journal); a second store over it is
/// unavailable until the first is gone. Reopening it (a restart, or another engine instance after it) serves
/// what the first stored.
///
/// Costs: submission O(objects) plus evictions (one `fallocate` each); the lanes' work O(bytes) (a checksum of
/// each payload beside the copy); `poll` O(objects completed), one journal `write` per call that completed
/// something. Allocates per batch until its recycled records have grown. One thread drives a store.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <unikv/storage/object_key.hpp>
#include <unikv/storage/page_object.hpp>
#include <unikv/storage/storage_concept.hpp>

namespace unikv {

/// Where a `FileStorage` keeps its objects and how much of the disk it may fill.
struct FileStorageConfig {
    /// The store's directory, made (with its parents) when missing.
    std::string directory{};
    /// Bytes of slots the store may hold (each object: its payload plus a 64-byte header, padded to 4 KiB).
    std::uint64_t capacity_bytes = 0;
    /// Moves payloads of whole 4 KiB blocks from 4 KiB-aligned buffers with O_DIRECT, past the page cache (a store
    /// larger than memory then takes no second copy of the host tier's pages, and writes do not stall on the
    /// kernel's write-back); other payloads, and a file system that refuses O_DIRECT (tmpfs), use the page cache.
    bool direct_io = true;
};

/// The embedded file store (see the file comment). Move-only: moving keeps batches in flight valid.
class FileStorage {
public:
    /// Objects are stored per component (a FULL page, an SWA window, a Mamba state), so the host tier stages
    /// them in one pool per component.
    static constexpr bool needs_separate_pools = true;
    /// Bytes of one slot holding a payload of `payload_bytes`: the payload and the header, padded to 4 KiB.
    [[nodiscard]] static constexpr std::uint64_t slot_bytes(std::uint64_t payload_bytes) noexcept {
        return (object_header_bytes + payload_bytes + 4095) / 4096 * 4096;
    }

    /// Opens (or makes) the store in `config.directory` and rebuilds its index from the journal, dropping the
    /// least recently used objects beyond `capacity_bytes`. Throws `logic_error` for an empty directory name or
    /// a capacity of 0; a directory that cannot be made, read or locked leaves the store unavailable
    /// (`status()`), never throws.
    explicit FileStorage(FileStorageConfig config);
    FileStorage(FileStorage&&) noexcept;
    FileStorage& operator=(FileStorage&&) noexcept;
    FileStorage(const FileStorage&) = delete;
    FileStorage& operator=(const FileStorage&) = delete;
    /// Finishes the batches in flight (their buffers must stay valid until then) and journals them.
    ~FileStorage();

    // ---- the backend protocol (storage_concept.hpp) ---------------------------------------------------------
    /// `hit` for each key the store holds now (written and not evicted). Answered at once, reported by `poll`.
    StorageTicket exists(std::span<const ObjectKey> keys);
    /// Reads each object into its `bytes` on the read lane; `miss` for a key not held, held at another size or
    /// kind, or failing its checks (then dropped from the store).
    StorageTicket get(std::span<const ObjectRead> items);
    /// Writes each object on the write lane: `hit` once written (or when already held), `miss` when no room can
    /// be made (everything else is being read or written) or the key is being written already, `error` when the
    /// write failed (nothing is kept of it).
    StorageTicket put(std::span<const ObjectWrite> items);
    /// The batches completed since the last call, waiting up to `wait` for one when none has.
    std::span<const StorageDone> poll(std::chrono::nanoseconds wait = {});
    /// Batches submitted and not yet reported by `poll`.
    [[nodiscard]] std::size_t in_flight() const noexcept;
    [[nodiscard]] StorageStats stats() const noexcept;

    // ---- inspection -------------------------------------------------------------------------------------
    /// Why the store is unavailable; empty when it is usable.
    [[nodiscard]] const std::string& status() const noexcept;
    /// Objects held (written, or being written).
    [[nodiscard]] std::size_t objects() const noexcept;
    /// Objects whose read or write went to O_DIRECT first so far (`FileStorageConfig::direct_io`; one that O_DIRECT
    /// fails, such as a slot an older writer left short, is then moved through the page cache).
    [[nodiscard]] std::uint64_t direct_objects() const noexcept;
    /// Bytes of the slots held (at most `capacity_bytes`).
    [[nodiscard]] std::uint64_t used_bytes() const noexcept;
    [[nodiscard]] std::uint64_t capacity_bytes() const noexcept;
    /// Every broken invariant of the index (slots, sizes, recency list), one line each; empty when healthy.
    [[nodiscard]] std::vector<std::string> verify() const;

private:
    struct state;
    std::unique_ptr<state> state_;
};

static_assert(check_storage_backend<FileStorage>());

}  // namespace unikv

#include <unikv/detail/storage/file_storage.inl>

#pragma once
// Definitions of `FileStorage` (storage/file_storage.hpp).

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <limits>
#include <system_error>
#include <unordered_map>

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <unikv/detail/storage/io_lanes.hpp>
#include <unikv/detail/storage/store_journal.hpp>
#include <unikv/error.hpp>

namespace unikv {

namespace detail::storage {

// What O_DIRECT asks of a buffer's address and length and of a file offset (4 KiB covers every common block size).
inline constexpr std::size_t direct_io_alignment = 4096;

inline constexpr std::uint32_t no_entry = std::numeric_limits<std::uint32_t>::max();

// One object of a batch, as a lane sees it: where it goes on disk and in memory, and its outcome.
struct file_item {
    ObjectKey key{};
    ObjectKind kind = ObjectKind::full;
    std::byte* data = nullptr;  // get: the caller's buffer; put: its payload (read only)
    std::size_t size = 0;
    int fd = -1;                // the slab's file through the page cache; -1: no I/O (answered at submission)
    int direct_fd = -1;         // the same file with O_DIRECT, tried first when the buffer is aligned
    std::uint64_t offset = 0;
    std::uint32_t entry = no_entry;
    PageResult result = PageResult::miss;
    bool corrupt = false;       // get: found, failing its checks
};

struct file_batch {
    StorageTicket ticket{};
    StorageOp op = StorageOp::get;
    std::vector<file_item> items;
    std::vector<PageResult> results;
};

// Reads or writes all of `iov` at `offset`, resuming after short transfers. Returns 0, an errno, or -1 for a read
// that met the end of the file.
inline int transfer_all(int fd, iovec* iov, int count, std::uint64_t offset, bool write) {
    while (count > 0) {
        const ssize_t n = write ? ::pwritev(fd, iov, count, static_cast<off_t>(offset))
                                : ::preadv(fd, iov, count, static_cast<off_t>(offset));
        if (n < 0) {
            if (errno == EINTR) continue;
            return errno;
        }
        if (n == 0) return -1;
        offset += static_cast<std::uint64_t>(n);
        auto left = static_cast<std::size_t>(n);
        while (count > 0 && left >= iov->iov_len) {
            left -= iov->iov_len;
            ++iov;
            --count;
        }
        if (count > 0) {
            iov->iov_base = static_cast<std::byte*>(iov->iov_base) + left;
            iov->iov_len -= left;
        }
    }
    return 0;
}

// The header's part of a transfer: the header alone, or the whole block after the payload (the rest of the slot,
// zeros). A slab whose payloads are whole blocks always writes the block, so its file ends on a slot's end and an
// O_DIRECT read of its last slot is never short.
struct header_block {
    alignas(direct_io_alignment) std::byte bytes[direct_io_alignment]{};
    [[nodiscard]] iovec part(bool whole) noexcept { return {bytes, whole ? sizeof bytes : object_header_bytes}; }
};

// Payload and header of `it` in one call at its offset: with O_DIRECT first when it may, then (that failing: a
// file system that refuses it mid-way, a slot a page-cache write of an older version left short) through the page
// cache. Returns `transfer_all`'s result.
inline int transfer_item(const file_item& it, header_block& block, bool write) {
    const bool whole = it.size % direct_io_alignment == 0;
    if (it.direct_fd >= 0) {
        iovec iov[2] = {{it.data, it.size}, block.part(true)};
        if (transfer_all(it.direct_fd, iov, 2, it.offset, write) == 0) return 0;
    }
    iovec iov[2] = {{it.data, it.size}, block.part(write && whole)};
    return transfer_all(it.fd, iov, 2, it.offset, write);
}

// The read lane's work: each item's payload and header, then both checked.
inline void read_items(file_batch& b) {
    header_block block;
    for (file_item& it : b.items) {
        if (it.fd < 0) continue;
        const int err = transfer_item(it, block, false);
        if (err > 0) {
            it.result = PageResult::error;
            continue;
        }
        const ObjectHeader h =
            load_header(std::span<const std::byte, object_header_bytes>(block.bytes, object_header_bytes));
        const bool good = err == 0 && check_header(h, it.key, it.kind, it.size) == ObjectCheck::good &&
                          check_payload(h, {it.data, it.size}) == ObjectCheck::good;
        it.result = good ? PageResult::hit : PageResult::miss;
        it.corrupt = !good;
    }
}

// The write lane's work: each item's payload and header (its checksum computed here, off the driving thread) in
// one `pwritev`.
inline void write_items(file_batch& b) {
    header_block block;
    for (file_item& it : b.items) {
        if (it.fd < 0) continue;
        store_header(make_header(it.key, it.kind, {it.data, it.size}),
                     std::span<std::byte, object_header_bytes>(block.bytes, object_header_bytes));
        it.result = transfer_item(it, block, true) == 0 ? PageResult::hit : PageResult::error;
    }
}

struct run_reads {
    void operator()(file_batch& b) const { read_items(b); }
};
struct run_writes {
    void operator()(file_batch& b) const { write_items(b); }
};

}  // namespace detail::storage

struct FileStorage::state {
    using batch = detail::storage::file_batch;
    using record = detail::storage::journal_record;
    static constexpr std::uint32_t none = detail::storage::no_entry;

    // One slab: the objects of one payload size.
    struct slab {
        std::uint64_t payload_bytes = 0;
        std::uint64_t slot_bytes = 0;
        int fd = -1;
        int direct_fd = -1;                 // the file opened with O_DIRECT; -1 when unaligned, off or refused
        std::uint32_t slots = 0;            // slots the file spans
        std::vector<std::uint32_t> free{};  // slots below `slots` holding nothing
    };
    // One object held: committed (readable) or being written. Linked in recency order, least recent first.
    struct entry {
        ObjectKey key{};
        ObjectKind kind = ObjectKind::full;
        std::uint32_t slab = 0;
        std::uint32_t slot = 0;
        std::uint32_t pins = 0;  // gets in flight
        bool committed = false;
        std::uint32_t prev = none;
        std::uint32_t next = none;
    };

    FileStorageConfig config;
    std::string status;
    int journal = -1;
    std::vector<slab> slabs;
    std::vector<entry> entries;
    std::vector<std::uint32_t> free_entries;
    std::unordered_map<ObjectKey, std::uint32_t> index;
    std::uint32_t oldest = none;
    std::uint32_t newest = none;
    std::uint64_t used = 0;
    std::uint64_t journal_records = 0;
    std::uint64_t direct_objects = 0;
    std::vector<record> journal_out;  // appended at the end of the call
    StorageStats stats{};
    std::uint64_t next_ticket = 1;
    std::size_t in_flight = 0;
    std::vector<std::unique_ptr<batch>> spare;
    std::vector<batch*> done_now;
    std::vector<std::unique_ptr<batch>> reported;  // the batches the last `poll` returned, recycled by the next
    std::vector<std::unique_ptr<batch>> owned;     // every batch submitted and not yet reported
    std::vector<StorageDone> out;
    detail::storage::completions<batch> done;
    // Last: destroyed first, so their threads finish the queued batches while everything above still exists.
    std::unique_ptr<detail::storage::io_lane<batch, detail::storage::run_reads>> reads;
    std::unique_ptr<detail::storage::io_lane<batch, detail::storage::run_writes>> writes;

    explicit state(FileStorageConfig c) : config(std::move(c)) { open(); }
    ~state() {
        reads.reset();
        writes.reset();
        std::vector<batch*> left;
        done.take(left, {});
        for (batch* b : left) finish(*b);
        flush_journal();
        for (slab& s : slabs) {
            if (s.fd >= 0) ::close(s.fd);
            if (s.direct_fd >= 0) ::close(s.direct_fd);
        }
        if (journal >= 0) ::close(journal);
    }

    void fail(std::string why) {
        status = std::move(why);
        status += ": ";
        status += std::strerror(errno);
    }

    void open() {
        namespace fs = std::filesystem;
        std::error_code ec;
        fs::create_directories(config.directory, ec);
        if (ec) {
            status = "cannot make the store's directory " + config.directory + ": " + ec.message();
            return;
        }
        const std::string path = config.directory + "/journal";
        journal = ::open(path.c_str(), O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        if (journal < 0) return fail("cannot open " + path);
        if (::flock(journal, LOCK_EX | LOCK_NB) != 0) {
            fail("the store in " + config.directory + " is in use by another FileStorage");
            ::close(journal);
            journal = -1;
            return;
        }
        std::vector<record> records;
        const long long good = detail::storage::read_journal(journal, records);
        if (good < 0) return fail("cannot read " + path);
        // A torn tail goes now, so records appended after it stay readable even if the rewrite below fails.
        if (::ftruncate(journal, static_cast<off_t>(good)) != 0) return fail("cannot cut the torn tail of " + path);
        replay(records);
        if (!status.empty()) return;
        while (used > config.capacity_bytes && evict_one(none)) {
        }
        rewrite_journal();
        if (!status.empty()) return;
        reads = std::make_unique<detail::storage::io_lane<batch, detail::storage::run_reads>>(done, detail::storage::run_reads{});
        writes = std::make_unique<detail::storage::io_lane<batch, detail::storage::run_writes>>(done, detail::storage::run_writes{});
    }

    // The index of the journal's records: the last record about a key or a slot wins.
    void replay(const std::vector<record>& records) {
        struct placed {
            ObjectKind kind;
            std::uint64_t payload;
            std::uint32_t slot;
            std::uint64_t order;
        };
        std::unordered_map<ObjectKey, placed> by_key;
        std::unordered_map<std::uint64_t, std::unordered_map<std::uint32_t, ObjectKey>> by_slot;
        std::uint64_t order = 0;
        for (const record& r : records) {
            if (r.op == record::removed) {
                const auto it = by_key.find(r.key);
                if (it != by_key.end() && it->second.payload == r.payload_bytes && it->second.slot == r.slot) {
                    by_slot[r.payload_bytes].erase(r.slot);
                    by_key.erase(it);
                }
                continue;
            }
            if (const auto it = by_key.find(r.key); it != by_key.end()) by_slot[it->second.payload].erase(it->second.slot);
            auto& owner = by_slot[r.payload_bytes];
            if (const auto o = owner.find(r.slot); o != owner.end()) by_key.erase(o->second);
            owner[r.slot] = r.key;
            by_key[r.key] = {static_cast<ObjectKind>(r.kind), r.payload_bytes, r.slot, order++};
        }
        std::vector<std::pair<ObjectKey, placed>> live(by_key.begin(), by_key.end());
        std::sort(live.begin(), live.end(), [](const auto& a, const auto& b) { return a.second.order < b.second.order; });
        std::unordered_map<std::uint64_t, std::vector<std::uint8_t>> taken;
        for (const auto& [key, p] : live) {
            const std::uint32_t s = slab_of(p.payload);
            if (s == none) return fail("cannot open the slab of " + std::to_string(p.payload) + "-byte objects");
            slab& sl = slabs[s];
            sl.slots = std::max(sl.slots, p.slot + 1);
            auto& marks = taken[p.payload];
            if (marks.size() <= p.slot) marks.resize(p.slot + 1, 0);
            marks[p.slot] = 1;
            const std::uint32_t e = new_entry(key, p.kind, s, p.slot);
            entries[e].committed = true;
        }
        for (std::uint32_t s = 0; s < slabs.size(); ++s) {
            slab& sl = slabs[s];
            const auto& marks = taken[sl.payload_bytes];
            sl.free.clear();  // `slab_of` listed every slot of the file
            for (std::uint32_t slot = sl.slots; slot-- > 0;)
                if (slot >= marks.size() || marks[slot] == 0) sl.free.push_back(slot);
        }
    }

    // The file `it` goes through: O_DIRECT when the slab has it and the caller's buffer is block aligned.
    void place(detail::storage::file_item& it, const slab& sl) noexcept {
        const auto address = reinterpret_cast<std::uintptr_t>(it.data);
        const bool direct = sl.direct_fd >= 0 && address % detail::storage::direct_io_alignment == 0;
        it.fd = sl.fd;
        it.direct_fd = direct ? sl.direct_fd : -1;
        direct_objects += direct ? 1 : 0;
    }

    // The slab of payloads of `payload` bytes, opened (and its span read) on first use; `none` when its file cannot
    // be opened.
    std::uint32_t slab_of(std::uint64_t payload) {
        for (std::uint32_t s = 0; s < slabs.size(); ++s)
            if (slabs[s].payload_bytes == payload) return s;
        const std::string path = config.directory + "/slab-" + std::to_string(payload) + ".dat";
        const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
        if (fd < 0) return none;
        struct stat st {};
        const std::uint64_t size = ::fstat(fd, &st) == 0 ? static_cast<std::uint64_t>(st.st_size) : 0;
        slab sl{.payload_bytes = payload, .slot_bytes = FileStorage::slot_bytes(payload), .fd = fd};
        // O_DIRECT for payloads of whole blocks (the slot is then the payload and one block); a file system that
        // refuses it (tmpfs) keeps the page cache.
        if (config.direct_io && payload % detail::storage::direct_io_alignment == 0)
            sl.direct_fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC | O_DIRECT);
        sl.slots = static_cast<std::uint32_t>(size / sl.slot_bytes);
        for (std::uint32_t slot = sl.slots; slot-- > 0;) sl.free.push_back(slot);
        slabs.push_back(std::move(sl));
        return static_cast<std::uint32_t>(slabs.size() - 1);
    }

    // ---- the index ------------------------------------------------------------------------------------------
    std::uint32_t new_entry(ObjectKey key, ObjectKind kind, std::uint32_t s, std::uint32_t slot) {
        std::uint32_t e;
        if (!free_entries.empty()) {
            e = free_entries.back();
            free_entries.pop_back();
        } else {
            e = static_cast<std::uint32_t>(entries.size());
            entries.emplace_back();
        }
        entries[e] = entry{.key = key, .kind = kind, .slab = s, .slot = slot};
        index.emplace(key, e);
        link_newest(e);
        used += slabs[s].slot_bytes;
        return e;
    }
    void link_newest(std::uint32_t e) {
        entries[e].prev = newest;
        entries[e].next = none;
        (newest == none ? oldest : entries[newest].next) = e;
        newest = e;
    }
    void unlink(std::uint32_t e) {
        entry& x = entries[e];
        (x.prev == none ? oldest : entries[x.prev].next) = x.next;
        (x.next == none ? newest : entries[x.next].prev) = x.prev;
    }
    void touch(std::uint32_t e) {
        unlink(e);
        link_newest(e);
    }
    // Forgets entry `e`; its slot goes back to its slab (its bytes to the file system when `punch`), a removal is
    // journaled when it was committed.
    void drop(std::uint32_t e, bool punch) {
        entry& x = entries[e];
        slab& sl = slabs[x.slab];
        if (x.committed)
            journal_out.push_back(record::make(record::removed, x.key, x.kind, sl.payload_bytes, x.slot));
        if (punch)
            (void)::fallocate(sl.fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                              static_cast<off_t>(x.slot * sl.slot_bytes), static_cast<off_t>(sl.slot_bytes));
        sl.free.push_back(x.slot);
        unlink(e);
        index.erase(x.key);
        used -= sl.slot_bytes;
        free_entries.push_back(e);
    }
    // Drops the least recently used object neither read nor written now; false when there is none. An object of
    // slab `keep` leaves its slot for the caller to take (no hole punched).
    bool evict_one(std::uint32_t keep) {
        for (std::uint32_t e = oldest; e != none; e = entries[e].next) {
            if (!entries[e].committed || entries[e].pins > 0) continue;
            drop(e, entries[e].slab != keep);
            ++stats.evicted;
            return true;
        }
        return false;
    }
    // A slot of slab `s` within the capacity, evicting for it; false when none can be made.
    bool take_slot(std::uint32_t s, std::uint32_t& slot) {
        slab& sl = slabs[s];
        while (used + sl.slot_bytes > config.capacity_bytes)
            if (!evict_one(s)) return false;
        if (!sl.free.empty()) {
            slot = sl.free.back();
            sl.free.pop_back();
        } else {
            slot = sl.slots++;
        }
        return true;
    }

    // ---- batches --------------------------------------------------------------------------------------------
    batch& new_batch(StorageOp op, std::size_t n) {
        std::unique_ptr<batch> b;
        if (!spare.empty()) {
            b = std::move(spare.back());
            spare.pop_back();
        } else {
            b = std::make_unique<batch>();
        }
        b->ticket = StorageTicket{next_ticket++};
        b->op = op;
        b->items.assign(n, detail::storage::file_item{});
        b->results.clear();
        owned.push_back(std::move(b));
        ++in_flight;
        return *owned.back();
    }
    // Hands `b` to a lane when it has I/O, else straight to the completions.
    template <class Lane>
    void dispatch(batch& b, Lane& lane) {
        const bool io = std::any_of(b.items.begin(), b.items.end(), [](const auto& it) { return it.fd >= 0; });
        if (io)
            lane->submit(&b);
        else
            done.push(&b);
        flush_journal();
    }
    // The driving thread's side of a completed batch: the index follows what the lanes did.
    void finish(batch& b) {
        for (detail::storage::file_item& it : b.items) {
            if (b.op == StorageOp::get && it.fd >= 0) {
                entry& x = entries[it.entry];
                --x.pins;
                if (it.result == PageResult::hit) {
                    ++stats.hits;
                    stats.bytes_read += it.size;
                } else if (it.corrupt) {
                    ++stats.corrupt;
                    if (x.pins == 0) drop(it.entry, true);
                }
            } else if (b.op == StorageOp::put && it.fd >= 0) {
                entry& x = entries[it.entry];
                if (it.result == PageResult::hit) {
                    x.committed = true;
                    journal_out.push_back(record::make(record::placed, x.key, x.kind, slabs[x.slab].payload_bytes, x.slot));
                    ++stats.stored;
                    stats.bytes_written += it.size;
                } else {
                    drop(it.entry, true);
                }
            }
            if (b.op == StorageOp::get && it.result != PageResult::hit && it.result != PageResult::error) ++stats.misses;
            if (it.result == PageResult::error) ++stats.errors;
            b.results.push_back(it.result);
        }
    }
    void flush_journal() {
        if (journal_out.empty() || journal < 0) return;
        const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(journal_out.data()),
                                               journal_out.size() * sizeof(record));
        // A failed append loses these records at a restart (their objects become misses), nothing else.
        if (detail::storage::append_all(journal, bytes)) journal_records += journal_out.size();
        journal_out.clear();
        if (journal_records > 4096 && journal_records > 4 * index.size()) rewrite_journal();
    }
    // Replaces the journal with one placement per committed object, oldest first: written beside it, then renamed
    // over it, so a crash leaves the old journal or the new one.
    void rewrite_journal() {
        const std::string path = config.directory + "/journal";
        const std::string tmp = path + ".new";
        const int fd = ::open(tmp.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
        if (fd < 0) return;  // keep appending to the old one
        std::vector<record> live;
        for (std::uint32_t e = oldest; e != none; e = entries[e].next)
            if (entries[e].committed)
                live.push_back(record::make(record::placed, entries[e].key, entries[e].kind,
                                            slabs[entries[e].slab].payload_bytes, entries[e].slot));
        const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(live.data()), live.size() * sizeof(record));
        if (!detail::storage::append_all(fd, bytes) || ::fdatasync(fd) != 0 || ::flock(fd, LOCK_EX | LOCK_NB) != 0 ||
            ::rename(tmp.c_str(), path.c_str()) != 0) {
            ::close(fd);
            ::unlink(tmp.c_str());
            return;
        }
        ::close(journal);
        journal = fd;
        journal_records = live.size();
    }
    // A batch answered `error` for every object: the store is unavailable.
    batch& all_errors(StorageOp op, std::size_t n) {
        batch& b = new_batch(op, n);
        for (auto& it : b.items) it.result = PageResult::error;
        done.push(&b);
        return b;
    }
};

inline FileStorage::FileStorage(FileStorageConfig config) {
    UNIKV_EXPECTS(!config.directory.empty(), "FileStorage: name the store's directory (FileStorageConfig::directory)");
    UNIKV_EXPECTS(config.capacity_bytes > 0, "FileStorage: capacity_bytes is 0; give the bytes the store may fill");
    state_ = std::make_unique<state>(std::move(config));
}
inline FileStorage::FileStorage(FileStorage&&) noexcept = default;
inline FileStorage& FileStorage::operator=(FileStorage&&) noexcept = default;
inline FileStorage::~FileStorage() = default;

inline StorageTicket FileStorage::exists(std::span<const ObjectKey> keys) {
    state& s = *state_;
    if (!s.status.empty()) return s.all_errors(StorageOp::exists, keys.size()).ticket;
    state::batch& b = s.new_batch(StorageOp::exists, keys.size());
    for (std::size_t i = 0; i < keys.size(); ++i) {
        const auto it = s.index.find(keys[i]);
        b.items[i].result = it != s.index.end() && s.entries[it->second].committed ? PageResult::hit : PageResult::miss;
    }
    s.done.push(&b);
    return b.ticket;
}

inline StorageTicket FileStorage::get(std::span<const ObjectRead> items) {
    state& s = *state_;
    if (!s.status.empty()) return s.all_errors(StorageOp::get, items.size()).ticket;
    state::batch& b = s.new_batch(StorageOp::get, items.size());
    for (std::size_t i = 0; i < items.size(); ++i) {
        detail::storage::file_item& it = b.items[i];
        it.key = items[i].key;
        it.kind = items[i].kind;
        it.data = items[i].bytes.data();
        it.size = items[i].bytes.size();
        const auto found = s.index.find(it.key);
        if (found == s.index.end()) continue;
        state::entry& x = s.entries[found->second];
        const state::slab& sl = s.slabs[x.slab];
        if (!x.committed || x.kind != it.kind || sl.payload_bytes != it.size) continue;  // a miss, no I/O
        ++x.pins;
        s.touch(found->second);
        it.entry = found->second;
        s.place(it, sl);
        it.offset = x.slot * sl.slot_bytes;
    }
    s.dispatch(b, s.reads);
    return b.ticket;
}

inline StorageTicket FileStorage::put(std::span<const ObjectWrite> items) {
    state& s = *state_;
    if (!s.status.empty()) return s.all_errors(StorageOp::put, items.size()).ticket;
    state::batch& b = s.new_batch(StorageOp::put, items.size());
    for (std::size_t i = 0; i < items.size(); ++i) {
        detail::storage::file_item& it = b.items[i];
        it.key = items[i].key;
        it.kind = items[i].kind;
        it.data = const_cast<std::byte*>(items[i].bytes.data());  // only read: the write lane's source
        it.size = items[i].bytes.size();
        if (const auto found = s.index.find(it.key); found != s.index.end()) {
            if (s.entries[found->second].committed) {
                it.result = PageResult::hit;  // held already: same key, same bytes
                s.touch(found->second);
            }
            continue;  // being written: declined
        }
        const std::uint32_t slab = s.slab_of(it.size);
        std::uint32_t slot = 0;
        if (slab == state::none) {
            it.result = PageResult::error;
            continue;
        }
        if (!s.take_slot(slab, slot)) continue;  // no room: declined
        it.entry = s.new_entry(it.key, it.kind, slab, slot);
        s.place(it, s.slabs[slab]);
        it.offset = slot * s.slabs[slab].slot_bytes;
    }
    s.dispatch(b, s.writes);
    return b.ticket;
}

inline std::span<const StorageDone> FileStorage::poll(std::chrono::nanoseconds wait) {
    state& s = *state_;
    for (auto& b : s.reported) s.spare.push_back(std::move(b));
    s.reported.clear();
    s.out.clear();
    if (s.in_flight == 0) return {};
    s.done.take(s.done_now, wait);
    for (state::batch* b : s.done_now) {
        s.finish(*b);
        const auto it = std::find_if(s.owned.begin(), s.owned.end(), [&](const auto& p) { return p.get() == b; });
        s.reported.push_back(std::move(*it));
        s.owned.erase(it);
        --s.in_flight;
    }
    for (const auto& b : s.reported) s.out.push_back({.ticket = b->ticket, .op = b->op, .results = b->results});
    s.flush_journal();
    return s.out;
}

inline std::size_t FileStorage::in_flight() const noexcept { return state_->in_flight; }
inline StorageStats FileStorage::stats() const noexcept { return state_->stats; }
inline const std::string& FileStorage::status() const noexcept { return state_->status; }
inline std::size_t FileStorage::objects() const noexcept { return state_->index.size(); }
inline std::uint64_t FileStorage::direct_objects() const noexcept { return state_->direct_objects; }
inline std::uint64_t FileStorage::used_bytes() const noexcept { return state_->used; }
inline std::uint64_t FileStorage::capacity_bytes() const noexcept { return state_->config.capacity_bytes; }

inline std::vector<std::string> FileStorage::verify() const {
    const state& s = *state_;
    std::vector<std::string> problems;
    const auto say = [&](auto&&... parts) { problems.push_back(detail::concat("FileStorage: ", parts...)); };
    std::uint64_t used = 0;
    std::size_t linked = 0;
    std::vector<std::vector<std::uint8_t>> taken(s.slabs.size());
    for (std::size_t i = 0; i < s.slabs.size(); ++i) taken[i].assign(s.slabs[i].slots, 0);
    for (std::uint32_t e = s.oldest, prev = state::none; e != state::none; prev = e, e = s.entries[e].next) {
        const state::entry& x = s.entries[e];
        if (x.prev != prev) say("entry ", e, " links back to ", x.prev, ", not ", prev);
        if (++linked > s.entries.size()) {
            say("the recency list has a cycle");
            break;
        }
        const auto it = s.index.find(x.key);
        if (it == s.index.end() || it->second != e) say("entry ", e, " is not indexed under its key");
        if (x.slab >= s.slabs.size() || x.slot >= s.slabs[x.slab].slots) {
            say("entry ", e, " names slot ", x.slot, " outside its slab");
            continue;
        }
        if (taken[x.slab][x.slot]++ != 0) say("slot ", x.slot, " of slab ", x.slab, " holds two objects");
        used += s.slabs[x.slab].slot_bytes;
    }
    if (linked != s.index.size()) say(linked, " objects in the recency list, ", s.index.size(), " indexed");
    if (used != s.used) say("used bytes ", s.used, ", the objects take ", used);
    if (s.used > s.config.capacity_bytes) say("used bytes ", s.used, " over the capacity ", s.config.capacity_bytes);
    for (std::size_t i = 0; i < s.slabs.size(); ++i)
        for (std::uint32_t slot : s.slabs[i].free)
            if (slot >= s.slabs[i].slots || taken[i][slot]++ != 0) say("free slot ", slot, " of slab ", i, " is taken or outside");
    for (std::size_t i = 0; i < s.slabs.size(); ++i)
        for (std::uint32_t slot = 0; slot < s.slabs[i].slots; ++slot)
            if (taken[i][slot] == 0) say("slot ", slot, " of slab ", i, " is neither held nor free");
    return problems;
}

}  // namespace unikv

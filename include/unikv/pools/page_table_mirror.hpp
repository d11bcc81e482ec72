#pragma once
/// \file
/// `PageTableMirror<Backend>`: a device copy of one `PageTable`'s v2p, refreshed by asynchronous copies queued
/// on a stream, so kernels translate ids on the device and nothing ever waits for the device. `DeviceTables`:
/// the mirrors of an allocator's pools in the form kernels take them.
///
/// A publish copies the table's dirty chunks (`PageTable::dirty_chunks`, 256 bytes each) into a pinned staging
/// slab and queues one `copy_pages_async` from the slab to the device table, then records the slab's event.
/// Backend copies read their source when they run, not when they are queued, so a slab is written again only
/// once its event has fired (`query()`, never a wait); while every slab is in flight the pool grows by one (two
/// are allocated up front).
/// Slabs hold the whole table, so any publish fits in one; their number is the most publishes ever in flight
/// at once (a few: the stream runs at most a few scheduler steps behind the host).

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <new>
#include <numeric>
#include <span>
#include <utility>
#include <vector>

#include <unikv/backend/backend_concept.hpp>
#include <unikv/backend/backend_ref.hpp>
#include <unikv/error.hpp>
#include <unikv/pools/page_table.hpp>
#include <unikv/pools/translate.hpp>

namespace unikv {

/// The device mirrors of an allocator's v2p tables (`UnifiedAllocator::device_tables()`). Trivially copyable:
/// kernels take it by value. A component the layout lacks has `v2p == nullptr`.
struct DeviceTables {
    TranslationTable full;
    TranslationTable swa;    ///< indexed by FULL's virtual pages; a tombstone translates to the sink
    TranslationTable mamba;  ///< indexed by state ids (pages of one slot)
};

/// The device mirror of one v2p table on backend `B`. Move-only. Destroying it (or assigning over it) waits
/// for its copies still in flight, a host synchronization only when one has not run yet.
template <class B>
class PageTableMirror {
    static_assert(has_memory_v<B>, "unikv: PageTableMirror needs Backend::allocate_device and allocate_pinned");
    static_assert(has_stream_factory_v<B>, "unikv: PageTableMirror needs Backend::make_event()");
    static_assert(has_event_ref_v<B>, "unikv: PageTableMirror needs Backend::event_ref with record() and query()");
    static_assert(has_page_copies_v<B>, "unikv: PageTableMirror needs Backend::copy_pages_async");

public:
    using stream_ref = typename B::stream_ref;
    /// Staging slabs allocated up front, so the usual one or two publishes in flight never allocate.
    static constexpr std::size_t initial_slabs = 2;
    /// Bytes of one mirror chunk, the unit of every refresh.
    static constexpr std::size_t chunk_bytes = PageTable::mirror_chunk_entries * sizeof(std::int32_t);

    /// Allocates the device table (a set-up call: `allocate_device` may synchronize) and queues the upload
    /// of all of `table`'s v2p on `stream`. Chunks `table` already marked dirty stay dirty (the next publish
    /// copies them again). Throws `out_of_memory` when an allocation fails. `backend` outlives the mirror.
    PageTableMirror(backend_ref<B> backend, const PageTable& table, stream_ref stream)
        : backend_(backend),
          device_(backend.allocate_device(static_cast<std::size_t>(table.mirror_chunks()) * chunk_bytes)),
          geometry_(table.translation()),
          slab_ids_(static_cast<std::size_t>(table.mirror_chunks())) {
        std::iota(slab_ids_.begin(), slab_ids_.end(), 0);
        geometry_.v2p = reinterpret_cast<const std::int32_t*>(device_.region().data);
        for (std::size_t k = 0; k < initial_slabs; ++k) slabs_.push_back(make_slab());  // never-recorded: free
        queue(table, slab_ids_, stream);
    }
    PageTableMirror(const PageTableMirror&) = delete;
    PageTableMirror& operator=(const PageTableMirror&) = delete;
    PageTableMirror(PageTableMirror&& o) noexcept
        : backend_(o.backend_),
          device_(std::move(o.device_)),
          geometry_(o.geometry_),
          slab_ids_(std::move(o.slab_ids_)),
          slabs_(std::exchange(o.slabs_, {})),
          next_(o.next_) {}
    PageTableMirror& operator=(PageTableMirror&& o) noexcept {
        if (this != &o) {
            quiesce();
            backend_ = o.backend_;
            device_ = std::move(o.device_);
            geometry_ = o.geometry_;
            slab_ids_ = std::move(o.slab_ids_);
            slabs_ = std::exchange(o.slabs_, {});
            next_ = o.next_;
        }
        return *this;
    }
    ~PageTableMirror() { quiesce(); }

    /// Queues the chunks of `table` written since its last publish on `stream` (one copy and one event
    /// record) and forgets them; returns false, queuing nothing, when none was. A table feeds one mirror:
    /// publishing consumes its dirty set. On a throw (no pinned memory for a new slab) nothing is queued and
    /// the chunks stay dirty for the next publish. Work queued on `stream`
    /// afterwards reads the table as of this call. Precondition: `table` is the table this mirror was built
    /// from. Never blocks the host. O(1) when nothing is dirty, else O(dirty chunks * 64) plus the backend
    /// copy; allocates only when every staging slab is in flight.
    bool publish(PageTable& table, stream_ref stream) {
        UNIKV_ASSERT(table.mirror_chunks() == static_cast<std::int32_t>(slab_ids_.size()));
        if (table.dirty_chunks().empty()) return false;
        queue(table, table.dirty_chunks(), stream);
        table.clear_dirty();
        return true;
    }

    /// The device table with the host table's geometry: what kernels translate through. Valid while the
    /// mirror lives; reads the mapping of the latest publish that ran before the reading work.
    [[nodiscard]] TranslationTable device_table() const noexcept { return geometry_; }
    /// Pinned staging slabs allocated so far (the most publishes that were in flight at once).
    [[nodiscard]] std::size_t staging_slabs() const noexcept { return slabs_.size(); }

private:
    struct slab {
        pinned_buffer_t<B> buffer;
        owned_event_t<B> done;  // recorded behind the copy that reads `buffer`
    };

    // Stages `chunks` of `table` into a slab whose last copy has run, queues their copy, records the event.
    void queue(const PageTable& table, std::span<const std::int32_t> chunks, stream_ref stream) {
        slab& s = free_slab();
        const std::span<const std::int32_t> v2p = table.v2p();
        std::byte* out = s.buffer.region().data;
        for (std::size_t k = 0; k < chunks.size(); ++k) {
            const std::size_t first = static_cast<std::size_t>(chunks[k]) * PageTable::mirror_chunk_entries;
            const std::size_t n = std::min<std::size_t>(PageTable::mirror_chunk_entries, v2p.size() - first);
            std::memcpy(out + k * chunk_bytes, v2p.data() + first, n * sizeof(std::int32_t));
        }
        backend_.copy_pages_async(s.buffer.region(), std::span<const std::int32_t>(slab_ids_).first(chunks.size()),
                                   device_.region(), chunks, chunk_bytes, stream);
        s.done.ref().record(stream);
    }

    // Slabs are taken in ring order from `next_`, so on one stream the slab at `next_` is the oldest in flight
    // and the first to check; a new slab is inserted there, keeping that order.
    slab& free_slab() {
        for (std::size_t k = 0; k < slabs_.size(); ++k) {
            const std::size_t i = (next_ + k) % slabs_.size();
            if (slabs_[i].done.ref().query()) {
                next_ = (i + 1) % slabs_.size();
                return slabs_[i];
            }
        }
        const std::size_t at = slabs_.empty() ? 0 : next_;
        slabs_.insert(slabs_.begin() + static_cast<std::ptrdiff_t>(at), make_slab());
        next_ = (at + 1) % slabs_.size();
        return slabs_[at];
    }

    slab make_slab() { return slab{backend_.allocate_pinned(slab_ids_.size() * chunk_bytes), backend_.make_event()}; }

    // The slabs and the device table are read and written by queued copies: wait those still in flight. When
    // a wait fails, a queued copy may still touch this memory, so it is leaked rather than freed under it.
    void quiesce() noexcept {
        bool failed = false;
        for (slab& s : slabs_) {
            try {
                if (!s.done.ref().query()) s.done.ref().synchronize();
            } catch (...) {
                failed = true;
            }
        }
        if (!failed) return;
        for (slab& s : slabs_) (void)new (std::nothrow) decltype(s.buffer)(std::move(s.buffer));
        (void)new (std::nothrow) decltype(device_)(std::move(device_));
    }

    backend_ref<B> backend_;
    device_buffer_t<B> device_;
    TranslationTable geometry_;            // the host table's geometry with `v2p` pointing at `device_`
    std::vector<std::int32_t> slab_ids_;   // 0, 1, ...: the source chunk of each staged entry
    std::vector<slab> slabs_;
    std::size_t next_ = 0;                 // ring cursor into `slabs_`
};

}  // namespace unikv

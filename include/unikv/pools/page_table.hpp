#pragma once
/// \file
/// `PageTable`: one sub-pool's virtual-to-physical (v2p) and physical-to-virtual (p2v) page maps, and the
/// allocation-free translation gathers that every attention kernel's read and write path goes through.
///
/// Layout of both tables: index 0 is the sink (`v2p[0] == 0`, `p2v[0] == 0`); every other entry is a page
/// id or -1 (unbound); the **last entry is a -1 sentinel** that is never written. A gather with an
/// out-of-range index is clamped to the sentinel, reads -1 and lands on the sink, so a padded or stale id can
/// never index outside the tables. Moving or rebinding a page whose p2v is -1 is a caller bug that throws
/// before any write: the sentinel can never be overwritten through index -1.
///
/// The host tables are authoritative. Kernels read a device mirror of v2p (`pools/page_table_mirror.hpp`):
/// every v2p write marks its chunk of `mirror_chunk_entries` entries dirty (O(1), preallocated, no locks),
/// and a publish copies only the dirty chunks with one asynchronous copy queued on the allocator's stream,
/// so kernels queued later on that stream read the new mapping (see docs/allocator.md). p2v is host-only.

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include <unikv/error.hpp>
#include <unikv/ids.hpp>
#include <unikv/pools/translate.hpp>

namespace unikv {

namespace detail {
class pool_core;
}  // namespace detail

class PageTable {
public:
    /// v2p entries per mirror chunk: the unit a device mirror is refreshed in (256 bytes).
    static constexpr std::int32_t mirror_chunk_entries = 64;

    /// Tables for virtual ids `[0, num_virtual)` and physical pages `[0, num_physical)` of `page_size`
    /// tokens. Both start unbound except the sink; no chunk is dirty. Throws `logic_error` unless both counts
    /// and the page size are positive and every token id of either side fits int32 (so a negative id can
    /// never divide down to a real page).
    PageTable(std::int32_t num_virtual, std::int32_t num_physical, PageSize page_size)
        : v2p_(checked_entries(num_virtual, num_physical, page_size.tokens), -1),
          p2v_(static_cast<std::size_t>(num_physical) + 1, -1),
          dirty_bits_((chunks_of(v2p_.size()) + 63) / 64, 0),
          dirty_list_(chunks_of(v2p_.size()), 0),
          page_size_(page_size.tokens),
          page_shift_(page_shift_of(page_size.tokens)) {
        v2p_[0] = 0;
        p2v_[0] = 0;
    }

    [[nodiscard]] std::int32_t num_virtual() const noexcept { return static_cast<std::int32_t>(v2p_.size() - 1); }
    [[nodiscard]] std::int32_t num_physical() const noexcept { return static_cast<std::int32_t>(p2v_.size() - 1); }
    [[nodiscard]] std::int32_t page_size() const noexcept { return page_size_; }

    /// The physical page bound to virtual page `v`, or -1 (unbound, or `v` out of range). O(1).
    [[nodiscard]] std::int32_t physical_of(std::int32_t v) const noexcept {
        return translation().entry(static_cast<std::uint32_t>(v));
    }
    /// The virtual page bound to physical page `p`, or -1. O(1).
    [[nodiscard]] std::int32_t virtual_of(std::int32_t p) const noexcept { return p2v_[clamp_p(p)]; }

    /// Binds virtual page `v` to physical page `p` and marks `v`'s mirror chunk dirty. Throws `logic_error`
    /// (nothing written or marked) unless both are in range, above the sink and unbound. O(1).
    void bind(std::int32_t v, std::int32_t p) {
        UNIKV_EXPECTS(v > 0 && v < num_virtual() && v2p_[v] == -1, "virtual page ", v, " is not free to bind");
        UNIKV_EXPECTS(p > 0 && p < num_physical() && p2v_[p] == -1, "physical page ", p, " is not free to bind");
        v2p_[v] = p;
        p2v_[p] = v;
        mark_dirty(static_cast<std::size_t>(v));
    }

    /// Unbinds virtual page `v` (marking its mirror chunk dirty); returns the physical page it had. Throws
    /// `logic_error` if `v` is unbound. O(1).
    std::int32_t unbind(std::int32_t v) {
        UNIKV_EXPECTS(v > 0 && v < num_virtual() && v2p_[v] > 0, "virtual page ", v, " is not bound");
        const std::int32_t p = v2p_[v];
        v2p_[v] = -1;
        p2v_[p] = -1;
        mark_dirty(static_cast<std::size_t>(v));
        return p;
    }

    /// Moves the binding of physical page `src` to `dst` (the data copy is the caller's job): the virtual
    /// page of `src` now maps to `dst`. Throws `logic_error`, before writing anything, when `src` has no
    /// virtual page (p2v -1: a reserved or free page) or `dst` is bound: never a write through index -1.
    /// Marks the virtual page's mirror chunk dirty. O(1).
    void move_binding(std::int32_t src, std::int32_t dst) {
        UNIKV_EXPECTS(src > 0 && src < num_physical() && p2v_[src] > 0, "physical page ", src,
                      " has no virtual page (p2v ", src > 0 && src < num_physical() ? p2v_[src] : -1,
                      "); an unbound page cannot be moved or rebound");
        UNIKV_EXPECTS(dst > 0 && dst < num_physical() && p2v_[dst] == -1, "destination page ", dst,
                      " is out of range or bound");
        const std::int32_t v = p2v_[src];
        v2p_[v] = dst;
        p2v_[dst] = v;
        p2v_[src] = -1;
        mark_dirty(static_cast<std::size_t>(v));
    }

    /// The v2p table with its geometry, for the gathers of `pools/translate.hpp` (valid until the table dies).
    [[nodiscard]] TranslationTable translation() const noexcept {
        return {.v2p = v2p_.data(),
                .sentinel = static_cast<std::uint32_t>(v2p_.size() - 1),
                .page_size = static_cast<std::uint32_t>(page_size_),
                .page_shift = page_shift_};
    }

    /// Gathers the physical page of each virtual page into `out` (`min` of both lengths). Unbound, negative
    /// and out-of-range ids give page 0, the sink. Allocation-free; O(n).
    void translate(std::span<const VirtualPage> in, std::span<PhysicalPage> out) const noexcept {
        translate_pages(translation(), in, out);
    }

    /// Gathers the physical token of each virtual token into `out` (`min` of both lengths; not overlapping `in`):
    /// `phys(t) = v2p[t / page_size] * page_size + t % page_size`. Unbound, negative and out-of-range ids
    /// give token 0, the sink. Allocation-free; O(n), one lookup per page-sized run of ids from one page.
    void translate(std::span<const VirtualToken> in, std::span<PhysicalToken> out) const noexcept {
        translate_tokens(translation(), in, out);
    }

    /// The whole v2p table, sink and sentinel included (for kernels, mirrors and tests).
    [[nodiscard]] std::span<const std::int32_t> v2p() const noexcept { return v2p_; }
    /// The whole p2v table, sink and sentinel included.
    [[nodiscard]] std::span<const std::int32_t> p2v() const noexcept { return p2v_; }

    /// Mirror chunks covering v2p: chunk `c` holds entries `[c * mirror_chunk_entries, ...)`; the last one
    /// is partial.
    [[nodiscard]] std::int32_t mirror_chunks() const noexcept { return static_cast<std::int32_t>(dirty_list_.size()); }
    /// The chunks with a v2p write since the last `clear_dirty`, each once, in the order first written. O(1).
    [[nodiscard]] std::span<const std::int32_t> dirty_chunks() const noexcept {
        return std::span<const std::int32_t>(dirty_list_).first(dirty_count_);
    }
    /// Forgets the dirty chunks (a mirror has copied them). O(dirty chunks).
    void clear_dirty() noexcept {
        for (std::int32_t c : dirty_chunks()) dirty_bits_[static_cast<std::size_t>(c) / 64] = 0;
        dirty_count_ = 0;
    }

private:
    friend class detail::pool_core;  // binds and unbinds after validating the whole call (hot paths)
    void bind_unchecked(std::int32_t v, std::int32_t p) noexcept {
        UNIKV_ASSERT(v > 0 && v < num_virtual() && v2p_[static_cast<std::size_t>(v)] == -1);
        UNIKV_ASSERT(p > 0 && p < num_physical() && p2v_[static_cast<std::size_t>(p)] == -1);
        v2p_[static_cast<std::size_t>(v)] = p;
        p2v_[static_cast<std::size_t>(p)] = v;
        mark_dirty(static_cast<std::size_t>(v));
    }
    std::int32_t unbind_unchecked(std::int32_t v) noexcept {
        UNIKV_ASSERT(v > 0 && v < num_virtual() && v2p_[static_cast<std::size_t>(v)] > 0);
        const std::int32_t p = v2p_[static_cast<std::size_t>(v)];
        v2p_[static_cast<std::size_t>(v)] = -1;
        p2v_[static_cast<std::size_t>(p)] = -1;
        mark_dirty(static_cast<std::size_t>(v));
        return p;
    }

    static constexpr std::size_t chunk_shift = 6;  // log2(mirror_chunk_entries)
    static_assert(std::size_t{1} << chunk_shift == mirror_chunk_entries);
    [[nodiscard]] static std::size_t chunks_of(std::size_t entries) noexcept {
        return (entries + mirror_chunk_entries - 1) >> chunk_shift;
    }
    // Called by every v2p write: O(1), a bit test and at most one append to a list sized for every chunk.
    void mark_dirty(std::size_t v) noexcept {
        const std::size_t c = v >> chunk_shift;
        std::uint64_t& word = dirty_bits_[c / 64];
        const std::uint64_t bit = std::uint64_t{1} << (c % 64);
        if ((word & bit) != 0) return;
        word |= bit;
        dirty_list_[dirty_count_++] = static_cast<std::int32_t>(c);
    }

    // v2p's size, once the arguments are checked (before any table is built).
    static std::size_t checked_entries(std::int32_t num_virtual, std::int32_t num_physical, std::int32_t page_size) {
        UNIKV_EXPECTS(num_virtual >= 1 && num_physical >= 1 && page_size >= 1,
                      "a page table needs the sink page and a positive page size (virtual ", num_virtual,
                      ", physical ", num_physical, ", page size ", page_size, ")");
        constexpr std::int64_t token_limit = std::int64_t{1} << 31;
        UNIKV_EXPECTS(std::int64_t{num_virtual} * page_size <= token_limit &&
                          std::int64_t{num_physical} * page_size <= token_limit,
                      "token ids of ", num_virtual, " virtual and ", num_physical, " physical pages of ", page_size,
                      " tokens overflow int32");
        return static_cast<std::size_t>(num_virtual) + 1;
    }
    [[nodiscard]] std::size_t clamp_p(std::int32_t p) const noexcept {
        return p >= 0 && static_cast<std::size_t>(p) < p2v_.size() - 1 ? static_cast<std::size_t>(p) : p2v_.size() - 1;
    }

    // Both tables keep index 0 as the sink and their last entry as the -1 sentinel (see the file comment).
    std::vector<std::int32_t> v2p_;
    std::vector<std::int32_t> p2v_;
    // Dirty mirror chunks: a bit per chunk, and the first `dirty_count_` entries of `dirty_list_` name the
    // set bits. Both are sized for every chunk at construction, so marking never allocates.
    std::vector<std::uint64_t> dirty_bits_;
    std::vector<std::int32_t> dirty_list_;
    std::size_t dirty_count_ = 0;
    std::int32_t page_size_;
    std::int32_t page_shift_;  // log2(page_size) when it is a power of two, else -1
};

}  // namespace unikv

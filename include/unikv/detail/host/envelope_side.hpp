#pragma once
/// \file
/// One side of the page-envelope host arena: the physical pages it occupies next to its end of the arena
/// (bottom: pages `[0, mark)`, growing up from byte 0; top: pages `[mark, limit)`, growing down from the
/// arena's end), which of them are holes, and its free logical ids. The logical -> physical table lives in the
/// lease state (leases read it); this keeps the physical -> logical side.
///
/// Invariants (checked by `verify`): an occupied page is live (`to_logical >= 0`) or a hole, never both; pages
/// outside the occupied range are neither; the edge page next to the gap is never a hole (a free of the edge
/// retreats the mark over it and over every hole behind it), so `mark` is the watermark of live bytes.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <unikv/component.hpp>
#include <unikv/error.hpp>

namespace unikv::detail::host {

struct envelope_side {
    Component component = Component::full;
    bool present = false;
    bool top = false;            // grows down from the arena's end (FULL); else up from byte 0
    std::size_t page_bytes = 0;  // the device envelope of the component
    std::int32_t limit = 0;      // pages of `page_bytes` that fit the arena: the physical and logical id space
    std::int32_t mark = 0;       // bottom: pages [0, mark) occupied; top: pages [mark, limit) occupied
    std::int32_t used = 0;       // live pages
    std::vector<std::int32_t> to_logical;    // physical -> logical; -1 for a hole or an unoccupied page
    std::vector<std::int32_t> holes;         // occupied pages that hold nothing, in no order
    std::vector<std::int32_t> hole_pos;      // physical -> its index in `holes`; -1 when not a hole
    std::vector<std::int32_t> free_logical;  // free logical ids, handed out from the back (lowest first)

    /// Sets the side up over an arena of `arena_bytes`, empty. Cold.
    void reset(Component c, bool grows_down, std::size_t envelope, std::size_t arena_bytes) {
        component = c;
        present = true;
        top = grows_down;
        page_bytes = envelope;
        limit = static_cast<std::int32_t>(arena_bytes / envelope);
        mark = top ? limit : 0;
        used = 0;
        const auto n = static_cast<std::size_t>(limit);
        to_logical.assign(n, -1);
        hole_pos.assign(n, -1);
        holes.clear();
        holes.reserve(n);
        free_logical.clear();
        free_logical.reserve(n);
        for (std::int32_t l = limit; l-- > 0;) free_logical.push_back(l);
    }

    /// Pages in the occupied range (live or holes).
    [[nodiscard]] std::int32_t occupied() const noexcept { return top ? limit - mark : mark; }
    [[nodiscard]] bool is_occupied(std::int32_t p) const noexcept { return top ? p >= mark : p < mark; }
    /// The occupied page next to the gap (meaningful when `occupied() > 0`).
    [[nodiscard]] std::int32_t edge() const noexcept { return top ? mark : mark - 1; }
    /// The mark once packed: the live pages fill the occupied range from the end.
    [[nodiscard]] std::int32_t packed_mark() const noexcept { return top ? limit - used : used; }
    [[nodiscard]] std::int32_t hole_count() const noexcept { return static_cast<std::int32_t>(holes.size()); }

    void add_hole(std::int32_t p) {
        hole_pos[static_cast<std::size_t>(p)] = static_cast<std::int32_t>(holes.size());
        holes.push_back(p);
    }
    void remove_hole(std::int32_t p) noexcept {
        const auto at = static_cast<std::size_t>(hole_pos[static_cast<std::size_t>(p)]);
        holes[at] = holes.back();
        hole_pos[static_cast<std::size_t>(holes[at])] = static_cast<std::int32_t>(at);
        holes.pop_back();
        hole_pos[static_cast<std::size_t>(p)] = -1;
    }
    /// Forgets every hole (after a compaction filled them). O(holes).
    void clear_holes() noexcept {
        for (std::int32_t p : holes) hole_pos[static_cast<std::size_t>(p)] = -1;
        holes.clear();
    }

    /// A physical page for a new live page: a hole if any, else the next page past the mark. The caller
    /// checked the room. O(1).
    [[nodiscard]] std::int32_t take_physical() noexcept {
        if (!holes.empty()) {
            const std::int32_t p = holes.back();
            remove_hole(p);
            return p;
        }
        return top ? --mark : mark++;
    }
    /// Makes occupied page `p` free: a hole, or, at the edge, a retreat of the mark over it and over the holes
    /// behind it. O(1) amortized.
    void release_physical(std::int32_t p) noexcept {
        to_logical[static_cast<std::size_t>(p)] = -1;
        if (p != edge()) {
            add_hole(p);
            return;
        }
        if (top) ++mark; else --mark;
        while (occupied() > 0 && hole_pos[static_cast<std::size_t>(edge())] >= 0) {
            remove_hole(edge());
            if (top) ++mark; else --mark;
        }
    }

    /// Appends a line to `out` for each broken invariant, given the side's logical -> physical table. O(limit).
    void verify(const std::vector<std::int32_t>& to_physical, std::vector<std::string>& out) const {
        const std::string_view name = to_string(component);
        if (mark < 0 || mark > limit) out.push_back(concat(name, ": mark ", mark, " outside [0, ", limit, "]"));
        if (static_cast<std::int32_t>(to_physical.size()) != limit) out.push_back(concat(name, ": logical table size"));
        std::int32_t live = 0;
        for (std::int32_t p = 0; p < limit; ++p) {
            const std::int32_t l = to_logical[static_cast<std::size_t>(p)];
            const bool hole = hole_pos[static_cast<std::size_t>(p)] >= 0;
            if (!is_occupied(p) && (l >= 0 || hole)) out.push_back(concat(name, ": page ", p, " beyond the mark is in use"));
            if (is_occupied(p) && (l >= 0) == hole) out.push_back(concat(name, ": occupied page ", p, " is live and a hole, or neither"));
            if (l >= 0) {
                ++live;
                if (l >= limit || to_physical[static_cast<std::size_t>(l)] != p)
                    out.push_back(concat(name, ": physical page ", p, " names logical ", l, ", which maps elsewhere"));
            }
        }
        if (live != used) out.push_back(concat(name, ": ", live, " live pages but used is ", used));
        if (occupied() > 0 && hole_pos[static_cast<std::size_t>(edge())] >= 0)
            out.push_back(concat(name, ": the edge page ", edge(), " is a hole (the mark did not retreat)"));
        std::int32_t mapped = 0;
        for (std::int32_t p : to_physical) mapped += p >= 0 ? 1 : 0;
        if (mapped != used) out.push_back(concat(name, ": ", mapped, " logical pages mapped but used is ", used));
        if (static_cast<std::int32_t>(free_logical.size()) + used != limit)
            out.push_back(concat(name, ": ", free_logical.size(), " free logical ids and ", used, " used of ", limit));
        for (std::int32_t l : free_logical) {
            if (l < 0 || l >= limit || to_physical[static_cast<std::size_t>(l)] >= 0)
                out.push_back(concat(name, ": free logical id ", l, " is out of range or mapped"));
        }
    }
};

}  // namespace unikv::detail::host

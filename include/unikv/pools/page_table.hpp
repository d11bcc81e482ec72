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
/// In a CUDA build the host tables stay authoritative; a device mirror of each table is refreshed by an
/// asynchronous copy queued on the allocator's stream after every batch of table writes, so kernels queued
/// later on that stream read the new mapping (see docs/allocator.md).

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include <unikv/error.hpp>
#include <unikv/ids.hpp>

namespace unikv {

namespace detail {
class pool_core;
}  // namespace detail

class PageTable {
public:
    /// Tables for virtual ids `[0, num_virtual)` and physical pages `[0, num_physical)` of `page_size`
    /// tokens. Both start unbound except the sink.
    PageTable(std::int32_t num_virtual, std::int32_t num_physical, PageSize page_size)
        : v2p_(static_cast<std::size_t>(num_virtual) + 1, -1),
          p2v_(static_cast<std::size_t>(num_physical) + 1, -1),
          page_size_(page_size.tokens),
          page_shift_(shift_of(page_size.tokens)) {
        UNIKV_EXPECTS(num_virtual >= 1 && num_physical >= 1 && page_size.tokens >= 1,
                      "a page table needs the sink page and a positive page size");
        v2p_[0] = 0;
        p2v_[0] = 0;
    }

    [[nodiscard]] std::int32_t num_virtual() const noexcept { return static_cast<std::int32_t>(v2p_.size() - 1); }
    [[nodiscard]] std::int32_t num_physical() const noexcept { return static_cast<std::int32_t>(p2v_.size() - 1); }
    [[nodiscard]] std::int32_t page_size() const noexcept { return page_size_; }

    /// The physical page bound to virtual page `v`, or -1 (unbound, or `v` out of range). O(1).
    [[nodiscard]] std::int32_t physical_of(std::int32_t v) const noexcept { return v2p_[clamp_v(v)]; }
    /// The virtual page bound to physical page `p`, or -1. O(1).
    [[nodiscard]] std::int32_t virtual_of(std::int32_t p) const noexcept { return p2v_[clamp_p(p)]; }

    /// Binds virtual page `v` to physical page `p`. Throws `logic_error` unless both are in range, above the
    /// sink and unbound.
    void bind(std::int32_t v, std::int32_t p) {
        UNIKV_EXPECTS(v > 0 && v < num_virtual() && v2p_[v] == -1, "virtual page ", v, " is not free to bind");
        UNIKV_EXPECTS(p > 0 && p < num_physical() && p2v_[p] == -1, "physical page ", p, " is not free to bind");
        v2p_[v] = p;
        p2v_[p] = v;
    }

    /// Unbinds virtual page `v`; returns the physical page it had. Throws `logic_error` if `v` is unbound.
    std::int32_t unbind(std::int32_t v) {
        UNIKV_EXPECTS(v > 0 && v < num_virtual() && v2p_[v] > 0, "virtual page ", v, " is not bound");
        const std::int32_t p = v2p_[v];
        v2p_[v] = -1;
        p2v_[p] = -1;
        return p;
    }

    /// Moves the binding of physical page `src` to `dst` (the data copy is the caller's job): the virtual
    /// page of `src` now maps to `dst`. Throws `logic_error`, before writing anything, when `src` has no
    /// virtual page (p2v -1: a reserved or free page) or `dst` is bound: never a write through index -1.
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
    }

    /// Gathers the physical page of each virtual page into `out` (same length). Unbound, negative and
    /// out-of-range ids give page 0, the sink. Allocation-free; O(n).
    void translate(std::span<const VirtualPage> in, std::span<PhysicalPage> out) const noexcept {
        const std::int32_t* v2p = v2p_.data();
        const auto limit = static_cast<std::uint32_t>(v2p_.size() - 1);
        const std::size_t n = in.size() < out.size() ? in.size() : out.size();
        for (std::size_t i = 0; i < n; ++i) {
            const auto v = static_cast<std::uint32_t>(in[i].value());  // negative ids wrap to huge values
            const std::int32_t p = v2p[v < limit ? v : limit];
            out[i] = PhysicalPage{p < 0 ? 0 : p};
        }
    }

    /// Gathers the physical token of each virtual token into `out` (same length):
    /// `phys(t) = v2p[t / page_size] * page_size + t % page_size`. Unbound, negative and out-of-range ids
    /// give token 0, the sink. Allocation-free; O(n), a shift and a mask when the page size is a power of two.
    void translate(std::span<const VirtualToken> in, std::span<PhysicalToken> out) const noexcept {
        const std::size_t n = in.size() < out.size() ? in.size() : out.size();
        const std::int32_t* v2p = v2p_.data();
        const auto limit = static_cast<std::uint32_t>(v2p_.size() - 1);
        if (page_shift_ >= 0) {
            translate_pages_of_tokens(in.first(n), out.first(n));
            return;
        }
        const auto ps = static_cast<std::uint32_t>(page_size_);
        for (std::size_t i = 0; i < n; ++i) {
            const auto t = static_cast<std::uint32_t>(in[i].value());
            const std::uint32_t v = t / ps;
            const std::int32_t p = v2p[v < limit ? v : limit];
            out[i] = PhysicalToken{p < 0 ? 0 : static_cast<std::int32_t>(static_cast<std::uint32_t>(p) * ps + (t - v * ps))};
        }
    }

    /// The whole v2p table, sink and sentinel included (for kernels, mirrors and tests).
    [[nodiscard]] std::span<const std::int32_t> v2p() const noexcept { return v2p_; }
    /// The whole p2v table, sink and sentinel included.
    [[nodiscard]] std::span<const std::int32_t> p2v() const noexcept { return p2v_; }

private:
    friend class detail::pool_core;  // binds and unbinds after validating the whole call (hot paths)
    void bind_unchecked(std::int32_t v, std::int32_t p) noexcept {
        UNIKV_ASSERT(v > 0 && v < num_virtual() && v2p_[static_cast<std::size_t>(v)] == -1);
        UNIKV_ASSERT(p > 0 && p < num_physical() && p2v_[static_cast<std::size_t>(p)] == -1);
        v2p_[static_cast<std::size_t>(v)] = p;
        p2v_[static_cast<std::size_t>(p)] = v;
    }
    std::int32_t unbind_unchecked(std::int32_t v) noexcept {
        UNIKV_ASSERT(v > 0 && v < num_virtual() && v2p_[static_cast<std::size_t>(v)] > 0);
        const std::int32_t p = v2p_[static_cast<std::size_t>(v)];
        v2p_[static_cast<std::size_t>(v)] = -1;
        p2v_[static_cast<std::size_t>(p)] = -1;
        return p;
    }

    // Power-of-two pages of 4+ tokens. Ids usually come as whole pages in order (a request's rows), so a run
    // that starts on a page boundary is written as `base + k` after one lookup while a branch-free pass checks
    // that the ids were in order (with the page size a compile-time constant the loop vectorizes); if they
    // were not, the per-token gather rewrites them. In-place translation (`in` and `out` the same memory) is
    // not supported.
    void translate_pages_of_tokens(std::span<const VirtualToken> in, std::span<PhysicalToken> out) const noexcept {
        switch (page_shift_) {
            case 2: return translate_runs<2>(in, out);
            case 3: return translate_runs<3>(in, out);
            case 4: return translate_runs<4>(in, out);
            case 5: return translate_runs<5>(in, out);
            case 6: return translate_runs<6>(in, out);
            default: return translate_runs_dynamic(in, out);
        }
    }
    template <std::uint32_t Shift>
    void translate_runs(std::span<const VirtualToken> in, std::span<PhysicalToken> out) const noexcept {
        constexpr std::uint32_t ps = 1u << Shift;
        constexpr std::uint32_t mask = ps - 1u;
        const std::int32_t* v2p = v2p_.data();
        const auto limit = static_cast<std::uint32_t>(v2p_.size() - 1);
        const std::size_t n = in.size();
        const VirtualToken* __restrict src = in.data();  // `in` and `out` never overlap (documented)
        PhysicalToken* __restrict dst = out.data();
        std::size_t i = 0;
        while (i < n) {
            const auto t = static_cast<std::uint32_t>(src[i].value());
            const std::uint32_t v = t >> Shift;
            const std::int32_t p = v2p[v < limit ? v : limit];
            if ((t & mask) == 0 && n - i >= ps) {
                // Write the page as if its ids were in order, and check that they were in the same pass.
                const std::int32_t base = p < 0 ? 0 : static_cast<std::int32_t>(static_cast<std::uint32_t>(p) << Shift);
                const std::int32_t step = p < 0 ? 0 : 1;
                std::uint32_t diff = 0;
                for (std::uint32_t k = 0; k < ps; ++k) {
                    diff |= static_cast<std::uint32_t>(src[i + k].value()) ^ (t + k);
                    dst[i + k] = PhysicalToken{base + step * static_cast<std::int32_t>(k)};
                }
                if (diff == 0) {
                    i += ps;
                    continue;
                }
            }
            dst[i] = PhysicalToken{p < 0 ? 0 : static_cast<std::int32_t>((static_cast<std::uint32_t>(p) << Shift) | (t & mask))};
            ++i;
        }
    }
    void translate_runs_dynamic(std::span<const VirtualToken> in, std::span<PhysicalToken> out) const noexcept {
        const std::int32_t* v2p = v2p_.data();
        const auto limit = static_cast<std::uint32_t>(v2p_.size() - 1);
        const auto shift = static_cast<std::uint32_t>(page_shift_);
        const std::uint32_t mask = (1u << shift) - 1u;
        for (std::size_t i = 0; i < in.size(); ++i) {
            const auto t = static_cast<std::uint32_t>(in[i].value());
            const std::uint32_t v = t >> shift;
            const std::int32_t p = v2p[v < limit ? v : limit];
            out[i] = PhysicalToken{p < 0 ? 0 : static_cast<std::int32_t>((static_cast<std::uint32_t>(p) << shift) | (t & mask))};
        }
    }

    static constexpr std::int32_t shift_of(std::int32_t ps) noexcept {
        if (ps <= 0 || (ps & (ps - 1)) != 0) return -1;
        std::int32_t s = 0;
        while ((1 << s) < ps) ++s;
        return s;
    }
    [[nodiscard]] std::size_t clamp_v(std::int32_t v) const noexcept {
        return v >= 0 && static_cast<std::size_t>(v) < v2p_.size() - 1 ? static_cast<std::size_t>(v) : v2p_.size() - 1;
    }
    [[nodiscard]] std::size_t clamp_p(std::int32_t p) const noexcept {
        return p >= 0 && static_cast<std::size_t>(p) < p2v_.size() - 1 ? static_cast<std::size_t>(p) : p2v_.size() - 1;
    }

    // Both tables keep index 0 as the sink and their last entry as the -1 sentinel (see the file comment).
    std::vector<std::int32_t> v2p_;
    std::vector<std::int32_t> p2v_;
    std::int32_t page_size_;
    std::int32_t page_shift_;  // log2(page_size) when it is a power of two, else -1
};

}  // namespace unikv

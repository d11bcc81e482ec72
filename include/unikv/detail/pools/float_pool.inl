#pragma once
/// \file
/// `float_pool_impl` definitions: relocation (`relocate_into`, `make_room`, `compact_holes`), span growth,
/// parking, boundary absorption and verification. Included at the bottom of `detail/pools/float_pool.hpp`.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace unikv::detail {

template <class B>
std::optional<ByteBand> float_pool_impl<B>::project(ByteBand room, std::int64_t pages, Projection how) const noexcept {
    const std::size_t page_bytes = spec().page_bytes;
    const std::int32_t first = band_lo(room);
    const std::int32_t last = band_hi(room);
    const auto bytes = [&](std::int32_t lo, std::int32_t hi) {
        return ByteBand{static_cast<std::size_t>(lo) * page_bytes, static_cast<std::size_t>(hi) * page_bytes};
    };
    if ((how.relocated && (how.blockers == Blockers::ignored || relocatable())) || transparent()) {
        const std::int64_t needed = (transparent() ? 0 : core_.occupied_pages() - core_.hole_pages()) + pages;
        if (needed == 0) return ByteBand{room.low, room.low};  // parked and taking nothing: it claims nothing
        if (std::max(0, last - first) < needed) return std::nullopt;
        return bytes(first, last);
    }
    const auto [lo, hi] = how.flushed ? absorbed_span() : std::pair{lo_, hi_};
    if (room.low > static_cast<std::size_t>(lo) * page_bytes || static_cast<std::size_t>(hi) * page_bytes > room.high) {
        return std::nullopt;
    }
    // The holes an absorption leaves, then growth between the span and room's edges.
    const std::int64_t holes = core_.hole_pages() - (lo - lo_) - (hi_ - hi);
    if (holes >= pages) return bytes(lo, hi);
    if (holes + std::max(0, lo - first) + std::max(0, last - hi) < pages) return std::nullopt;
    return bytes(first, last);
}

template <class B>
bool float_pool_impl<B>::relocate_into(std::int32_t a, std::int32_t b, move_context<B>& ctx) {
    if (transparent()) return true;
    a = std::max(a, spec().min_page);
    b = std::min(b, spec().num_pages);
    std::vector<std::int32_t>& src = *ctx.src;
    std::vector<std::int32_t>& dst = *ctx.dst;
    src.clear();
    dst.clear();
    for (std::int32_t p = lo_; p < hi_; ++p) {
        if (p >= a && p < b) continue;
        const page_state s = core_.state(p);
        if (s == page_state::hole) continue;
        if (s != page_state::live) return false;
        src.push_back(p);
    }
    if (src.empty()) return true;
    if (a >= b) return false;
    for (std::int32_t p : core_.holes()) {
        if (p >= a && p < b && dst.size() < src.size()) dst.push_back(p);
    }
    for (std::int32_t p = std::max(hi_, a); p < b && dst.size() < src.size(); ++p) dst.push_back(p);
    for (std::int32_t p = std::min(lo_, b) - 1; p >= a && dst.size() < src.size(); --p) dst.push_back(p);
    if (dst.size() < src.size()) return false;

    ctx.settle_forward();
    ctx.validate_sources(core_);
    scratch_.clear();
    for (std::int32_t p : dst) chosen_[static_cast<std::size_t>(p)] = 1;
    for (std::int32_t p : core_.holes()) {
        if (chosen_[static_cast<std::size_t>(p)] == 0) scratch_.push_back(p);
    }
    for (std::int32_t p : dst) chosen_[static_cast<std::size_t>(p)] = 0;
    core_.reset_holes(scratch_);  // the chosen holes become unowned destinations
    ctx.commit(core_);
    rebuild_span(std::min(lo_, *std::min_element(dst.begin(), dst.end())),
                 std::max(hi_, *std::max_element(dst.begin(), dst.end()) + 1));
    return true;
}

template <class B>
std::size_t float_pool_impl<B>::make_room(Side side, std::size_t min_bytes, ByteBand band, move_context<B>& ctx, bool blocked) {
    const std::size_t gap = gap_bytes(side, band);
    if (blocked || transparent() || gap >= min_bytes) return gap;
    std::int32_t a = band_lo(band);
    std::int32_t b = band_hi(band);
    if (side == Side::low) {
        a = static_cast<std::int32_t>(std::min<std::size_t>(ceil_div(band.low + min_bytes, spec().page_bytes),
                                                            static_cast<std::size_t>(spec().num_pages)));
    } else {
        if (band.high < min_bytes) return gap;
        b = std::min(b, static_cast<std::int32_t>((band.high - min_bytes) / spec().page_bytes));
    }
    if (!relocate_into(a, b, ctx)) return gap;
    return gap_bytes(side, band);
}

template <class B>
std::size_t float_pool_impl<B>::compact_holes(Side retreat, move_context<B>& ctx, bool blocked) {
    if (blocked || transparent()) return 0;
    absorb_boundary();
    if (core_.hole_pages() == 0 || transparent()) return 0;
    const std::int32_t occupied = hi_ - lo_ - core_.hole_pages();
    const std::size_t before = ctx.pages_moved;
    const bool done = retreat == Side::low ? relocate_into(hi_ - occupied, hi_, ctx) : relocate_into(lo_, lo_ + occupied, ctx);
    return done ? ctx.pages_moved - before : 0;
}

template <class B>
std::vector<std::string> float_pool_impl<B>::verify() const {
    std::vector<std::string> out;
    if (lo_ > hi_ || hi_ > spec().num_pages || (lo_ < hi_ && lo_ < spec().min_page) ||
        (lo_ == hi_ && lo_ != spec().num_pages)) {
        out.push_back(concat(to_string(spec().component), " float: span [", lo_, ", ", hi_,
                                     ") is out of range or empty without being parked"));
        return out;
    }
    core_.verify(lo_, hi_, out);
    if (lo_ < hi_ && core_.occupied_pages() == core_.hole_pages()) {
        out.push_back(concat(to_string(spec().component), " float: holds only holes but is not parked"));
    }
    return out;
}

template <class B>
template <class OnPage>
void float_pool_impl<B>::extend(std::int32_t k, ByteBand band, OnPage on_page) {
    if (k <= 0) return;
    if (transparent()) {
        const std::int32_t l = band_lo(band);
        const std::int32_t r = band_hi(band);
        UNIKV_ASSERT(r - l >= k);
        lo_ = l + (r - l - k) / 2;
        hi_ = lo_;
    }
    const std::int32_t rl = room_low(band);
    const std::int32_t rh = transparent() ? band_hi(band) - hi_ : room_high(band);
    std::int32_t kh = rh >= rl ? std::min(k, rh) : k - std::min(k, rl);
    std::int32_t kl = k - kh;
    UNIKV_ASSERT(kl <= rl && kh <= rh);
    for (std::int32_t j = 0; j < kh; ++j) on_page(hi_ + j);
    for (std::int32_t j = 1; j <= kl; ++j) on_page(lo_ - j);
    hi_ += kh;
    lo_ -= kl;
    core_.bump_epoch();
}

template <class B>
void float_pool_impl<B>::park_if_empty() {
    if (core_.occupied_pages() != core_.hole_pages()) return;
    core_.drop_all_holes();
    lo_ = hi_ = spec().num_pages;
    holes_dirty_ = false;
    core_.bump_epoch();
}

template <class B>
void float_pool_impl<B>::absorb_boundary() {
    core_.sort_holes([](std::int32_t x, std::int32_t y) { return x < y; });
    const auto& holes = core_.holes();
    std::size_t k = 0;
    while (k < holes.size() && holes[k] == lo_ + static_cast<std::int32_t>(k)) ++k;
    std::size_t m = 0;
    while (m + k < holes.size() && holes[holes.size() - 1 - m] == hi_ - 1 - static_cast<std::int32_t>(m)) ++m;
    if (k + m == 0) return;
    core_.drop_last_holes(m);
    core_.take_first_holes(k);
    lo_ += static_cast<std::int32_t>(k);
    hi_ -= static_cast<std::int32_t>(m);
    core_.bump_epoch();
    park_if_empty();
}

template <class B>
void float_pool_impl<B>::rebuild_span(std::int32_t lo, std::int32_t hi) {
    std::int32_t first = hi;
    std::int32_t last = lo - 1;
    for (std::int32_t p = lo; p < hi; ++p) {
        const page_state s = core_.state(p);
        if (s != page_state::unowned && s != page_state::hole) {
            first = std::min(first, p);
            last = std::max(last, p);
        }
    }
    scratch_.clear();
    for (std::int32_t p = first; p <= last; ++p) {
        const page_state s = core_.state(p);
        if (s == page_state::unowned || s == page_state::hole) scratch_.push_back(p);
    }
    core_.reset_holes(scratch_);
    if (first > last) {
        lo_ = hi_ = spec().num_pages;
    } else {
        lo_ = first;
        hi_ = last + 1;
    }
    holes_dirty_ = false;
    core_.bump_epoch();
}

}  // namespace unikv::detail

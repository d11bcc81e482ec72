#pragma once
// An indexed binary min-heap of node slots for eviction order, with lazy key increases.
//
// Each entry records the key it was last ordered by. LRU refreshes only ever increase a node's key, and they are
// on the hot path, so they do not touch the heap: the recorded key becomes a lower bound of the current one.
// `top` repairs lazily: while the top entry's recorded key is stale, it re-records the current key and sifts the
// entry down. This returns the true minimum: every recorded key is <= its current key, so a top whose record is
// current is <= every other current key. Decreases (and any other change) go through `fix`, eagerly.
//
// Every operation takes a context with `EvictionKey key(node)` (the current key) and `std::uint32_t& pos(node)`
// (the entry index, npos when absent), so node positions live in the tree's nodes. Push, erase and fix are
// O(log n); `top` is O(log n) per stale entry it repairs; no allocation once the entry vector has grown.

#include <compare>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace unikv::detail::tree {

// Eviction order: lower retention class first, then (SWA only) lower window class, then older LRU stamp, then the
// shallower of two split halves (equal stamps only occur between the parts of one split node, which lie on one
// path and end at different depths, so keys are unique).
struct EvictionKey {
    std::uint8_t retention = 0;
    std::uint8_t window = 0;
    std::uint64_t stamp = 0;
    std::int32_t end = 0;
    friend constexpr auto operator<=>(const EvictionKey&, const EvictionKey&) = default;
    // Declared although <=> implies it: nvcc's front end drops the body of the implicit one ("used but never defined").
    friend constexpr bool operator==(const EvictionKey&, const EvictionKey&) = default;
};

class NodeHeap {
public:
    static constexpr std::uint32_t npos = ~std::uint32_t{0};

    [[nodiscard]] bool empty() const noexcept { return items_.empty(); }
    [[nodiscard]] std::size_t size() const noexcept { return items_.size(); }
    void reserve(std::size_t n) { items_.reserve(n); }
    [[nodiscard]] std::size_t capacity() const noexcept { return items_.capacity(); }

    // The node with the smallest current key (precondition: not empty).
    template <class Ctx>
    [[nodiscard]] std::uint32_t top(Ctx& ctx) noexcept {
        for (;;) {
            Entry& e = items_.front();
            const EvictionKey now = ctx.key(e.node);
            if (now == e.key) return e.node;
            e.key = now;
            sift_down(0, ctx);
        }
    }

    template <class Ctx>
    void push(std::uint32_t node, Ctx& ctx) {
        items_.push_back(Entry{ctx.key(node), node});
        ctx.pos(node) = static_cast<std::uint32_t>(items_.size() - 1);
        sift_up(items_.size() - 1, ctx);
    }

    template <class Ctx>
    void erase(std::uint32_t node, Ctx& ctx) noexcept {
        const std::size_t i = ctx.pos(node);
        ctx.pos(node) = npos;
        const Entry last = items_.back();
        items_.pop_back();
        if (i == items_.size()) return;
        place(i, last, ctx);
        restore(i, ctx);
    }

    // Re-records `node`'s current key and restores the order (key changed in either direction).
    template <class Ctx>
    void fix(std::uint32_t node, Ctx& ctx) noexcept {
        const std::size_t i = ctx.pos(node);
        items_[i].key = ctx.key(node);
        restore(i, ctx);
    }

    // Invariant check: heap order on recorded keys, positions, and recorded <= current. Returns false if broken.
    template <class View>
    [[nodiscard]] bool consistent(const View& ctx) const {
        for (std::size_t i = 0; i < items_.size(); ++i) {
            if (ctx.pos(items_[i].node) != i || ctx.key(items_[i].node) < items_[i].key) return false;
            if (i > 0 && items_[i].key < items_[(i - 1) / 2].key) return false;
        }
        return true;
    }

private:
    struct Entry {
        EvictionKey key;
        std::uint32_t node;
    };

    template <class Ctx>
    void restore(std::size_t i, Ctx& ctx) noexcept {
        if (i > 0 && items_[i].key < items_[(i - 1) / 2].key) {
            sift_up(i, ctx);
        } else {
            sift_down(i, ctx);
        }
    }
    template <class Ctx>
    void sift_up(std::size_t i, Ctx& ctx) noexcept {
        const Entry x = items_[i];
        while (i > 0) {
            const std::size_t p = (i - 1) / 2;
            if (!(x.key < items_[p].key)) break;
            place(i, items_[p], ctx);
            i = p;
        }
        place(i, x, ctx);
    }
    template <class Ctx>
    void sift_down(std::size_t i, Ctx& ctx) noexcept {
        const Entry x = items_[i];
        const std::size_t n = items_.size();
        for (;;) {
            std::size_t c = 2 * i + 1;
            if (c >= n) break;
            if (c + 1 < n && items_[c + 1].key < items_[c].key) ++c;
            if (!(items_[c].key < x.key)) break;
            place(i, items_[c], ctx);
            i = c;
        }
        place(i, x, ctx);
    }
    template <class Ctx>
    void place(std::size_t i, const Entry& e, Ctx& ctx) noexcept {
        items_[i] = e;
        ctx.pos(e.node) = static_cast<std::uint32_t>(i);
    }

    std::vector<Entry> items_;
};

}  // namespace unikv::detail::tree

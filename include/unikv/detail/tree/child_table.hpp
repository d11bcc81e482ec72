#pragma once
// One open-addressing table for every parent -> child edge of a tree: key (parent slot, hash of the child's first
// page and namespace), value the child slot. Linear probing with backward-shift deletion (no tombstones), load
// factor <= 1/2. A lookup probes every entry with the same (parent, hash) and lets the caller verify the tokens,
// so hash collisions are harmless for correctness (they only cost comparisons). No allocation except when the
// table grows.

#include <bit>
#include <cstddef>
#include <cstdint>
#include <vector>

#include <unikv/config.hpp>
#include <unikv/detail/tree/page_hash.hpp>
#include <unikv/error.hpp>

namespace unikv::detail::tree {

class ChildTable {
public:
    static constexpr std::uint32_t npos = ~std::uint32_t{0};

    // An empty table holds no slots (so a default-constructed or moved-from table owns no memory); call
    // `reserve` before the first `find`.
    ChildTable() noexcept = default;

    // Grows the table so that `entries` edges fit without another growth (load factor <= 1/2).
    void reserve(std::size_t entries) {
        std::size_t want = min_slots;
        while (want < 2 * entries) want *= 2;
        if (want > slots_.size()) rehash(want);
    }

    // The child of `parent` whose first page hashes to `hash` and for which `verify(child)` holds, or npos.
    template <class Verify>
    [[nodiscard]] std::uint32_t find(std::uint32_t parent, std::uint64_t hash, Verify&& verify) const {
        for (std::size_t i = home(parent, hash);; i = (i + 1) & mask()) {
            const Slot& s = slots_[i];
            if (s.child == npos) return npos;
            if (s.parent == parent && s.hash == hash && verify(s.child)) return s.child;
        }
    }

    void insert(std::uint32_t parent, std::uint64_t hash, std::uint32_t child) {
        if ((size_ + 1) * 2 > slots_.size()) grow();
        place(Slot{hash, parent, child});
        ++size_;
    }

    // Points the entry (parent, hash) -> from at `to` instead.
    void replace(std::uint32_t parent, std::uint64_t hash, std::uint32_t from, std::uint32_t to) noexcept {
        slots_[locate(parent, hash, from)].child = to;
    }

    void erase(std::uint32_t parent, std::uint64_t hash, std::uint32_t child) noexcept {
        std::size_t hole = locate(parent, hash, child);
        slots_[hole].child = npos;
        --size_;
        // Backward shift: move later entries of the cluster into the hole when their home allows it.
        for (std::size_t j = (hole + 1) & mask(); slots_[j].child != npos; j = (j + 1) & mask()) {
            const std::size_t h = home(slots_[j].parent, slots_[j].hash);
            const bool movable = hole <= j ? (h <= hole || h > j) : (h <= hole && h > j);
            if (!movable) continue;
            slots_[hole] = slots_[j];
            slots_[j].child = npos;
            hole = j;
        }
    }

    // True when the entry exists (invariant checks).
    [[nodiscard]] bool has(std::uint32_t parent, std::uint64_t hash, std::uint32_t child) const noexcept {
        for (std::size_t i = home(parent, hash);; i = (i + 1) & mask()) {
            const Slot& s = slots_[i];
            if (s.child == npos) return false;
            if (s.parent == parent && s.hash == hash && s.child == child) return true;
        }
    }

    [[nodiscard]] std::size_t size() const noexcept { return size_; }

private:
    struct Slot {
        std::uint64_t hash = 0;
        std::uint32_t parent = 0;
        std::uint32_t child = npos;
    };

    [[nodiscard]] std::size_t mask() const noexcept { return slots_.size() - 1; }
    // Fibonacci hashing: `hash` is already mixed, and one multiply spreads the parent over the top bits too, so a
    // lookup needs no second full mix.
    [[nodiscard]] std::size_t home(std::uint32_t parent, std::uint64_t hash) const noexcept {
        return static_cast<std::size_t>(((hash + parent) * hash_multiplier) >> shift_);
    }
    [[nodiscard]] std::size_t locate(std::uint32_t parent, std::uint64_t hash, std::uint32_t child) const noexcept {
        std::size_t i = home(parent, hash);
        while (!(slots_[i].child == child && slots_[i].parent == parent)) {
            UNIKV_ASSERT(slots_[i].child != npos);
            i = (i + 1) & mask();
        }
        return i;
    }
    void place(const Slot& s) noexcept {
        std::size_t i = home(s.parent, s.hash);
        while (slots_[i].child != npos) i = (i + 1) & mask();
        slots_[i] = s;
    }
    void grow() { rehash(slots_.empty() ? min_slots : slots_.size() * 2); }
    void rehash(std::size_t count) {
        std::vector<Slot> old(count);
        old.swap(slots_);
        shift_ = 64 - std::countr_zero(count);
        for (const Slot& s : old)
            if (s.child != npos) place(s);
    }

    static constexpr std::size_t min_slots = 16;

    std::vector<Slot> slots_;
    std::size_t size_ = 0;
    int shift_ = 63;  // 64 - log2(slot count); only read once slots exist
};

}  // namespace unikv::detail::tree

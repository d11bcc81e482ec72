#pragma once
/// \file
/// The replay's row check: the simulated forward writes a marker word into each row it computes (a FULL or
/// SWA token row, a Mamba state slot) and reads the marker of every cached row it attends to back through
/// translation. A row the cache lost, tore, moved wrongly or served from the wrong page reads back another
/// word, and the check throws `WrongRow` naming the request, the position and the component.
///
/// A marker is the first and the last 4-byte word of the row, so a copy that moved only part of an envelope
/// reads back as torn. Markers depend on the token id and its position (state markers on the sequence length
/// and its last token) and on the component, so a row served for the wrong token, position or pool differs.

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>

#include <unikv/component.hpp>
#include <unikv/ids.hpp>
#include <unikv/tree/keys.hpp>

namespace unikv::sim {

/// A cached row that does not hold what the forward wrote there.
class WrongRow : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

/// The marker of token `token` at position `pos` in pool `c`'s rows.
[[nodiscard]] constexpr std::uint32_t row_marker(TokenId token, std::int32_t pos, Component c) noexcept {
    return (static_cast<std::uint32_t>(token) * 2654435761u) ^ (static_cast<std::uint32_t>(pos) * 40503u) ^
           (static_cast<std::uint32_t>(index_of(c)) * 0x9E3779B9u);
}

/// The marker of a Mamba state that has consumed `len` tokens, the last of them `last`.
[[nodiscard]] constexpr std::uint32_t state_marker(TokenId last, std::int32_t len) noexcept {
    return row_marker(last, len, Component::mamba) ^ 0x5bd1e995u;
}

/// Reads and writes markers in the rows of one allocator's arena. `Alloc` is a `UnifiedAllocator`.
template <class Alloc>
class RowMarkers {
public:
    explicit RowMarkers(const Alloc& alloc) noexcept : alloc_(&alloc) {}

    /// Writes `marker` into token row `row` of pool `c` (FULL or SWA).
    void write_token(Component c, PhysicalToken row, std::uint32_t marker) const noexcept {
        put(at(static_cast<std::size_t>(row.value()), entry(c)), entry(c), marker);
    }
    /// Writes `marker` into Mamba slot `slot`.
    void write_state(PhysicalPage slot, std::uint32_t marker) const noexcept {
        put(at(static_cast<std::size_t>(slot.value()), entry(Component::mamba)),
            entry(Component::mamba), marker);
    }
    /// Throws `WrongRow` unless token row `row` of pool `c` holds `want`.
    void check_token(Component c, PhysicalToken row, std::uint32_t want, std::int32_t request, std::int32_t pos) const {
        check(at(static_cast<std::size_t>(row.value()), entry(c)), entry(c), want, c, request, pos, row.value());
    }
    /// Throws `WrongRow` unless Mamba slot `slot` holds `want` (`pos`: the tokens the state has consumed).
    void check_state(PhysicalPage slot, std::uint32_t want, std::int32_t request, std::int32_t pos) const {
        check(at(static_cast<std::size_t>(slot.value()), entry(Component::mamba)),
              entry(Component::mamba), want, Component::mamba, request, pos, slot.value());
    }

private:
    [[nodiscard]] std::size_t entry(Component c) const noexcept { return alloc_->spec()[c].entry_bytes; }
    [[nodiscard]] std::byte* at(std::size_t index, std::size_t stride) const noexcept {
        return alloc_->region().data + index * stride;
    }
    static void put(std::byte* row, std::size_t bytes, std::uint32_t marker) noexcept {
        std::memcpy(row, &marker, 4);
        std::memcpy(row + bytes - 4, &marker, 4);
    }
    static void check(const std::byte* row, std::size_t bytes, std::uint32_t want, Component c, std::int32_t request,
                      std::int32_t pos, std::int32_t physical) {
        std::uint32_t first = 0, last = 0;
        std::memcpy(&first, row, 4);
        std::memcpy(&last, row + bytes - 4, 4);
        if (first == want && last == want) return;
        throw WrongRow("unikv-sim: wrong " + std::string(to_string(c)) + " row: request " + std::to_string(request) +
                       ", position " + std::to_string(pos) + " (physical " + std::to_string(physical) + ") holds " +
                       std::to_string(first) + "/" + std::to_string(last) + ", the forward wrote " +
                       std::to_string(want));
    }

    const Alloc* alloc_;
};

}  // namespace unikv::sim

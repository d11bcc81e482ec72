#pragma once
// Rows as every test writes them: each 4-byte word of a row holds the same marker, so a row that a copy tore, or
// that a wrong page overwrote, reads back as `torn_row` or as another row's marker.

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace test_rows {

/// What `uniform_word` returns for a row whose words disagree.
inline constexpr std::uint32_t torn_row = 0xFFFFFFFFu;

/// Writes `value` into every 4-byte word of the `bytes` bytes at `row`.
inline void fill_row(std::byte* row, std::size_t bytes, std::uint32_t value) {
    for (std::size_t w = 0; w < bytes / 4; ++w) std::memcpy(row + 4 * w, &value, 4);
}

/// The word every 4-byte word of the `bytes` bytes at `row` holds, or `torn_row` when they disagree.
inline std::uint32_t uniform_word(const std::byte* row, std::size_t bytes) {
    std::uint32_t first = 0;
    std::memcpy(&first, row, 4);
    for (std::size_t w = 1; w < bytes / 4; ++w) {
        std::uint32_t x = 0;
        std::memcpy(&x, row + 4 * w, 4);
        if (x != first) return torn_row;
    }
    return first;
}

}  // namespace test_rows

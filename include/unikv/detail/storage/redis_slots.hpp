#pragma once
// Redis Cluster's key-to-slot rule (the cluster specification's "Keys distribution model"): a key belongs to hash
// slot CRC16(key) mod 16384, CRC16 being the XMODEM variant (polynomial 0x1021, initial value 0, no reflection);
// when the key holds a `{...}` with at least one byte between the first `{` and the next `}`, only those bytes are
// hashed, so keys sharing a hash tag share a slot.

#include <array>
#include <cstdint>
#include <string_view>

namespace unikv::detail::storage {

// Slots of a Redis Cluster.
inline constexpr std::uint32_t redis_slot_count = 16384;

inline constexpr std::array<std::uint16_t, 256> redis_crc16_table = [] {
    std::array<std::uint16_t, 256> table{};
    for (std::uint32_t i = 0; i < 256; ++i) {
        std::uint32_t crc = i << 8;
        for (int bit = 0; bit < 8; ++bit) crc = (crc & 0x8000u) != 0 ? (crc << 1) ^ 0x1021u : crc << 1;
        table[i] = static_cast<std::uint16_t>(crc);
    }
    return table;
}();

// CRC16/XMODEM of `bytes`. O(bytes).
[[nodiscard]] constexpr std::uint16_t redis_crc16(std::string_view bytes) noexcept {
    std::uint32_t crc = 0;
    for (const char c : bytes)
        crc = ((crc << 8) ^ redis_crc16_table[((crc >> 8) ^ static_cast<unsigned char>(c)) & 0xffu]) & 0xffffu;
    return static_cast<std::uint16_t>(crc);
}

// The bytes of `key` that choose its slot: the hash tag when there is a non-empty one, else the whole key.
[[nodiscard]] constexpr std::string_view redis_hash_tag(std::string_view key) noexcept {
    const std::size_t open = key.find('{');
    if (open == std::string_view::npos) return key;
    const std::size_t close = key.find('}', open + 1);
    if (close == std::string_view::npos || close == open + 1) return key;
    return key.substr(open + 1, close - open - 1);
}

// The hash slot of `key`. O(key).
[[nodiscard]] constexpr std::uint16_t redis_key_slot(std::string_view key) noexcept {
    return static_cast<std::uint16_t>(redis_crc16(redis_hash_tag(key)) % redis_slot_count);
}

static_assert(redis_crc16("123456789") == 0x31C3, "CRC16/XMODEM's check value");

}  // namespace unikv::detail::storage

#pragma once
// Equality of two token runs, the inner loop of every tree walk step. A match compares each node of its path
// with the key, so a 1K-token walk makes several calls of a few hundred bytes each, not one long one; what
// matters there is keeping loads in flight, not ordering the first difference as memcmp must.

#include <cstddef>
#include <cstdint>
#include <cstring>

#include <unikv/config.hpp>
#include <unikv/tree/keys.hpp>

namespace unikv::detail::tree {

#if UNIKV_HAS_AVX2_DISPATCH
using equal_lanes = std::uint64_t __attribute__((vector_size(32)));

__attribute__((target("avx2"), always_inline)) inline equal_lanes load_lanes(const std::byte* p) noexcept {
    equal_lanes v;
    std::memcpy(&v, p, sizeof v);
    return v;
}
__attribute__((target("avx2"), always_inline)) inline bool any_bit(equal_lanes v) noexcept {
    return ((v[0] | v[1]) | (v[2] | v[3])) != 0;
}

// XORs 32-byte lanes into one accumulator and tests it every 1 KiB and at the end (a difference is rare: it
// ends a match), the last partial lane overlapping the one before. Runs of under 32 bytes go to memcmp.
__attribute__((target("avx2"))) inline bool tokens_equal_avx2(const std::byte* a, const std::byte* b,
                                                              std::size_t bytes) noexcept {
    if (bytes < sizeof(equal_lanes)) return std::memcmp(a, b, bytes) == 0;
    equal_lanes acc{};
    std::size_t i = 0;
    for (; i + 128 <= bytes; i += 128) {
        acc |= (load_lanes(a + i) ^ load_lanes(b + i)) | (load_lanes(a + i + 32) ^ load_lanes(b + i + 32)) |
               (load_lanes(a + i + 64) ^ load_lanes(b + i + 64)) | (load_lanes(a + i + 96) ^ load_lanes(b + i + 96));
        if ((i & 1023) == 1024 - 128 && any_bit(acc)) return false;
    }
    for (; i + 32 <= bytes; i += 32) acc |= load_lanes(a + i) ^ load_lanes(b + i);
    if (i < bytes) acc |= load_lanes(a + bytes - 32) ^ load_lanes(b + bytes - 32);
    return !any_bit(acc);
}
#endif

/// True when the `n` tokens at `a` equal those at `b`. O(n); AVX2 lanes where the CPU has them (chosen at run
/// time), memcmp otherwise.
[[nodiscard]] inline bool tokens_equal(const TokenId* a, const TokenId* b, std::size_t n) noexcept {
    const auto* x = reinterpret_cast<const std::byte*>(a);
    const auto* y = reinterpret_cast<const std::byte*>(b);
#if UNIKV_HAS_AVX2_DISPATCH
    if (__builtin_cpu_supports("avx2")) return tokens_equal_avx2(x, y, n * sizeof(TokenId));
#endif
    return std::memcmp(x, y, n * sizeof(TokenId)) == 0;
}

}  // namespace unikv::detail::tree

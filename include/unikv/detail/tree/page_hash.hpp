#pragma once
// Token hashing shared by the tree cores (child lookup, KV event hashes) and the benchmarks' hash-chain
// baseline. A multiply-xorshift over 64-bit words: fast, not cryptographic; collisions are always resolved by
// comparing tokens.

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

#include <unikv/tree/keys.hpp>

namespace unikv::detail::tree {

inline constexpr std::uint64_t hash_multiplier = 0x9E3779B97F4A7C15ull;

[[nodiscard]] constexpr std::uint64_t mix64(std::uint64_t x) noexcept {
    x ^= x >> 30;
    x *= 0xBF58476D1CE4E5B9ull;
    x ^= x >> 27;
    x *= 0x94D049BB133111EBull;
    x ^= x >> 31;
    return x;
}

/// The two halves of the 128-bit product of `a` and `b`, xor-ed (wyhash's "mum"): a non-linear combination of
/// two words, so that differences in one word cannot be traded against differences in another.
[[nodiscard]] inline std::uint64_t fold_multiply(std::uint64_t a, std::uint64_t b) noexcept {
    __extension__ typedef unsigned __int128 wide;  // GCC and Clang on 64-bit targets, the library's hosts
    const wide p = static_cast<wide>(a) * b;
    return static_cast<std::uint64_t>(p) ^ static_cast<std::uint64_t>(p >> 64);
}

/// Hash of `n` tokens, seeded.
[[nodiscard]] inline std::uint64_t hash_tokens(std::uint64_t seed, const TokenId* p, std::size_t n) noexcept {
    std::uint64_t h = seed ^ (static_cast<std::uint64_t>(n) * hash_multiplier);
    std::size_t i = 0;
    for (; i + 2 <= n; i += 2) {
        std::uint64_t w;
        std::memcpy(&w, p + i, sizeof w);
        h = (h ^ w) * hash_multiplier;
        h ^= h >> 29;
    }
    if (i < n) {
        h = (h ^ static_cast<std::uint32_t>(p[i])) * hash_multiplier;
        h ^= h >> 29;
    }
    return mix64(h);
}

/// The hash of the empty prefix in namespace `ns`.
[[nodiscard]] constexpr std::uint64_t namespace_seed(KeyNamespace ns) noexcept {
    return mix64(ns.value ^ 0x5A17C0DEull);
}

/// Extends a page-chained prefix hash by every whole page of `tokens`.
[[nodiscard]] inline std::uint64_t chain_pages(std::uint64_t h, std::span<const TokenId> tokens,
                                               std::int32_t page_size) noexcept {
    const auto ps = static_cast<std::size_t>(page_size);
    for (std::size_t i = 0; i + ps <= tokens.size(); i += ps) h = hash_tokens(h, tokens.data() + i, ps);
    return h;
}

}  // namespace unikv::detail::tree

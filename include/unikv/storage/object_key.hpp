#pragma once
/// \file
/// Keys of the storage tier's page objects (ARCHITECTURE.md §1.8), so that every engine instance with the same
/// model, layout, page size and parallelism finds what any of them stored:
/// * a *store namespace* (`StoreNamespace`) hashes the model, the layout, the page geometry and the rank;
/// * the FULL page that ends a prefix is keyed by the *prefix hash chain*: `PageKeyChain` extends the key of the
///   prefix before it by the page's tokens, from a root that is the store namespace with the tree's key
///   namespace (an adapter, a salt);
/// * the SWA window and the Mamba state that end on a FULL page are keyed by that page's key and their kind
///   (`object_key`): they are needed only at a match boundary, FULL pages all the way to it.
/// Keys are 128-bit XXH3 hashes (Debian's `libxxhash-dev`, included inline): a collision would serve another
/// prefix's rows, so the width makes one improbable across any store's lifetime (about 2^-64 at 2^32 objects).

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string_view>

#include <unikv/component.hpp>
#include <unikv/tree/keys.hpp>

#ifndef XXH_INLINE_ALL
#define XXH_INLINE_ALL
#endif
#include <xxhash.h>

namespace unikv {

/// The 128-bit key of one stored object.
struct ObjectKey {
    std::uint64_t high = 0;
    std::uint64_t low = 0;
    friend constexpr bool operator==(ObjectKey, ObjectKey) noexcept = default;
};

/// What a stored object holds: one FULL page, the SWA window that ends on a FULL page, or the Mamba state there.
enum class ObjectKind : std::uint8_t { full, swa, mamba };

/// The component whose bytes an object of `kind` holds.
[[nodiscard]] constexpr Component component_of(ObjectKind kind) noexcept {
    return kind == ObjectKind::full ? Component::full : kind == ObjectKind::swa ? Component::swa : Component::mamba;
}

/// What makes stored pages interchangeable between engine instances: objects are shared exactly when every field
/// is equal. The engine names its model and layout (any stable strings, e.g. the checkpoint's name and
/// `"gemma3-swa-full"`); the page geometry comes from the arena (`StoreNamespace::of` in the cache's
/// integration); a tensor-parallel rank stores its own shard of each page.
struct StoreNamespace {
    std::string_view model{};                ///< the model (checkpoint) whose KV the pages hold
    std::string_view layout{};               ///< the layout of the page envelopes (pools, dtype, layer order)
    std::int32_t page_tokens = 0;            ///< tokens per FULL page
    std::int32_t swa_window = 0;             ///< SWA window in tokens (0 without SWA)
    per_component<std::uint64_t> page_bytes{};  ///< bytes of one page (one state for Mamba) per component
    std::int32_t tp_rank = 0;                ///< tensor-parallel rank of this instance
    std::int32_t tp_size = 1;                ///< tensor-parallel size
    std::int32_t pp_rank = 0;                ///< pipeline-parallel rank
    std::int32_t pp_size = 1;                ///< pipeline-parallel size

    /// The namespace's 64-bit digest, the seed of every key in it. O(model + layout).
    [[nodiscard]] std::uint64_t digest() const noexcept {
        XXH3_state_t state{};
        XXH3_64bits_reset_withSeed(&state, 0x756e696b76ull);  // "unikv"
        const auto text = [&](std::string_view s) {
            const std::uint64_t n = s.size();
            XXH3_64bits_update(&state, &n, sizeof n);
            XXH3_64bits_update(&state, s.data(), s.size());
        };
        const auto number = [&](std::uint64_t v) { XXH3_64bits_update(&state, &v, sizeof v); };
        text(model);
        text(layout);
        number(static_cast<std::uint64_t>(page_tokens));
        number(static_cast<std::uint64_t>(swa_window));
        for (Component c : all_components) number(page_bytes[c]);
        number(static_cast<std::uint64_t>(tp_rank));
        number(static_cast<std::uint64_t>(tp_size));
        number(static_cast<std::uint64_t>(pp_rank));
        number(static_cast<std::uint64_t>(pp_size));
        return XXH3_64bits_digest(&state);
    }
};

/// The prefix hash chain: the key of a prefix's last FULL page from the key before it and the page's tokens.
/// Each step hashes the previous key and the tokens together, so a key names its whole prefix.
class PageKeyChain {
public:
    /// The key of the empty prefix of tree namespace `ns` in the store namespace whose digest is `store`.
    [[nodiscard]] static ObjectKey root(std::uint64_t store, KeyNamespace ns) noexcept {
        const std::uint64_t words[2] = {store, ns.value};
        const XXH128_hash_t h = XXH3_128bits_withSeed(words, sizeof words, 0x726f6f74ull);  // "root"
        return {h.high64, h.low64};
    }
    /// The key of the prefix `previous` extended by one page of `tokens`. O(tokens).
    [[nodiscard]] static ObjectKey next(ObjectKey previous, std::span<const TokenId> tokens) noexcept {
        XXH3_state_t state{};
        XXH3_128bits_reset(&state);
        const std::uint64_t words[2] = {previous.high, previous.low};
        XXH3_128bits_update(&state, words, sizeof words);
        XXH3_128bits_update(&state, tokens.data(), tokens.size_bytes());
        const XXH128_hash_t h = XXH3_128bits_digest(&state);
        return {h.high64, h.low64};
    }
    /// Writes the key of each whole page of `tokens` (`page_tokens` each, a partial tail ignored) after `from`
    /// into `out` (at least that many entries); returns the number written. O(tokens).
    static std::size_t keys(ObjectKey from, std::span<const TokenId> tokens, std::int32_t page_tokens,
                            std::span<ObjectKey> out) noexcept {
        const auto page = static_cast<std::size_t>(page_tokens);
        std::size_t n = 0;
        for (std::size_t t = 0; t + page <= tokens.size() && n < out.size(); t += page) {
            from = next(from, tokens.subspan(t, page));
            out[n++] = from;
        }
        return n;
    }
};

/// The key of the object of `kind` that ends on the FULL page keyed `page`: the page itself for FULL; for the SWA
/// window and the Mamba state a key derived from it, so that each kind has its own object. O(1).
[[nodiscard]] inline ObjectKey object_key(ObjectKey page, ObjectKind kind) noexcept {
    if (kind == ObjectKind::full) return page;
    const std::uint64_t words[3] = {page.high, page.low, static_cast<std::uint64_t>(kind)};
    const XXH128_hash_t h = XXH3_128bits(words, sizeof words);
    return {h.high64, h.low64};
}

}  // namespace unikv

template <>
struct std::hash<unikv::ObjectKey> {
    std::size_t operator()(unikv::ObjectKey k) const noexcept { return static_cast<std::size_t>(k.low ^ (k.high * 0x9E3779B97F4A7C15ull)); }
};

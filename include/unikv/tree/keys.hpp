#pragma once
/// \file
/// Keys of the prefix tree: token ids plus a namespace (LoRA adapter, cache salt, extra key). Equal tokens under
/// different namespaces never share a node. The tree caches whole pages only: a key's length is read at page
/// granularity (runtime page size), see `TreeConfig::page_size`.

#include <cstdint>
#include <span>

namespace unikv {

/// One token id as the model's tokenizer produced it.
using TokenId = std::int32_t;

/// A key namespace: keys in different namespaces are disjoint subtrees (0 is the default namespace).
struct KeyNamespace {
    /// Opaque namespace value chosen by the engine (for example a hash of adapter id and salt).
    std::uint64_t value = 0;
    friend constexpr bool operator==(KeyNamespace, KeyNamespace) noexcept = default;
};

/// A lookup or insertion key: a token sequence in a namespace. Non-owning; the tokens must outlive the call.
struct TokenKey {
    /// The tokens, position 0 first.
    std::span<const TokenId> tokens;
    /// The namespace the tokens live in.
    KeyNamespace ns{};
};

}  // namespace unikv

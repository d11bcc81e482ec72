#pragma once
/// \file
/// The stored form of one page object: a 64-byte header, then the payload (the page's bytes as the host tier
/// holds them). The header carries a format version, the object's key and kind, the payload's size and
/// checksum, and a checksum of itself, so that a reader can tell a good object from a torn, short, stale or
/// foreign one: `check_header` and `check_payload` say which, and every backend serves such an object as a
/// miss, never as data.

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

#include <unikv/storage/object_key.hpp>

#ifdef UNIKV_XXHASH_DISPATCH
// libxxhash's runtime-dispatched XXH3 (declared here: <xxh_x86dispatch.h> would make it static under the inline
// build of object_key.hpp).
extern "C" unsigned long long XXH3_64bits_dispatch(const void* input, std::size_t length);
#endif

namespace unikv {

/// The header of a stored page object (little-endian, as the hosts the library targets store it).
struct ObjectHeader {
    /// "UNIKVOBJ": a slot that never held an object (zeros, a hole) fails here.
    static constexpr std::uint64_t magic_value = 0x4a424f56494b4e55ull;
    /// The format version; a reader serves only its own.
    static constexpr std::uint32_t current_version = 1;

    std::uint64_t magic = magic_value;
    std::uint32_t version = current_version;
    std::uint8_t kind = 0;                 ///< `ObjectKind`
    std::uint8_t reserved[3] = {};
    ObjectKey key{};
    std::uint64_t payload_bytes = 0;
    std::uint64_t payload_checksum = 0;    ///< XXH3-64 of the payload
    std::uint64_t header_checksum = 0;     ///< XXH3-64 of the bytes above
};
static_assert(sizeof(ObjectHeader) == 56, "ObjectHeader's stored form has no padding");

/// Bytes a header takes in front of its payload (the header, padded).
inline constexpr std::size_t object_header_bytes = 64;
static_assert(sizeof(ObjectHeader) <= object_header_bytes);

/// Why a read object is not served (`ObjectCheck::good` when it is).
enum class ObjectCheck : std::uint8_t {
    good,
    not_an_object,  ///< no magic: an empty slot, a hole, another format
    version,        ///< written by another format version
    torn_header,    ///< the header's own checksum fails
    other_key,      ///< a good object of another key or kind (a reused slot)
    size,           ///< a payload of another size than the reader expects (a short object)
    torn_payload,   ///< the payload's checksum fails
};

/// XXH3-64 of `bytes`. O(bytes): about 20 GB/s with SSE2, 35 with AVX2 (one core, in cache). Built with
/// `UNIKV_XXHASH_DISPATCH` (the `unikv::storage` CMake target defines it and links Debian's `libxxhash`), it runs
/// the library's runtime dispatch to the widest vector unit of the machine, whatever the engine's `-march`;
/// the values are the same either way.
[[nodiscard]] inline std::uint64_t object_checksum(std::span<const std::byte> bytes) noexcept {
#ifdef UNIKV_XXHASH_DISPATCH
    return XXH3_64bits_dispatch(bytes.data(), bytes.size());
#else
    return XXH3_64bits(bytes.data(), bytes.size());
#endif
}

/// The header of the object of `key` and `kind` holding `payload` (its checksum computed: O(payload)).
[[nodiscard]] inline ObjectHeader make_header(ObjectKey key, ObjectKind kind, std::span<const std::byte> payload) noexcept {
    ObjectHeader h;
    h.kind = static_cast<std::uint8_t>(kind);
    h.key = key;
    h.payload_bytes = payload.size();
    h.payload_checksum = object_checksum(payload);
    h.header_checksum = XXH3_64bits(&h, offsetof(ObjectHeader, header_checksum));
    return h;
}

/// Checks a header read back for the object of `key` and `kind` with a payload of `payload_bytes`. O(1).
[[nodiscard]] inline ObjectCheck check_header(const ObjectHeader& h, ObjectKey key, ObjectKind kind,
                                              std::size_t payload_bytes) noexcept {
    if (h.magic != ObjectHeader::magic_value) return ObjectCheck::not_an_object;
    if (h.version != ObjectHeader::current_version) return ObjectCheck::version;
    if (h.header_checksum != XXH3_64bits(&h, offsetof(ObjectHeader, header_checksum))) return ObjectCheck::torn_header;
    if (h.key != key || h.kind != static_cast<std::uint8_t>(kind)) return ObjectCheck::other_key;
    if (h.payload_bytes != payload_bytes) return ObjectCheck::size;
    return ObjectCheck::good;
}

/// Checks a payload read back against its (good) header. O(payload).
[[nodiscard]] inline ObjectCheck check_payload(const ObjectHeader& h, std::span<const std::byte> payload) noexcept {
    return object_checksum(payload) == h.payload_checksum ? ObjectCheck::good : ObjectCheck::torn_payload;
}

/// The header in its stored bytes (`object_header_bytes`, the padding zero).
inline void store_header(const ObjectHeader& h, std::span<std::byte, object_header_bytes> out) noexcept {
    std::memset(out.data(), 0, out.size());
    std::memcpy(out.data(), &h, sizeof h);
}

/// A header from its stored bytes.
[[nodiscard]] inline ObjectHeader load_header(std::span<const std::byte, object_header_bytes> in) noexcept {
    ObjectHeader h;
    std::memcpy(&h, in.data(), sizeof h);
    return h;
}

}  // namespace unikv

#pragma once
// The journal of a `FileStorage`: one fixed-size record per placement (an object committed to a slot) and per
// removal, appended after the fact, so a replay at start-up rebuilds the index. A record carries its own
// checksum: a record torn by a crash ends the replay there (and is cut off), and what it named is lost, never
// served: every object read is checked against its own header anyway (`page_object.hpp`).

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include <unistd.h>

#include <unikv/storage/object_key.hpp>

namespace unikv::detail::storage {

struct journal_record {
    enum op_type : std::uint8_t { placed = 1, removed = 2 };
    ObjectKey key{};
    std::uint64_t payload_bytes = 0;  // names the slab (one per payload size)
    std::uint32_t slot = 0;
    std::uint8_t op = placed;
    std::uint8_t kind = 0;
    std::uint8_t reserved[2] = {};
    std::uint64_t checksum = 0;  // XXH3-64 of the bytes above

    static journal_record make(std::uint8_t op, ObjectKey key, ObjectKind kind, std::uint64_t payload_bytes,
                               std::uint32_t slot) noexcept {
        journal_record r;
        r.op = op;
        r.key = key;
        r.kind = static_cast<std::uint8_t>(kind);
        r.payload_bytes = payload_bytes;
        r.slot = slot;
        r.checksum = XXH3_64bits(&r, offsetof(journal_record, checksum));
        return r;
    }
    [[nodiscard]] bool intact() const noexcept {
        return (op == placed || op == removed) && checksum == XXH3_64bits(this, offsetof(journal_record, checksum));
    }
};
static_assert(sizeof(journal_record) == 40);

// Reads every intact record of `fd` from its start into `out`; returns the bytes they take (where a torn tail
// begins). -1 on a read error (errno kept).
inline long long read_journal(int fd, std::vector<journal_record>& out) {
    out.clear();
    std::vector<std::byte> chunk(1 << 16);
    std::size_t have = 0;  // bytes of a partial record carried over
    long long offset = 0;
    for (;;) {
        const ssize_t n = ::pread(fd, chunk.data() + have, chunk.size() - have, offset + static_cast<long long>(have));
        if (n < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        const std::size_t total = have + static_cast<std::size_t>(n);
        std::size_t at = 0;
        for (; at + sizeof(journal_record) <= total; at += sizeof(journal_record)) {
            journal_record r;
            std::memcpy(&r, chunk.data() + at, sizeof r);
            if (!r.intact()) return offset + static_cast<long long>(at);
            out.push_back(r);
        }
        offset += static_cast<long long>(at);
        if (n == 0) return offset;  // a partial record at the end is torn
        std::memmove(chunk.data(), chunk.data() + at, total - at);
        have = total - at;
    }
}

// Writes all of `bytes` at the end of the file `fd` (opened O_APPEND); false on an error (errno kept).
inline bool append_all(int fd, std::span<const std::byte> bytes) {
    while (!bytes.empty()) {
        const ssize_t n = ::write(fd, bytes.data(), bytes.size());
        if (n < 0) {
            if (errno == EINTR) continue;
            return false;
        }
        bytes = bytes.subspan(static_cast<std::size_t>(n));
    }
    return true;
}

}  // namespace unikv::detail::storage

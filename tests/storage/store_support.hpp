#pragma once
// Helpers of the storage tests: page payloads with a marker per row, a temporary directory, and waiting for one
// batch of a backend (bounded in time) while keeping the results of the others.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include <unikv/storage/storage_concept.hpp>

namespace unikv::test {

/// A payload of `bytes` whose every 8-byte row holds `marker * 1'000'003 + row`: any byte from another object,
/// another row or a stale slot shows.
inline std::vector<std::byte> marked_payload(std::uint64_t marker, std::size_t bytes) {
    std::vector<std::byte> out(bytes);
    for (std::size_t row = 0; row * 8 < bytes; ++row) {
        const std::uint64_t word = marker * 1'000'003ull + row;
        std::memcpy(out.data() + row * 8, &word, std::min<std::size_t>(8, bytes - row * 8));
    }
    return out;
}

/// A key for test object `n` (not a chain key: any 128 bits do).
inline ObjectKey test_key(std::uint64_t n) { return {0x7e57ull << 48 | n, n * 0x9E3779B97F4A7C15ull + 1}; }

/// The keys of test objects `first` .. `first + n - 1`.
inline std::vector<ObjectKey> test_keys(std::uint64_t first, std::size_t n) {
    std::vector<ObjectKey> keys;
    for (std::size_t i = 0; i < n; ++i) keys.push_back(test_key(first + i));
    return keys;
}

/// The marked payloads (`marked_payload`) of test objects `first` .. `first + n - 1`.
inline std::vector<std::vector<std::byte>> marked_payloads(std::uint64_t first, std::size_t n, std::size_t bytes) {
    std::vector<std::vector<std::byte>> out;
    for (std::size_t i = 0; i < n; ++i) out.push_back(marked_payload(first + i, bytes));
    return out;
}

/// A fresh directory under the system's temporary directory, removed with everything in it at the end.
class TempDir {
public:
    TempDir() {
        std::string pattern = (std::filesystem::temp_directory_path() / "unikv-store-XXXXXX").string();
        if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
        path_ = pattern;
    }
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;
    ~TempDir() {
        std::error_code ec;
        std::filesystem::remove_all(path_, ec);
    }
    [[nodiscard]] const std::string& path() const noexcept { return path_; }

private:
    std::string path_;
};

/// Polls `store` until batch `t` completes (at most `limit`), keeping other batches' results in `others`;
/// returns `t`'s results. Throws when it does not complete in time.
template <class Store>
std::vector<PageResult> wait_for(Store& store, StorageTicket t, std::map<std::uint64_t, std::vector<PageResult>>* others = nullptr,
                                 std::chrono::milliseconds limit = std::chrono::seconds(20)) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    std::vector<PageResult> mine;
    bool found = false;
    while (!found) {
        if (std::chrono::steady_clock::now() > deadline) throw std::runtime_error("a storage batch did not complete in time");
        for (const StorageDone& d : store.poll(std::chrono::milliseconds(50))) {
            if (d.ticket == t) {
                mine.assign(d.results.begin(), d.results.end());
                found = true;
            } else if (others != nullptr) {
                (*others)[d.ticket.value].assign(d.results.begin(), d.results.end());
            }
        }
    }
    return mine;
}

/// Puts `payloads[i]` under `keys[i]` (all of `kind`) in one batch and waits for it.
template <class Store>
std::vector<PageResult> put_all(Store& store, std::span<const ObjectKey> keys, const std::vector<std::vector<std::byte>>& payloads,
                                ObjectKind kind = ObjectKind::full) {
    std::vector<ObjectWrite> items;
    for (std::size_t i = 0; i < keys.size(); ++i) items.push_back({keys[i], kind, payloads[i]});
    return wait_for(store, store.put(items));
}

/// Gets `keys` (all of `kind`) into buffers of `bytes` each in one batch and waits; `out` receives the buffers.
template <class Store>
std::vector<PageResult> get_all(Store& store, std::span<const ObjectKey> keys, std::size_t bytes,
                                std::vector<std::vector<std::byte>>& out, ObjectKind kind = ObjectKind::full) {
    out.assign(keys.size(), std::vector<std::byte>(bytes, std::byte{0xEE}));
    std::vector<ObjectRead> items;
    for (std::size_t i = 0; i < keys.size(); ++i) items.push_back({keys[i], kind, out[i]});
    return wait_for(store, store.get(items));
}

}  // namespace unikv::test

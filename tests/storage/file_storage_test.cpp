// FileStorage: the backend contract, restarts and crashes, O_DIRECT for aligned payloads, corrupt objects, the
// capacity bound, and faults of the disk and the directory, each read back byte for byte.

#include <doctest/doctest.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <unikv/storage/any_storage.hpp>
#include <unikv/storage/file_storage.hpp>

#include "store_contract.hpp"

namespace {

using unikv::FileStorage;
using unikv::ObjectKey;
using unikv::ObjectKind;
using unikv::PageResult;
using namespace unikv::test;

constexpr std::size_t page = 32 << 10;

std::string slab_path(const TempDir& dir, std::size_t payload) { return dir.path() + "/slab-" + std::to_string(payload) + ".dat"; }

// Overwrites `n` bytes at `offset` of `path` with 0x5A.
void scribble(const std::string& path, std::uint64_t offset, std::size_t n) {
    const int fd = ::open(path.c_str(), O_WRONLY);
    REQUIRE(fd >= 0);
    const std::vector<char> junk(n, 0x5A);
    REQUIRE(::pwrite(fd, junk.data(), n, static_cast<off_t>(offset)) == static_cast<ssize_t>(n));
    ::close(fd);
}

}  // namespace

TEST_CASE("FileStorage keeps the storage-backend contract") {
    TempDir dir;
    FileStorage store({.directory = dir.path(), .capacity_bytes = 64ull << 20});
    REQUIRE(store.status().empty());
    check_store_contract(store, 1);
    CHECK(store.verify().empty());
}

TEST_CASE("a restarted FileStorage serves what it stored, byte for byte, and a torn journal record loses only its object") {
    TempDir dir;
    const auto keys = test_keys(10, 6);
    const auto payloads = marked_payloads(10, 6, page);
    {
        FileStorage store({.directory = dir.path(), .capacity_bytes = 16ull << 20});
        REQUIRE(put_all(store, keys, payloads) == std::vector<PageResult>(6, PageResult::hit));
    }
    {
        FileStorage again({.directory = dir.path(), .capacity_bytes = 16ull << 20});
        REQUIRE(again.status().empty());
        CHECK(again.objects() == 6);
        CHECK(again.verify().empty());
        std::vector<std::vector<std::byte>> read;
        CHECK(get_all(again, keys, page, read) == std::vector<PageResult>(6, PageResult::hit));
        CHECK(read == payloads);
        // Another instance's second process could not open it meanwhile: the directory is locked.
        FileStorage second({.directory = dir.path(), .capacity_bytes = 16ull << 20});
        CHECK_FALSE(second.status().empty());
        CHECK(wait_for(second, second.get(std::vector<unikv::ObjectRead>{{keys[0], ObjectKind::full, read[0]}})) ==
              std::vector<PageResult>{PageResult::error});
    }
    // A crash while appending: the journal ends in half a record (the last object's), and garbage after it.
    const std::string journal = dir.path() + "/journal";
    const auto size = std::filesystem::file_size(journal);
    REQUIRE(size == 6 * 40);
    std::filesystem::resize_file(journal, size - 20);
    {
        std::ofstream tail(journal, std::ios::app | std::ios::binary);
        tail << "torn";
    }
    FileStorage after({.directory = dir.path(), .capacity_bytes = 16ull << 20});
    REQUIRE(after.status().empty());
    CHECK(after.objects() == 5);
    CHECK(after.verify().empty());
    std::vector<std::vector<std::byte>> read;
    CHECK(get_all(after, keys, page, read) ==
          std::vector<PageResult>{PageResult::hit, PageResult::hit, PageResult::hit, PageResult::hit, PageResult::hit, PageResult::miss});
    for (std::size_t i = 0; i < 5; ++i) CHECK(read[i] == payloads[i]);
    // The lost object's slot is free again and takes a new one.
    const auto more = test_keys(50, 1);
    const auto more_payload = marked_payloads(50, 1, page);
    CHECK(put_all(after, more, more_payload) == std::vector<PageResult>{PageResult::hit});
    CHECK(get_all(after, more, page, read) == std::vector<PageResult>{PageResult::hit});
    CHECK(read[0] == more_payload[0]);
    CHECK(after.verify().empty());
}

TEST_CASE("aligned payloads go with O_DIRECT, byte for byte across a restart; unaligned ones and direct_io off do not") {
    TempDir dir;
    constexpr std::size_t n = 4;
    const auto keys = test_keys(300, n);
    const auto payloads = marked_payloads(300, n, page);
    // Host-tier pages are block aligned: so are these buffers (one block-aligned allocation, a page each).
    struct Aligned {
        std::size_t shift = 0;  // 64: every buffer off its block
        std::byte* base = static_cast<std::byte*>(std::aligned_alloc(4096, n * page + 4096));
        std::byte* p = base + shift;
        ~Aligned() { std::free(base); }
        std::span<std::byte> at(std::size_t i) const { return {p + i * page, page}; }
    } out, in, off{.shift = 64};
    for (std::size_t i = 0; i < n; ++i) std::memcpy(out.at(i).data(), payloads[i].data(), page);
    const auto reads_into = [&](const Aligned& buf) {
        std::vector<unikv::ObjectRead> r;
        for (std::size_t i = 0; i < n; ++i) r.push_back({keys[i], ObjectKind::full, buf.at(i)});
        return r;
    };
    // A file system that refuses O_DIRECT (tmpfs) takes everything through the page cache: same bytes, no count.
    const int probe = ::open((dir.path() + "/probe").c_str(), O_RDWR | O_CREAT | O_DIRECT, 0644);
    const std::uint64_t direct = probe >= 0 ? 1 : 0;
    if (probe >= 0) ::close(probe);
    if (direct == 0) MESSAGE("this file system refuses O_DIRECT: the page-cache path is checked alone");
    {
        FileStorage store({.directory = dir.path(), .capacity_bytes = 16ull << 20});
        std::vector<unikv::ObjectWrite> w;
        for (std::size_t i = 0; i < n; ++i) w.push_back({keys[i], ObjectKind::full, out.at(i)});
        REQUIRE(wait_for(store, store.put(w)) == std::vector<PageResult>(n, PageResult::hit));
        CHECK(store.direct_objects() == direct * n);
        CHECK(wait_for(store, store.get(reads_into(in))) == std::vector<PageResult>(n, PageResult::hit));
        CHECK(store.direct_objects() == direct * 2 * n);
        for (std::size_t i = 0; i < n; ++i) CHECK(std::memcmp(in.at(i).data(), payloads[i].data(), page) == 0);
        // Unaligned buffers over the same file go through the page cache and read the same bytes.
        CHECK(wait_for(store, store.get(reads_into(off))) == std::vector<PageResult>(n, PageResult::hit));
        for (std::size_t i = 0; i < n; ++i) CHECK(std::memcmp(off.at(i).data(), payloads[i].data(), page) == 0);
        CHECK(store.direct_objects() == direct * 2 * n);
        CHECK(store.verify().empty());
    }
    // Restarted: the direct reads check every header as before; a damaged payload is a miss.
    scribble(slab_path(dir, page), FileStorage::slot_bytes(page) + 100, 8);
    FileStorage again({.directory = dir.path(), .capacity_bytes = 16ull << 20});
    std::memset(in.p, 0, n * page);
    CHECK(wait_for(again, again.get(reads_into(in))) ==
          std::vector<PageResult>{PageResult::hit, PageResult::miss, PageResult::hit, PageResult::hit});
    for (std::size_t i : {0u, 2u, 3u}) CHECK(std::memcmp(in.at(i).data(), payloads[i].data(), page) == 0);
    CHECK(again.stats().corrupt == 1);
    // direct_io off: the page cache only. Reopened with it on, the same slots read with O_DIRECT, the last one too,
    // even where an older writer left the file ending just after its header (the read falls back to the page cache).
    TempDir other;
    {
        FileStorage buffered({.directory = other.path(), .capacity_bytes = 16ull << 20, .direct_io = false});
        std::vector<unikv::ObjectWrite> w;
        for (std::size_t i = 0; i < n; ++i) w.push_back({keys[i], ObjectKind::full, out.at(i)});
        CHECK(wait_for(buffered, buffered.put(w)) == std::vector<PageResult>(n, PageResult::hit));
        CHECK(buffered.direct_objects() == 0);
    }
    const std::uint64_t slot = FileStorage::slot_bytes(page);
    CHECK(std::filesystem::file_size(slab_path(other, page)) == n * slot);  // whole slots, the last one included
    std::filesystem::resize_file(slab_path(other, page), (n - 1) * slot + page + unikv::object_header_bytes);
    FileStorage reopened({.directory = other.path(), .capacity_bytes = 16ull << 20});
    std::memset(in.p, 0, n * page);
    CHECK(wait_for(reopened, reopened.get(reads_into(in))) == std::vector<PageResult>(n, PageResult::hit));
    for (std::size_t i = 0; i < n; ++i) CHECK(std::memcmp(in.at(i).data(), payloads[i].data(), page) == 0);
    CHECK(reopened.direct_objects() == direct * n);
    CHECK(reopened.stats().corrupt == 0);
}

TEST_CASE("a corrupt, torn or overwritten FileStorage object is a miss and is dropped, never served") {
    TempDir dir;
    FileStorage store({.directory = dir.path(), .capacity_bytes = 16ull << 20});
    const auto keys = test_keys(100, 4);
    const auto payloads = marked_payloads(100, 4, page);
    REQUIRE(put_all(store, keys, payloads) == std::vector<PageResult>(4, PageResult::hit));
    const std::uint64_t slot = FileStorage::slot_bytes(page);
    // Slots are taken from 0 in order: object i sits at slot i.
    scribble(slab_path(dir, page), 1 * slot + 1000, 8);      // a payload byte range
    scribble(slab_path(dir, page), 2 * slot + page + 20, 4);  // inside the key (the header follows the payload)
    {
        // A torn write: object 3's slot ends early (its tail and header never reached the disk).
        const int fd = ::open(slab_path(dir, page).c_str(), O_WRONLY);
        REQUIRE(fd >= 0);
        REQUIRE(::ftruncate(fd, static_cast<off_t>(3 * slot + 4096)) == 0);
        ::close(fd);
    }
    std::vector<std::vector<std::byte>> read;
    CHECK(get_all(store, keys, page, read) ==
          std::vector<PageResult>{PageResult::hit, PageResult::miss, PageResult::miss, PageResult::miss});
    CHECK(read[0] == payloads[0]);
    CHECK(store.stats().corrupt == 3);
    CHECK(store.objects() == 1);
    CHECK(wait_for(store, store.exists(keys)) ==
          std::vector<PageResult>{PageResult::hit, PageResult::miss, PageResult::miss, PageResult::miss});
    CHECK(store.verify().empty());
    // Stored again, they are served again.
    CHECK(put_all(store, keys, payloads) == std::vector<PageResult>(4, PageResult::hit));
    CHECK(get_all(store, keys, page, read) == std::vector<PageResult>(4, PageResult::hit));
    CHECK(read == payloads);
}

TEST_CASE("FileStorage stays within its capacity, evicting the least recently used, never an object being read") {
    TempDir dir;
    const std::uint64_t slot = FileStorage::slot_bytes(page);
    FileStorage store({.directory = dir.path(), .capacity_bytes = 4 * slot});
    const auto keys = test_keys(200, 6);
    const auto payloads = marked_payloads(200, 6, page);
    REQUIRE(put_all(store, std::span<const ObjectKey>(keys).first(4), payloads) == std::vector<PageResult>(4, PageResult::hit));
    std::vector<std::vector<std::byte>> read;
    REQUIRE(get_all(store, std::span<const ObjectKey>(keys).first(1), page, read) == std::vector<PageResult>{PageResult::hit});
    // Object 0 was read last: objects 1 and 2 go for 4 and 5.
    const std::vector<std::vector<std::byte>> last(payloads.begin() + 4, payloads.end());
    CHECK(put_all(store, std::span<const ObjectKey>(keys).subspan(4), last) == std::vector<PageResult>(2, PageResult::hit));
    CHECK(store.used_bytes() == 4 * slot);
    CHECK(store.stats().evicted == 2);
    CHECK(get_all(store, keys, page, read) ==
          std::vector<PageResult>{PageResult::hit, PageResult::miss, PageResult::miss, PageResult::hit, PageResult::hit, PageResult::hit});
    for (std::size_t i : {0, 3, 4, 5}) CHECK(read[i] == payloads[i]);
    CHECK(store.verify().empty());

    // Objects of another size take the room of the least recent ones, whose bytes go back to the disk.
    const auto big_keys = test_keys(300, 1);
    const auto big = marked_payloads(300, 1, 2 * page);
    CHECK(put_all(store, big_keys, big) == std::vector<PageResult>{PageResult::hit});
    CHECK(store.used_bytes() <= 4 * slot);
    struct stat st {};
    REQUIRE(::stat(slab_path(dir, page).c_str(), &st) == 0);
    CHECK(static_cast<std::uint64_t>(st.st_blocks) * 512 <= 4 * slot);
    CHECK(get_all(store, big_keys, 2 * page, read) == std::vector<PageResult>{PageResult::hit});
    CHECK(read[0] == big[0]);

    // Every object pinned by a read in flight: a put that needs room is declined, the read served intact.
    FileStorage tiny({.directory = dir.path() + "/tiny", .capacity_bytes = slot});
    REQUIRE(put_all(tiny, std::span<const ObjectKey>(keys).first(1), payloads) == std::vector<PageResult>{PageResult::hit});
    std::vector<std::byte> buffer(page);
    const unikv::ObjectRead r[1] = {{keys[0], ObjectKind::full, buffer}};
    const auto reading = tiny.get(r);
    const std::vector<std::vector<std::byte>> other(payloads.begin() + 1, payloads.begin() + 2);
    std::map<std::uint64_t, std::vector<PageResult>> others;
    const auto declined = [&] {
        const unikv::ObjectWrite w[1] = {{keys[1], ObjectKind::full, other[0]}};
        return wait_for(tiny, tiny.put(w), &others);
    }();
    CHECK(declined == std::vector<PageResult>{PageResult::miss});
    const auto served = others.count(reading.value) ? others[reading.value] : wait_for(tiny, reading);
    CHECK(served == std::vector<PageResult>{PageResult::hit});
    CHECK(buffer == payloads[0]);
    CHECK(tiny.verify().empty());
}

TEST_CASE("a full disk makes FileStorage puts errors that leave nothing behind, and the store keeps serving") {
    TempDir dir;
    FileStorage store({.directory = dir.path(), .capacity_bytes = 64ull << 20});
    const auto keys = test_keys(400, 6);
    const auto payloads = marked_payloads(400, 6, page);
    REQUIRE(put_all(store, std::span<const ObjectKey>(keys).first(2), payloads) == std::vector<PageResult>(2, PageResult::hit));
    // The file-size limit stands in for a full disk: a write past it fails (EFBIG) like one past the disk's end
    // (ENOSPC). SIGXFSZ is ignored so the failure is an error code.
    const auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
    rlimit old_limit{};
    REQUIRE(::getrlimit(RLIMIT_FSIZE, &old_limit) == 0);
    rlimit limit = old_limit;
    limit.rlim_cur = 2 * FileStorage::slot_bytes(page);
    REQUIRE(::setrlimit(RLIMIT_FSIZE, &limit) == 0);
    const std::vector<std::vector<std::byte>> rest(payloads.begin() + 2, payloads.end());
    const auto full = put_all(store, std::span<const ObjectKey>(keys).subspan(2), rest);
    REQUIRE(::setrlimit(RLIMIT_FSIZE, &old_limit) == 0);
    std::signal(SIGXFSZ, old_handler);
    CHECK(full == std::vector<PageResult>(4, PageResult::error));
    CHECK(store.objects() == 2);
    CHECK(store.verify().empty());
    std::vector<std::vector<std::byte>> read;
    CHECK(get_all(store, keys, page, read) ==
          std::vector<PageResult>{PageResult::hit, PageResult::hit, PageResult::miss, PageResult::miss, PageResult::miss, PageResult::miss});
    CHECK(read[0] == payloads[0]);
    CHECK(read[1] == payloads[1]);
    // With room again, the same objects are stored.
    CHECK(put_all(store, std::span<const ObjectKey>(keys).subspan(2), rest) == std::vector<PageResult>(4, PageResult::hit));
    CHECK(get_all(store, keys, page, read) == std::vector<PageResult>(6, PageResult::hit));
    CHECK(read == payloads);
}

TEST_CASE("a FileStorage whose directory cannot be made answers every object with an error") {
    TempDir dir;
    {
        std::ofstream file(dir.path() + "/not-a-directory");
        file << "x";
    }
    FileStorage store({.directory = dir.path() + "/not-a-directory/store", .capacity_bytes = 1 << 20});
    CHECK(store.status().find("cannot make") != std::string::npos);
    const auto keys = test_keys(500, 2);
    const auto payloads = marked_payloads(500, 2, page);
    CHECK(put_all(store, keys, payloads) == std::vector<PageResult>(2, PageResult::error));
    CHECK(wait_for(store, store.exists(keys)) == std::vector<PageResult>(2, PageResult::error));
    std::vector<std::vector<std::byte>> read;
    CHECK(get_all(store, keys, page, read) == std::vector<PageResult>(2, PageResult::error));
    CHECK(store.stats().errors == 6);
    CHECK_THROWS_AS(FileStorage({.directory = "", .capacity_bytes = 1}), unikv::logic_error);
    CHECK_THROWS_AS(FileStorage({.directory = dir.path(), .capacity_bytes = 0}), unikv::logic_error);
}

TEST_CASE("AnyStorage holding a FileStorage keeps the contract and hands the store back by type") {
    TempDir dir;
    unikv::AnyStorage any(FileStorage({.directory = dir.path(), .capacity_bytes = 64ull << 20}));
    REQUIRE(any.get_if<FileStorage>() != nullptr);
    CHECK(any.get_if<FileStorage>()->status().empty());
    check_store_contract(any, 5000);
    CHECK(any.get_if<FileStorage>()->verify().empty());
    unikv::AnyStorage empty;
    CHECK_FALSE(static_cast<bool>(empty));
    CHECK(empty.in_flight() == 0);
    CHECK_THROWS_AS((void)empty.poll(), unikv::logic_error);
}

// Keys and the stored form of page objects: a key names its whole prefix in one store namespace, each kind at a
// page has its own key, and every way an object read back can be wrong is told apart from a good one.

#include <doctest/doctest.h>

#include <vector>

#include <unikv/storage/page_object.hpp>

#include "store_support.hpp"

using namespace unikv;

TEST_CASE("a page key names its whole prefix, in its store namespace and key namespace") {
    const StoreNamespace gemma{.model = "gemma-3-27b", .layout = "swa+full", .page_tokens = 4, .swa_window = 8,
                               .page_bytes = {1024, 512, 0}};
    StoreNamespace rank1 = gemma;
    rank1.tp_rank = 1;
    StoreNamespace other_pages = gemma;
    other_pages.page_bytes[Component::swa] = 256;
    CHECK(gemma.digest() == StoreNamespace(gemma).digest());
    CHECK(gemma.digest() != rank1.digest());
    CHECK(gemma.digest() != other_pages.digest());

    const std::vector<TokenId> a{1, 2, 3, 4, 5, 6, 7, 8, 9};
    const std::vector<TokenId> b{1, 2, 3, 4, 5, 6, 7, 9, 9};  // differs in page 2 only
    const ObjectKey root = PageKeyChain::root(gemma.digest(), {});
    ObjectKey ka[3]{}, kb[3]{};
    CHECK(PageKeyChain::keys(root, a, 4, ka) == 2);  // the partial tail page is no page
    CHECK(PageKeyChain::keys(root, b, 4, kb) == 2);
    CHECK(ka[0] == kb[0]);
    CHECK(ka[1] != kb[1]);
    CHECK(ka[1] == PageKeyChain::next(ka[0], std::span<const TokenId>(a).subspan(4, 4)));
    // The same page of tokens after another prefix is another key.
    CHECK(PageKeyChain::next(root, std::span<const TokenId>(a).subspan(4, 4)) != ka[1]);
    CHECK(PageKeyChain::root(gemma.digest(), {.value = 7}) != root);
    CHECK(PageKeyChain::root(rank1.digest(), {}) != root);
    // Each kind at a page has its own key; FULL's is the page's.
    CHECK(object_key(ka[1], ObjectKind::full) == ka[1]);
    CHECK(object_key(ka[1], ObjectKind::swa) != ka[1]);
    CHECK(object_key(ka[1], ObjectKind::swa) != object_key(ka[1], ObjectKind::mamba));
}

TEST_CASE("a stored object read back is checked for magic, version, its own checksum, key, kind, size and payload") {
    const auto payload = test::marked_payload(3, 4096);
    const ObjectKey key = test::test_key(3);
    const ObjectHeader h = make_header(key, ObjectKind::swa, payload);
    std::byte stored[object_header_bytes];
    store_header(h, stored);
    const ObjectHeader back = load_header(stored);
    CHECK(check_header(back, key, ObjectKind::swa, payload.size()) == ObjectCheck::good);
    CHECK(check_payload(back, payload) == ObjectCheck::good);
    CHECK(check_header(back, test::test_key(4), ObjectKind::swa, payload.size()) == ObjectCheck::other_key);
    CHECK(check_header(back, key, ObjectKind::full, payload.size()) == ObjectCheck::other_key);
    CHECK(check_header(back, key, ObjectKind::swa, payload.size() - 8) == ObjectCheck::size);
    auto bent = payload;
    bent[100] ^= std::byte{1};
    CHECK(check_payload(back, bent) == ObjectCheck::torn_payload);
    ObjectHeader torn = back;
    torn.payload_bytes += 1;
    CHECK(check_header(torn, key, ObjectKind::swa, payload.size()) == ObjectCheck::torn_header);
    ObjectHeader newer = back;
    newer.version = ObjectHeader::current_version + 1;
    CHECK(check_header(newer, key, ObjectKind::swa, payload.size()) == ObjectCheck::version);
    const std::byte zeros[object_header_bytes]{};
    CHECK(check_header(load_header(zeros), key, ObjectKind::swa, payload.size()) == ObjectCheck::not_an_object);
}

// The executor's hand-back: backups and host frees come back to the caller as `HostActions`, the device frees
// after a backup wait until `complete` (a backup reads its rows before they are freed), and a `HostActions`
// dropped before `complete` is reported like an unexecuted action list. Write-throughs come back too, without
// holding the device actions (their rows stay). A misuse met while a list drains reaches the caller.

#include <atomic>
#include <span>
#include <string>
#include <vector>

#include "cache_support.hpp"

using namespace cache_test;

namespace {

std::atomic<int> reports{0};
void count_report(Dropped) noexcept { reports.fetch_add(1); }

using L = SwaFullLayout;

struct Scene {
    HostBackend backend{{.mode = ExecutionMode::manual}};
    HostBackend::Stream stream = backend.make_stream();
    Stack<L> s{backend, stream, 64};
    Rows<Stack<L>::Alloc> rows{&s.alloc};
    std::vector<TokenId> key;
    std::vector<VirtualPage> pages;

    // Caches a 3-page key whose rows carry their markers.
    Scene() {
        for (std::int32_t pos = 0; pos < 3 * page_size; ++pos) key.push_back(100 + pos);
        pages.resize(3);
        REQUIRE(s.alloc.alloc(pages));
        REQUIRE(drain(backend, stream));
        for (std::int32_t k = 0; k < 3; ++k) {
            rows.write_page(Component::full, pages[static_cast<std::size_t>(k)], key, k * page_size);
            rows.write_page(Component::swa, pages[static_cast<std::size_t>(k)], key, k * page_size);
        }
        InsertResult ins = s.tree.insert(TokenKey{key}, {.pages = pages});
        s.execute(ins);
    }
    [[nodiscard]] bool rows_hold() const {
        for (std::int32_t k = 0; k < 3; ++k) {
            if (!rows.page_holds(Component::full, pages[static_cast<std::size_t>(k)], key, k * page_size)) return false;
        }
        return true;
    }
};

}  // namespace

TEST_CASE("backups come back to the caller and the frees after them wait for complete") {
    Scene sc;
    EvictResult ev = sc.s.tree.evict(Component::full, 3 * page_size, {.write_back = EvictBackups::on});
    HostActions host = sc.s.exec.execute(sc.s.alloc, ev);
    REQUIRE_FALSE(host.empty());
    std::size_t backups = 0;
    for (const TreeAction& a : host.actions()) {
        REQUIRE(a.kind == ActionKind::backup);
        ++backups;
    }
    CHECK(backups >= 1);
    // The frees wait: the rows are still there for the copies.
    CHECK(sc.s.alloc.live_pages(Component::full) == 3);
    CHECK(sc.rows_hold());
    CHECK(sc.s.exec.executed(ActionKind::free_pages) == 0);
    // Report each copy (here: no host room, so the node goes), then complete.
    for (const TreeAction& a : host.actions()) {
        EvictResult done = sc.s.tree.finish_backup(a.node, a.component, {});
        sc.s.execute(done);
    }
    sc.s.exec.complete(sc.s.alloc, std::move(host));
    CHECK(sc.s.exec.executed(ActionKind::free_pages) >= 1);
    CHECK(sc.s.alloc.live_pages(Component::full) == 0);
    CHECK(sc.s.alloc.live_pages(Component::swa) == 0);
    CHECK(broken(sc.s.tree).empty());
    CHECK(broken(sc.s.alloc).empty());
}

TEST_CASE("host frees come back to the caller; the device actions beside them run at once") {
    Scene sc;
    const std::vector<HostPage> full_host{HostPage{5}, HostPage{6}, HostPage{7}};
    const std::vector<HostPage> swa_host{HostPage{8}, HostPage{9}, HostPage{10}};
    NodeRef node = sc.s.tree.match_prefix(TokenKey{sc.key}).device_node;
    sc.s.tree.set_host(node, Component::full, full_host);
    sc.s.tree.set_host(node, Component::swa, swa_host);
    EvictResult dev = sc.s.tree.evict(Component::full, 3 * page_size);  // device copies go, host copies stay
    sc.s.execute(dev);
    CHECK(sc.s.alloc.live_pages(Component::full) == 0);
    CHECK(sc.s.alloc.live_pages(Component::swa) == 0);
    EvictResult ev = sc.s.tree.evict_host(Component::full, 3 * page_size);
    HostActions host = sc.s.exec.execute(sc.s.alloc, ev);
    REQUIRE_FALSE(host.empty());
    std::vector<HostPage> freed_full;
    std::vector<HostPage> freed_swa;
    for (const TreeAction& a : host.actions()) {
        REQUIRE(a.kind == ActionKind::free_host);
        const auto pages = host.host_pages(a);
        (a.component == Component::full ? freed_full : freed_swa).insert(
            (a.component == Component::full ? freed_full : freed_swa).end(), pages.begin(), pages.end());
    }
    CHECK(freed_full == full_host);
    CHECK(freed_swa == swa_host);
    sc.s.exec.complete(sc.s.alloc, std::move(host));
    CHECK(sc.s.tree.node_count() == 0);
    CHECK(broken(sc.s.tree).empty());
    CHECK(broken(sc.s.alloc).empty());
}

TEST_CASE("write-throughs come back to the caller; the device actions of their list run at once") {
    Scene sc;
    // A write-through tree over the same rows: the second insert reaches the threshold and brings a duplicate page.
    Stack<L>::Tree tree(TreeConfig{.page_size = {page_size}, .swa_window = window, .write_through_threshold = 2});
    InsertResult first = tree.insert(TokenKey{sc.key}, {.pages = sc.pages});
    CHECK(first.actions.empty());
    std::vector<VirtualPage> extra(1);
    REQUIRE(sc.s.alloc.alloc(extra));
    REQUIRE(drain(sc.backend, sc.stream));
    const std::vector<VirtualPage> again{sc.pages[0], sc.pages[1], extra[0]};
    InsertResult second = tree.insert(TokenKey{sc.key}, {.pages = again});
    HostActions host = sc.s.exec.execute(sc.s.alloc, second);
    CHECK(sc.s.alloc.live_pages(Component::full) == 3);  // the duplicate went at once
    CHECK(sc.s.exec.executed(ActionKind::free_pages) == 1);
    REQUIRE(host.actions().size() == 2);
    CHECK(sc.s.exec.executed(ActionKind::write_through) == 2);
    std::uint32_t next = 20;
    for (const TreeAction& a : host.actions()) {
        REQUIRE(a.kind == ActionKind::write_through);
        const auto rows = host.pages(a);
        CHECK(std::vector<VirtualPage>(rows.begin(), rows.end()) == sc.pages);  // the node's own rows, kept
        std::vector<HostPage> copy;
        for (std::size_t i = 0; i < rows.size(); ++i) copy.emplace_back(static_cast<std::int32_t>(next++));
        tree.set_host(a.node, a.component, copy);  // committed when queued
    }
    CHECK(sc.rows_hold());
    sc.s.exec.complete(sc.s.alloc, std::move(host));
    CHECK(sc.s.alloc.live_pages(Component::full) == 3);
    CHECK(tree.host_size(Component::full) == 3 * page_size);
    CHECK(broken(tree).empty());
    CHECK(broken(sc.s.alloc).empty());
}

TEST_CASE("a HostActions dropped before complete is reported") {
    const DroppedHandler previous = set_dropped_handler(&count_report);
    reports = 0;
    {
        Scene sc;
        EvictResult ev = sc.s.tree.evict(Component::full, 3 * page_size, {.write_back = EvictBackups::on});
        HostActions host = sc.s.exec.execute(sc.s.alloc, ev);
        REQUIRE_FALSE(host.empty());
        HostActions moved = std::move(host);  // a move hands the duty on: only one report
        CHECK(host.empty());
        CHECK(reports == 0);
    }
    CHECK(reports == 1);
    {
        Scene sc;  // an executed list with nothing for the host is marked executed at once: no report
        EvictResult ev = sc.s.tree.evict(Component::full, 3 * page_size);
        HostActions host = sc.s.exec.execute(sc.s.alloc, ev);
        CHECK(host.empty());
    }
    CHECK(reports == 1);
    (void)set_dropped_handler(previous);
}

TEST_CASE("a misuse found while an action list drains reaches the caller as that misuse, under the default handler") {
    // A bare allocator knows nothing of the tree, so the engine's free of a cached page goes through here (the
    // cache refuses it: `Holder`); the tree's eviction then meets a page that is no longer allocated. The list
    // it was executing unwinds with the exception: the default handler (aborting under assertions) lets the
    // misuse go on to the caller instead of ending the process with "an action list was dropped".
    const DroppedHandler previous = set_dropped_handler(&detail::default_dropped_handler);
    Scene sc;
    sc.s.alloc.free(std::span(sc.pages).first(1));
    const auto evict_all = [&] {
        EvictResult ev = sc.s.tree.evict(Component::full, 3 * page_size);
        sc.s.execute(ev);
    };
    const std::string lost = "virtual page " + std::to_string(sc.pages[0].value()) + " is not allocated";
    CHECK_THROWS_WITH_AS(evict_all(), doctest::Contains(lost.c_str()), logic_error);
    (void)set_dropped_handler(previous);
}

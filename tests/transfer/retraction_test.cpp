// Retraction into the host pool (`retract`, `restore`): a preempted request's own FULL rows and SWA window go
// to host and come back into fresh pages byte-exact, while the shared prefix the tree owns never moves and the
// tree's locks and sizes come back to what they were. Every check reads row markers, on host through a lease
// and on device through translation; the host-pool policy is a template parameter (both policies run).

#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <vector>

#include <unikv/host/page_envelope_host.hpp>
#include <unikv/transfer/retraction.hpp>
#include <unikv/tree/radix_tree.hpp>

#include "drop_counter.hpp"
#include "transfer_support.hpp"

using namespace transfer_test;

namespace {

constexpr std::int32_t page = 4;
constexpr std::int32_t window = 2 * page;  // layered_config's W

// An allocator, host pools of policy `P`, a controller and the real tree over layout `L`.
template <class L, class P>
struct Retractable : Fixture<L> {
    using Alloc = typename Fixture<L>::Alloc;
    using HostPools = typename P::template impl<HostBackend, L>;
    using Tree = std::conditional_t<Alloc::has_swa, RadixTree<Full, Swa>, RadixTree<Full>>;

    explicit Retractable(std::int32_t host_pages)
        : Fixture<L>(layered_config(64 * 1024, 2, page)),
          host(this->backend, this->alloc.spec(), config(this->alloc.spec(), host_pages), this->stream),
          ctl(this->backend),
          tree(TreeConfig{.page_size = {page}, .swa_window = Alloc::has_swa ? window : 0}) {}

    HostPools host;
    TransferController<HostBackend, HostPools, std::uint64_t> ctl;
    Tree tree;

    static HostConfig config(const ArenaSpec& spec, std::int32_t pages) {
        HostConfig c;
        for (Component x : all_components) c.pages[x] = spec[x].present ? pages : 0;
        return c;
    }
    [[nodiscard]] std::int32_t host_used() const {
        std::int32_t n = host.used(Component::full);
        if constexpr (Alloc::has_swa) n += host.used(Component::swa);
        return n;
    }
    // Host page `h` of `c` holds the markers of device page `id`, `version`.
    bool host_holds(Component c, HostPage h, std::int32_t id, std::uint32_t version) {
        auto lease = host.lease();
        std::int32_t physical = -1;
        lease.physical(c, std::span(&h, 1), std::span(&physical, 1));
        const std::size_t entry = this->entry_bytes(c);
        for (std::int32_t r = 0; r < page; ++r) {
            const std::byte* row = lease.region(c).data + static_cast<std::size_t>(physical) * host.page_bytes(c) +
                                   static_cast<std::size_t>(r) * entry;
            if (uniform_word(row, entry) != marker(c, id, r, version)) return false;
        }
        return true;
    }
    // The device rows of `fresh[i]` hold the markers of `old[i]`, `version`: where a restore put them.
    bool device_holds(Component c, std::span<const VirtualPage> fresh, std::span<const VirtualPage> old,
                      std::uint32_t version) const {
        for (std::size_t i = 0; i < fresh.size(); ++i) {
            for (std::int32_t r = 0; r < page; ++r) {
                const std::int32_t row = this->physical_row(c, fresh[i].value() * page + r);
                if (this->read_physical_row(c, row) != marker(c, old[i].value(), r, version)) return false;
            }
        }
        return true;
    }
    // Host-only tree data of `pages` pages per component, on host pages taken from `host`.
    NodeRef hosted_node(std::int32_t pages, TokenId first_token) {
        std::vector<VirtualPage> device = this->alloc_kv(pages);
        std::vector<TokenId> key;
        for (std::int32_t t = 0; t < pages * page; ++t) key.push_back(first_token + t);
        InsertResult ins = tree.insert(TokenKey{key}, {.pages = device});
        ins.actions.mark_executed();
        for (Component c : all_components) {
            if (this->alloc.spec()[c].present && c != Component::mamba) {
                std::vector<HostPage> h = host_pages(c, static_cast<std::size_t>(pages));
                tree.set_host(ins.node, c, h);
            }
        }
        EvictResult ev = tree.evict(Component::full, pages * page);
        REQUIRE(ev.freed(Component::full) == pages * page);
        ev.actions.mark_executed();
        this->alloc.free(device);
        return ins.node;
    }
    std::vector<HostPage> host_pages(Component c, std::size_t n) {
        std::vector<HostPage> out(n);
        const HostRequest request{.component = c, .out = out};
        REQUIRE(static_cast<bool>(host.alloc(std::span(&request, 1))));
        return out;
    }
    // The caller's relief: the tree drops host data and its pages go back to the pool; true when some went.
    auto evictor(int& calls) {
        return [this, &calls](const HostAllocResult& r) {
            ++calls;
            EvictResult ev = tree.evict_host(r.missing.component, r.missing.count * page);
            for (const TreeAction& a : ev.actions.list()) {
                if (a.kind == ActionKind::free_host) host.free(a.component, ev.actions.host_pages(a));
            }
            ev.actions.mark_executed();
            return ev.host_freed_of(r.missing.component) > 0;
        };
    }
};

auto no_eviction = [](const HostAllocResult&) {
    FAIL("no host eviction expected");
    return false;
};

std::vector<TokenId> tokens(std::int32_t n, TokenId first) {
    std::vector<TokenId> out;
    for (std::int32_t t = 0; t < n; ++t) out.push_back(first + t);
    return out;
}

}  // namespace

TEST_CASE_TEMPLATE("retract and restore carry the own rows and the window, and keep the shared prefix",  // §9.3-25
                   P, SeparateHostPools, PageEnvelopeHost<>) {
    Retractable<SwaFullLayout, P> r(32);
    // A 2-page prefix in the tree, locked by two requests.
    const std::vector<VirtualPage> prefix = r.alloc_kv(2);
    InsertResult ins = r.tree.insert(TokenKey{tokens(2 * page, 1000)}, {.pages = prefix});
    ins.actions.mark_executed();
    const NodeRef shared = ins.node;
    LockReceipt a_lock = r.tree.lock(shared);
    LockReceipt b_lock = r.tree.lock(shared);
    // Request A: n = 22 tokens, own pages 2..5 (4 pages), window [14, 22): own pages 1..3. Its first own page
    // slid out of the window and dropped its SWA rows (a tombstone the retraction must not touch).
    const std::vector<VirtualPage> a_own = r.alloc_kv(4, 1);
    r.alloc.free_swa(std::span(a_own).first(1));
    const std::vector<VirtualPage> b_own = r.alloc_kv(1, 3);  // the survivor
    const RetractionRequest a{.own = a_own, .prefix_tokens = 2 * page, .seq_len = 22, .window_tokens = window};

    const NodeInfo node_before = r.tree.node_info(shared);
    const std::int64_t protected_full = r.tree.protected_size(Component::full);
    const std::int64_t protected_swa = r.tree.protected_size(Component::swa);
    const std::int32_t host_start = r.host_used();

    RetractionBackup backup = retract(r.alloc, r.host, r.ctl, a, no_eviction);
    REQUIRE(backup);
    CHECK(backup.full_pages() == 4);
    CHECK(backup.window_first() == 1);
    CHECK(backup.window_pages() == 3);
    CHECK(r.host_used() == host_start + 7);
    CHECK_FALSE(r.ctl.has_inflight());  // synchronized and acknowledged
    for (std::size_t i = 0; i < 4; ++i) CHECK(r.host_holds(Component::full, backup.host(Component::full)[i], a_own[i].value(), 1));
    for (std::size_t i = 0; i < 3; ++i) CHECK(r.host_holds(Component::swa, backup.host(Component::swa)[i], a_own[i + 1].value(), 1));

    // The caller releases A: its own rows, then its lock on the prefix. Others take the rows and write them.
    const std::vector<PhysicalPage> a_rows = r.physical_pages(Component::full, a_own);
    r.alloc.free(a_own);
    r.tree.unlock(std::move(a_lock));
    CHECK(r.tree.node_info(shared).device_locks[Component::full] == node_before.device_locks[Component::full] - 1);
    const std::vector<VirtualPage> others = r.alloc_kv(6, 2);
    REQUIRE(r.drain());
    CHECK(r.kv_holds(prefix));
    CHECK(r.kv_holds(b_own, 3));
    CHECK(r.kv_holds(others, 2));
    bool overwritten = false;
    for (PhysicalPage p : r.physical_pages(Component::full, others)) {
        overwritten = overwritten || std::find(a_rows.begin(), a_rows.end(), p) != a_rows.end();
    }
    CHECK(overwritten);

    // Restore into fresh pages (A re-matched the prefix and locks it again).
    std::vector<VirtualPage> fresh(4);
    REQUIRE(r.alloc.alloc(fresh));
    REQUIRE(r.drain());
    r.write_kv(fresh, 6);  // so a restore that copied nothing reads back wrong
    a_lock = r.tree.lock(shared);
    const RetractionRequest again{.own = fresh, .prefix_tokens = 2 * page, .seq_len = 22, .window_tokens = window};
    REQUIRE(restore(r.alloc, r.host, r.ctl, backup, again));
    CHECK_FALSE(backup);
    CHECK(r.device_holds(Component::full, fresh, a_own, 1));
    CHECK(r.device_holds(Component::swa, std::span(fresh).subspan(1), std::span(a_own).subspan(1), 1));
    CHECK(r.host_used() == host_start);
    CHECK(r.kv_holds(prefix));
    CHECK(r.kv_holds(b_own, 3));
    CHECK(r.kv_holds(others, 2));
    const NodeInfo node_after = r.tree.node_info(shared);
    CHECK(node_after.pages == node_before.pages);
    CHECK(node_after.device_locks[Component::full] == node_before.device_locks[Component::full]);
    CHECK(node_after.device_locks[Component::swa] == node_before.device_locks[Component::swa]);
    CHECK(r.tree.protected_size(Component::full) == protected_full);
    CHECK(r.tree.protected_size(Component::swa) == protected_swa);
    CHECK(r.tree.verify().empty());
    CHECK(r.broken().empty());
    CHECK(r.host.verify().empty());
    r.tree.unlock(std::move(a_lock));
    r.tree.unlock(std::move(b_lock));
}

TEST_CASE_TEMPLATE("a retraction short of host pages evicts the tree's host data and retries while that frees some", P,
                   SeparateHostPools, PageEnvelopeHost<>) {
    Retractable<SwaFullLayout, P> r(5);
    // Host data of the tree fills most of the host: 3 pages per component.
    const NodeRef cold = r.hosted_node(3, 5000);
    const std::vector<VirtualPage> own = r.alloc_kv(3, 1);
    const RetractionRequest q{.own = own, .prefix_tokens = 0, .seq_len = 3 * page, .window_tokens = window};
    int calls = 0;
    RetractionBackup backup = retract(r.alloc, r.host, r.ctl, q, r.evictor(calls));
    REQUIRE(backup);
    CHECK(calls == 1);
    CHECK_FALSE(r.tree.contains(cold));  // its host pages made the room
    for (std::size_t i = 0; i < 3; ++i) CHECK(r.host_holds(Component::full, backup.host(Component::full)[i], own[i].value(), 1));
    backup.discard(r.host);
    CHECK(r.host_used() == 0);
    CHECK(r.kv_holds(own, 1));
}

TEST_CASE_TEMPLATE("a retraction that stays short of host pages, or whose copy fails, loses nothing", P,
                   SeparateHostPools, PageEnvelopeHost<>) {
    Retractable<SwaFullLayout, P> r(4);
    const std::vector<VirtualPage> own = r.alloc_kv(3, 1);
    const RetractionRequest q{.own = own, .prefix_tokens = 0, .seq_len = 3 * page, .window_tokens = window};
    const std::vector<HostPage> held = r.host_pages(Component::full, 4);  // not the tree's: no eviction helps
    int calls = 0;
    RetractionBackup backup = retract(r.alloc, r.host, r.ctl, q, r.evictor(calls));
    CHECK_FALSE(backup);
    CHECK(backup.failure() == RetractionFailure::host_full);
    CHECK(backup.missing().count > 0);
    CHECK(calls == 1);
    CHECK(r.host_used() == 4);
    CHECK(r.kv_holds(own, 1));
    r.host.free(Component::full, held);

    // The copy fails: the host pages are freed, the rows untouched, and a later retraction succeeds.
    r.backend.inject_copy_failure(r.ctl.stream());
    RetractionBackup failed = retract(r.alloc, r.host, r.ctl, q, no_eviction);
    CHECK_FALSE(failed);
    CHECK(failed.failure() == RetractionFailure::copy_failed);
    CHECK(r.host_used() == 0);
    CHECK(r.kv_holds(own, 1));
    CHECK_FALSE(r.ctl.has_inflight());
    r.backend.clear_copy_failure(r.ctl.stream());
    RetractionBackup ok = retract(r.alloc, r.host, r.ctl, q, no_eviction);
    REQUIRE(ok);

    // A failed restore keeps the backup live; a retry into the same pages succeeds.
    std::vector<VirtualPage> fresh(3);
    REQUIRE(r.alloc.alloc(fresh));
    REQUIRE(r.drain());
    const RetractionRequest again{.own = fresh, .prefix_tokens = 0, .seq_len = 3 * page, .window_tokens = window};
    r.backend.inject_copy_failure(r.ctl.stream());
    CHECK_FALSE(restore(r.alloc, r.host, r.ctl, ok, again));
    CHECK(ok);
    CHECK(r.host_used() == 5);
    r.backend.clear_copy_failure(r.ctl.stream());
    REQUIRE(restore(r.alloc, r.host, r.ctl, ok, again));
    CHECK(r.device_holds(Component::full, fresh, own, 1));
    CHECK(r.device_holds(Component::swa, std::span(fresh).subspan(1), std::span(own).subspan(1), 1));
    CHECK(r.host_used() == 0);
    CHECK(r.broken().empty());
}

TEST_CASE("a FullLayout retraction backs up FULL rows only; restore checks the geometry first") {
    Retractable<FullLayout, SeparateHostPools> r(8);
    const std::vector<VirtualPage> own = r.alloc_kv(2, 1);
    const RetractionRequest q{.own = own, .prefix_tokens = page, .seq_len = 3 * page - 1};
    RetractionBackup backup = retract(r.alloc, r.host, r.ctl, q, no_eviction);
    REQUIRE(backup);
    CHECK(backup.window_pages() == 0);
    CHECK(r.host_used() == 2);
    r.alloc.free(own);

    std::vector<VirtualPage> fresh(3);
    REQUIRE(r.alloc.alloc(fresh));
    REQUIRE(r.drain());
    r.write_kv(fresh, 5);
    // One page too many: rejected before anything is queued, the backup and the rows untouched.
    const RetractionRequest wrong{.own = fresh, .prefix_tokens = 0, .seq_len = 3 * page - 1};
    CHECK_THROWS_AS(static_cast<void>(restore(r.alloc, r.host, r.ctl, backup, wrong)), logic_error);
    CHECK(backup);
    CHECK_FALSE(r.ctl.has_inflight());
    CHECK(r.kv_holds(fresh, 5));
    const RetractionRequest right{.own = std::span(fresh).first(2), .prefix_tokens = page, .seq_len = 3 * page - 1};
    REQUIRE(restore(r.alloc, r.host, r.ctl, backup, right));
    CHECK(r.device_holds(Component::full, std::span(fresh).first(2), own, 1));
    CHECK(r.kv_holds(std::span(fresh).subspan(2), 5));
    CHECK(r.host_used() == 0);
    CHECK(r.broken().empty());
}

TEST_CASE("retraction refuses an unmapped window row and a busy write lane; a dropped backup is reported") {
    Retractable<SwaFullLayout, SeparateHostPools> r(8);
    const std::vector<VirtualPage> own = r.alloc_kv(3, 1);
    const RetractionRequest q{.own = own, .prefix_tokens = 0, .seq_len = 3 * page, .window_tokens = window};
    r.alloc.free_swa(std::span(own).subspan(1, 1));  // inside the window [4, 12)
    CHECK_THROWS_AS(static_cast<void>(retract(r.alloc, r.host, r.ctl, q, no_eviction)), logic_error);
    CHECK(r.host_used() == 0);

    const std::vector<VirtualPage> other = r.alloc_kv(1, 2);
    const std::vector<HostPage> h = r.host_pages(Component::full, 1);
    r.ctl.queue_write(r.alloc, {.full = other, .full_host = h}, 9);
    const RetractionRequest last{.own = std::span(own).subspan(2), .prefix_tokens = 2 * page, .seq_len = 3 * page,
                                 .window_tokens = window};
    CHECK_THROWS_AS(static_cast<void>(retract(r.alloc, r.host, r.ctl, last, no_eviction)), logic_error);
    CHECK(r.ctl.queued(TransferDirection::write) == 1);  // the caller's write is left alone
    static_cast<void>(r.ctl.start_writing(r.alloc, r.host));
    REQUIRE(r.ctl.drain_writes().size() == 1);

    // A sequence the prefix covers has nothing of its own: an empty live backup, restored without a copy.
    const RetractionRequest none{.prefix_tokens = 3 * page, .seq_len = 3 * page, .window_tokens = window};
    RetractionBackup nothing = retract(r.alloc, r.host, r.ctl, none, no_eviction);
    REQUIRE(nothing);
    CHECK(nothing.full_pages() == 0);
    CHECK(restore(r.alloc, r.host, r.ctl, nothing, none));
    CHECK_FALSE(nothing);
    CHECK(r.host_used() == 1);

    const unikv::test::DropCounter drops;
    {
        RetractionBackup lost = retract(r.alloc, r.host, r.ctl, last, no_eviction);
        REQUIRE(lost);
    }
    CHECK(drops[Dropped::retraction_backup] == 1);
    CHECK(drops.total() == 1);
    CHECK(r.host_used() == 1 + 2);  // reported, not freed: the backup has no pool to free into
}

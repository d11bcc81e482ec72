// One reporter for every result that must be consumed (`unikv/dropped.hpp`): an unexecuted action list, a receipt
// still holding locks, a pending reservation, a live retraction backup and a load-back ticket still holding its
// allocations each reach the one handler once, with their kind; the reservation and the ticket leave the
// allocator as it was (the library cancels or rolls them back after the report).

#include <cstdint>
#include <span>
#include <vector>

#include <unikv/transfer/load_back.hpp>
#include <unikv/transfer/retraction.hpp>
#include <unikv/tree/radix_tree.hpp>

#include "drop_counter.hpp"
#include "transfer_support.hpp"

using namespace transfer_test;

namespace {

constexpr std::int32_t page_len = 4;  // (names unique in the transfer tests, built as one unit)

std::vector<TokenId> run_of(std::int32_t n, TokenId first) {
    std::vector<TokenId> out;
    for (std::int32_t t = 0; t < n; ++t) out.push_back(first + t);
    return out;
}

// What a dropped reservation or ticket must leave as it was.
struct PoolCounts {
    std::int32_t full, swa, reserved, pending;
    template <class A>
    static PoolCounts of(const A& a) {
        return {a.live_pages(Component::full), a.live_pages(Component::swa), a.reserved_pages(Component::swa),
                a.pending_load_pages(Component::swa)};
    }
    friend bool operator==(const PoolCounts&, const PoolCounts&) = default;
};

// The load-back plan of `key` (two pages) cached, backed up to host and evicted from device: a host-only node.
template <class R, class Tree>
std::span<const LoadBackStep> host_only_plan(R& r, Tree& tree, const std::vector<TokenId>& key) {
    const std::vector<VirtualPage> device = r.alloc_kv(2);
    InsertResult ins = tree.insert(TokenKey{key}, {.pages = device});
    ins.actions.mark_executed();
    for (Component c : {Component::full, Component::swa}) tree.set_host(ins.node, c, r.host_pages(c, 2));
    EvictResult evicted = tree.evict(Component::full, 2 * page_len);
    REQUIRE(evicted.freed(Component::full) == 2 * page_len);
    evicted.actions.mark_executed();
    r.alloc.free(device);
    const MatchResult match = tree.match_prefix(TokenKey{key}, {.host_hits = HostHits::include});
    REQUIRE(match.device_length == 0);
    return tree.load_back_plan(match.best_node);
}

}  // namespace

TEST_CASE("each result that must be consumed and is dropped is reported once, by its kind, through the one handler") {
    Rig<SwaFullLayout> r(layered_config(envelopes * 512, 2, page_len));
    RadixTree<Full, Swa> tree(TreeConfig{.page_size = {page_len}, .swa_window = 2 * page_len});
    const unikv::test::DropCounter drops;
    const std::uint64_t reported_before = dropped_count();

    // An action list dropped unexecuted: a second insert of a cached key hands back its duplicate pages.
    const std::vector<TokenId> key = run_of(2 * page_len, 100);
    const std::vector<VirtualPage> cached = r.alloc_kv(2);
    InsertResult first = tree.insert(TokenKey{key}, {.pages = cached});
    first.actions.mark_executed();
    const std::vector<VirtualPage> duplicate = r.alloc_kv(2);
    {
        InsertResult again = tree.insert(TokenKey{key}, {.pages = duplicate});
        REQUIRE_FALSE(again.actions.empty());
    }
    CHECK(drops[Dropped::actions] == 1);
    r.alloc.free(duplicate);  // what the dropped list would have freed

    // A receipt dropped while holding its lock (the node stays locked: nothing can release it now).
    { LockReceipt lock = tree.lock(first.node); }
    CHECK(drops[Dropped::receipt] == 1);

    // A live retraction backup dropped without restore or discard: its host pages stay allocated.
    const std::vector<VirtualPage> own = r.alloc_kv(2, 1);
    const RetractionRequest request{
        .own = own, .prefix_tokens = 0, .seq_len = 2 * page_len, .window_tokens = 2 * page_len};
    const std::int32_t host_used = r.host.used(Component::full);
    {
        RetractionBackup backup =
            retract(r.alloc, r.host, r.ctl, request, [](const HostAllocResult&) { return false; });
        REQUIRE(backup);
    }
    CHECK(drops[Dropped::retraction_backup] == 1);
    CHECK(r.host.used(Component::full) == host_used + 2);

    // A pending reservation, bound under tombstoned FULL pages, dropped: cancelled once reported.
    const std::vector<VirtualPage> target = r.alloc_kv(2);
    r.alloc.free_swa(target);
    const PoolCounts before_reservation = PoolCounts::of(r.alloc);
    {
        ReserveResult reserved = r.alloc.alloc_physical(Component::swa, 2);
        REQUIRE(reserved);
        r.alloc.bind_swa(target, reserved.reservation);
        CHECK(r.alloc.moves_blocked());
    }
    CHECK(drops[Dropped::reservation] == 1);
    CHECK(r.alloc.unconsumed_reservations() == 1);
    CHECK(PoolCounts::of(r.alloc) == before_reservation);
    CHECK_FALSE(r.alloc.moves_blocked());
    CHECK(r.physical_row(Component::swa, target[0].value() * page_len) == 0);  // the tombstone is back
    CHECK(r.broken().empty());

    // A load-back ticket of a host-only node, dropped while holding its allocations: rolled back once reported.
    const std::span<const LoadBackStep> plan = host_only_plan(r, tree, run_of(2 * page_len, 500));
    REQUIRE_FALSE(plan.empty());
    const PoolCounts before_ticket = PoolCounts::of(r.alloc);
    {
        LoadBackTicket ticket = prepare_load_back(r.alloc, plan, [](const auto&) { return false; });
        REQUIRE(ticket);
        CHECK(r.alloc.live_pages(Component::full) == before_ticket.full + 2);
        CHECK(r.alloc.moves_blocked(Component::swa));
    }
    CHECK(drops[Dropped::load_ticket] == 1);
    CHECK(PoolCounts::of(r.alloc) == before_ticket);
    CHECK_FALSE(r.alloc.moves_blocked());
    CHECK(r.alloc.unconsumed_reservations() == 1);  // the ticket's reservation was cancelled, not dropped
    CHECK(r.broken().empty());

    CHECK(drops.total() == 5);
    CHECK(dropped_count() == reported_before + 5);
}

TEST_CASE("a consumed result reports nothing: a ticket rolled back or committed, a failed ticket, a backup discarded") {
    Rig<SwaFullLayout> r(layered_config(envelopes * 512, 2, page_len));
    RadixTree<Full, Swa> tree(TreeConfig{.page_size = {page_len}, .swa_window = 2 * page_len});
    const unikv::test::DropCounter drops;

    const std::span<const LoadBackStep> plan = host_only_plan(r, tree, run_of(2 * page_len, 900));
    REQUIRE_FALSE(plan.empty());
    const PoolCounts before = PoolCounts::of(r.alloc);
    {
        LoadBackTicket ticket = prepare_load_back(r.alloc, plan, [](const auto&) { return false; });
        REQUIRE(ticket);
        ticket.rollback();
        CHECK(PoolCounts::of(r.alloc) == before);
        ticket.rollback();  // a second rollback holds nothing to give back
    }
    {
        LoadBackTicket ticket = prepare_load_back(r.alloc, plan, [](const auto&) { return false; });
        REQUIRE(ticket);
        LoadBackDestinations d = ticket.commit();
        r.alloc.cancel(std::move(d.swa));  // (the transfer queue would submit it; here: undo by hand)
        r.alloc.free(d.full);
    }
    {
        std::vector<VirtualPage> filler(static_cast<std::size_t>(r.alloc.available_size()));
        REQUIRE(r.alloc.alloc(filler));
        LoadBackTicket failed = prepare_load_back(r.alloc, plan, [](const auto&) { return false; });
        CHECK_FALSE(failed);  // holds nothing: consumed
        r.alloc.free(filler);
    }
    CHECK(PoolCounts::of(r.alloc) == before);

    const std::vector<VirtualPage> own = r.alloc_kv(2, 1);
    const RetractionRequest request{
        .own = own, .prefix_tokens = 0, .seq_len = 2 * page_len, .window_tokens = 2 * page_len};
    RetractionBackup backup = retract(r.alloc, r.host, r.ctl, request, [](const HostAllocResult&) { return false; });
    REQUIRE(backup);
    backup.discard(r.host);
    CHECK_FALSE(backup);

    CHECK(drops.total() == 0);
    CHECK(r.alloc.unconsumed_reservations() == 0);
    CHECK(r.broken().empty());
}

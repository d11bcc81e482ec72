// A copy that reports failure (HostBackend's injected failure: the copy writes poison and the events recorded
// after it report failed()) comes back as an unsucceeded ack, in order, with its tag, so the caller commits
// neither a failed write nor a failed load; transfers after the failure is cleared succeed.

#include "transfer_support.hpp"

using namespace transfer_test;

TEST_CASE("a failed copy comes back as an unsucceeded ack and the transfers after it as they ran") {
    Rig<SwaFullLayout> f(layered_config(envelopes * 512, 2));
    auto pages = f.alloc_kv(2);
    const auto bad_host = f.host_pages(Component::full, 2);
    const auto good_host = f.host_pages(Component::full, 2);

    f.backend.inject_copy_failure(f.ctl.stream());
    f.ctl.queue_write(f.alloc, {.full = pages, .full_host = bad_host}, 1);
    CHECK(f.ctl.start_writing(f.alloc, f.host) == 1);
    f.backend.clear_copy_failure(f.ctl.stream());
    f.ctl.queue_write(f.alloc, {.full = pages, .full_host = good_host}, 2);
    CHECK(f.ctl.start_writing(f.alloc, f.host) == 1);
    const auto acks = f.ctl.drain_writes();
    REQUIRE(acks.size() == 2);
    CHECK(acks[0].tag == 1);
    CHECK_FALSE(acks[0].succeeded);
    CHECK_FALSE(f.host_holds(Component::full, bad_host, ids_of(pages)));  // poison, not the rows
    CHECK(acks[1].tag == 2);
    CHECK(acks[1].succeeded);
    CHECK(f.host_holds(Component::full, good_host, ids_of(pages)));
    CHECK_FALSE(f.alloc.moves_blocked());

    // A failed per-layer load: the ack says so, and the rows it would have filled are not the host's rows.
    f.alloc.free(pages);
    std::vector<VirtualPage> fresh(2);
    REQUIRE(f.alloc.alloc_full(fresh));
    REQUIRE(f.drain());
    f.write_pages(Component::full, fresh, 9);
    f.backend.inject_copy_failure(f.ctl.stream());
    f.ctl.queue_load(f.alloc, {.full = fresh, .full_host = good_host}, 3);
    CHECK(f.ctl.start_loading(f.alloc, f.host) == 1);
    REQUIRE(f.drain());
    f.run_transfers();
    const auto loads = f.ctl.loading_check();
    REQUIRE(loads.size() == 1);
    CHECK(loads[0].tag == 3);
    CHECK_FALSE(loads[0].succeeded);
    CHECK_FALSE(f.device_holds(Component::full, fresh, ids_of(pages)));
    CHECK_FALSE(f.ctl.has_inflight());

    // Cleared: the same load into the same rows now lands.
    f.backend.clear_copy_failure(f.ctl.stream());
    f.ctl.queue_load(f.alloc, {.full = fresh, .full_host = good_host}, 4);
    CHECK(f.ctl.start_loading(f.alloc, f.host) == 1);
    REQUIRE(f.drain());
    f.run_transfers();
    const auto retry = f.ctl.loading_check();
    REQUIRE(retry.size() == 1);
    CHECK(retry[0].succeeded);
    CHECK(f.device_holds(Component::full, fresh, ids_of(pages)));
    CHECK(f.broken().empty());
}

// A tree and an allocator driven together through the action executor, on every shipped layout: requests over
// shared prefixes are matched, locked, allocated, written, tombstoned and inserted; each component is evicted;
// SWA tombstones are recovered (also under locked FULL, through `transfer_swa`); Mamba states come and go;
// flushes and float moves run in between. After every step: the rows of the pages the step matched or wrote
// read back the markers of the tokens they encode, the allocator's and the tree's `verify()` are
// empty, and the allocator's live pages per component equal the tree's device pages plus the running requests'
// own. Every `sweep_every` steps every node's rows are read. UNIKV_EXECUTOR_FUZZ_OPS (total operations over all
// layouts) and UNIKV_EXECUTOR_FUZZ_SEED run it longer or differently off CI.

#include "executor_driver.hpp"
#include "fuzz_env.hpp"

using namespace cache_test;

namespace {

constexpr std::size_t layout_count = 6;
constexpr std::uint64_t default_ops = 60'000;  // over all layouts; run 120000 or more off CI

template <class L>
void drive(std::uint64_t salt, std::size_t envelopes) {
    const std::uint64_t ops = test::env_or("UNIKV_EXECUTOR_FUZZ_OPS", default_ops) / layout_count;
    const std::uint64_t seed = test::env_or("UNIKV_EXECUTOR_FUZZ_SEED", 20261201) * 31 + salt;
    INFO("seed ", seed, " ops ", ops);
    // A failed REQUIRE unwinds through live receipts: count those drops instead of aborting on them.
    struct QuietDrops {
        DroppedHandler previous = set_dropped_handler([](Dropped) noexcept {});
        ~QuietDrops() { (void)set_dropped_handler(previous); }
    } quiet;
    const std::uint64_t drops = dropped_count();
    Driver<L> d(seed, envelopes);
    d.run(ops);
    CHECK(dropped_count() == drops);  // every list executed, every receipt released
    // The run must have exercised every action kind the layout can produce.
    CHECK(d.executed(ActionKind::free_pages) > 0);
    if constexpr (layout_has_v<L, Component::swa>) {
        CHECK(d.executed(ActionKind::free_swa) > 0);
        CHECK(d.executed(ActionKind::recover_swa_locked_full) > 0);
    }
    if constexpr (layout_has_v<L, Component::mamba>) CHECK(d.executed(ActionKind::free_states) > 0);
}

}  // namespace

TEST_CASE("the tree and the allocator stay in agreement through the executor on every shipped layout") {
    SUBCASE("FullLayout") { drive<FullLayout>(1, 96); }
    SUBCASE("SwaFullLayout") { drive<SwaFullLayout>(2, 128); }
    SUBCASE("MambaFullLayout") { drive<MambaFullLayout>(3, 96); }
    SUBCASE("TriPoolLayout") { drive<TriPoolLayout>(4, 160); }
    SUBCASE("EagerSwaFullLayout") { drive<EagerSwaFullLayout>(5, 128); }
    SUBCASE("EagerMambaFullLayout") { drive<EagerMambaFullLayout>(6, 96); }
}

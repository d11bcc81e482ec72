// The cache with its host tier end to end, randomized, on every layout that takes a host tier and under every write policy:
// requests over shared prefixes are matched (host hits included), allocated, marked row by row, decoded,
// inserted, locked and released; host hits are loaded back (`load_back`, `start_loading`, `loading_check`)
// while other requests run; each component is evicted (write-back drains) and host data too; running decode
// requests are retracted into the host pools and restored into fresh pages; copies fail now and then
// (`inject_copy_failure`), the arena compacts and the whole cache moves with copies in flight. Queued copies
// complete in random order: after each operation a few random picks of `run_one` run whichever stream heads
// can run, so loads and allocator work interleave differently every time.
//
// After every step: the allocator's live pages equal the tree's device pages plus the running requests' own,
// the host pools' pages equal the tree's host pages plus the retracted requests', and the rows the step touched
// read back the markers of the tokens they encode (a committed load, a restored request, an inserted key, a
// served match), and `verify()` (the cache's and the tree's invariants) is empty; every `every_sweep` steps
// every node's device and host rows and every running request's rows are read. UNIKV_HICACHE_FUZZ_OPS
// (operations per configuration) and UNIKV_HICACHE_FUZZ_SEED run it longer or differently off CI.
//
// The write policy is a runtime value of the cache (`HostConfig::write`): one test case per policy, one
// subcase per layout, so each layout's cache type serves all three policies. Select a configuration with
// doctest's filters, e.g. `test_hicache --test-case='Cache keeps*WritePolicy::selective*' --subcase='TriPool*'`
// (the policies: `WritePolicy::back`, `WritePolicy::through`, `WritePolicy::selective`).

#include <algorithm>
#include <cstdint>
#include <optional>
#include <random>
#include <span>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include <unikv/transfer/retraction.hpp>

#include "cache/executor_driver.hpp"
#include "fuzz_env.hpp"
#include "hicache_support.hpp"

using namespace hicache_test;

namespace {

// Per configuration, 12 of them (4 layouts x 3 write policies): 100.8k operations in all under ASan+UBSan on CI.
// The counts, `verify()` and the rows each step touched are checked after every step; the walk of every node's
// rows less often: a broken row stays broken, so a later walk still finds it.
constexpr std::uint64_t default_ops = 8'400;
constexpr std::size_t every_sweep = 256;
constexpr std::size_t max_retracted = 2;
constexpr std::size_t max_loads = 3;

// What one run did, so a test can insist that every path ran.
struct Tally {
    std::uint64_t committed = 0, failed_loads = 0, short_loads = 0, backed_up = 0, dropped = 0, retracted = 0,
                  restored = 0, failed_restores = 0, moves = 0, host_evicted = 0, written = 0, failed_writes = 0,
                  failed_finishes = 0;
};

template <class P>
class HiDriver {
    using Cache = unikv::Cache<P>;
    using Alloc = typename Cache::allocator_type;
    using HostPools = typename Cache::host_pools_type;
    using Retractor = TransferController<HostBackend, HostPools, std::uint64_t>;
    static constexpr bool has_swa = Alloc::has_swa;
    static constexpr bool has_mamba = Alloc::has_mamba;
    static constexpr bool can_retract = retraction_supports_layout_v<typename Cache::layout_type>;

    struct Request {
        std::size_t conversation = 0;
        std::vector<TokenId> key;
        std::vector<VirtualPage> pages;  // the tree's for the matched prefix, then its own
        std::int32_t own_from = 0;       // first page the request allocated
        std::int32_t swa_from = 0;       // first page whose SWA rows the request still holds
        StateId state{};
        LockReceipt receipt;
    };
    struct Retracted {
        std::size_t conversation = 0;
        std::vector<TokenId> key;
        std::int32_t prefix_pages = 0;
        RetractionBackup backup;
    };
    struct Load {
        std::uint64_t id = 0;
        std::vector<TokenId> key;  // up to the loaded node's end
    };

public:
    HiDriver(const HostWrites& writes, std::uint64_t seed, std::size_t envelopes, std::int32_t host_pages)
        : rng_(seed), stream_(backend_.make_stream()) {
        slots_[0].emplace(backend_,
                          CacheConfig{.arena = config(envelopes),
                                      .host = Rig<P>::host_config({.values = {host_pages, host_pages, host_pages}},
                                                                  writes)},
                          stream_);
        bind(0);
        if constexpr (can_retract) retractor_.emplace(backend_);
    }

    void run(std::uint64_t ops) {
        for (std::uint64_t i = 0; i < ops; ++i) {
            step_ = i;
            one_operation();
            for (std::size_t k = pick(4); k > 0; --k) (void)backend_.run_one(pick(8));
            settle();
            check_step();
            if (i % every_sweep == 0) sweep();
        }
        while (!retracted_.empty()) drop_retracted(retracted_.size() - 1);
        while (!running_.empty()) abort_request(running_.size() - 1);
        for (LockReceipt& r : held_) c().unlock(std::move(r));
        held_.clear();
        while (!loads_.empty() || c().writes_in_flight() > 0) {
            (void)c().start_loading();
            (void)c().start_writing();
            (void)backend_.run_all();
            acknowledge_loads();
            acknowledge_writes();
        }
        settle();
        check_step();
        sweep();
    }

    [[nodiscard]] const Tally& tally() const noexcept { return tally_; }

private:
    std::size_t pick(std::size_t n) { return std::uniform_int_distribution<std::size_t>(0, n - 1)(rng_); }
    bool coin(int percent) { return static_cast<int>(pick(100)) < percent; }
    [[nodiscard]] Cache& c() noexcept { return *slots_[active_]; }
    [[nodiscard]] const Cache& c() const noexcept { return *slots_[active_]; }
    [[nodiscard]] Alloc& alloc() noexcept { return c().allocator(); }
    void bind(std::size_t slot) {
        active_ = slot;
        rows_.alloc = &c().allocator();
    }
    static std::vector<TokenId> key_of(std::size_t conversation, std::int32_t pages) {
        std::vector<TokenId> key;
        for (std::int32_t pos = 0; pos < pages * page_size; ++pos) key.push_back(cache_test::token_of(conversation, pos));
        return key;
    }
    static std::uint32_t state_marker(std::span<const TokenId> key) {
        return marker(Component::mamba, key.back(), static_cast<std::int32_t>(key.size()));
    }
    // Runs the allocator's stream dry (page fills, moves), and the transfer copies it waits on.
    void settle() {
        while (backend_.queued(stream_) > 0) {
            if (!backend_.run_next(stream_)) REQUIRE(backend_.run_next(c().controller().stream()));
        }
    }

    void one_operation() {
        const std::size_t op = pick(100);
        if (op < 20) start_request();
        else if (op < 30) decode();
        else if (op < 42) finish_request();
        else if (op < 45) abort_some();
        else if (op < 50) release_held();
        else if (op < 58) load_some();
        else if (op < 64) submit_loads();
        else if (op < 72) acknowledge_loads();
        else if (op < 79) evict_some();
        else if (op < 81) evict_host_some();
        else if (op < 83) submit_writes();
        else if (op < 85) acknowledge_writes();
        else if (op < 90) retract_some();
        else if (op < 95) restore_some();
        else if (op < 98) compact_some();
        else relocate();
    }

    // ---- requests ----------------------------------------------------------------------------------------

    void start_request() {
        if (running_.size() >= cache_test::max_running) return;
        Request r;
        r.conversation = pick(cache_test::conversations);
        r.key = key_of(r.conversation, static_cast<std::int32_t>(1 + pick(cache_test::max_pages - 2)));
        const MatchResult m = c().match(TokenKey{r.key});
        r.pages.assign(m.device_pages.begin(), m.device_pages.end());
        check_matched(r.key, r.pages, m.device_length);
        if (!m.device_node.is_root()) r.receipt = c().lock(m.device_node);
        r.own_from = static_cast<std::int32_t>(r.pages.size());
        r.swa_from = r.own_from;
        const auto own = static_cast<std::int32_t>(r.key.size()) / page_size - r.own_from;
        if (own > 0 && !allocate(r.pages, own)) return release(r.receipt);
        if constexpr (has_mamba) {
            if (coin(60)) r.state = allocate_state();
        }
        settle();
        for (auto k = static_cast<std::size_t>(r.own_from); k < r.pages.size(); ++k) write_page(r, k);
        if constexpr (has_mamba) {
            if (r.state.is_valid()) rows_.write(Component::mamba, r.state.value(), state_marker(r.key));
        }
        running_.push_back(std::move(r));
    }

    // Allocates `n` pages onto `pages`, evicting once when short.
    bool allocate(std::vector<VirtualPage>& pages, std::int32_t n) {
        for (int attempt = 0; attempt < 2; ++attempt) {
            std::vector<VirtualPage> got(static_cast<std::size_t>(n));
            const AllocResult res = alloc().alloc(got);
            if (res) {
                pages.insert(pages.end(), got.begin(), got.end());
                return true;
            }
            REQUIRE(res.missing.count > 0);
            record(c().evict(res.missing));
        }
        return false;
    }
    StateId allocate_state() {
        StateId st{};
        if (alloc().alloc_state(std::span(&st, 1))) return st;
        record(c().evict({Component::mamba, 1}));
        if (alloc().alloc_state(std::span(&st, 1))) return st;
        return StateId{};
    }

    // A running request decodes one more page; its SWA rows that left the window go, as decode drops them.
    void decode() {
        if (running_.empty()) return;
        Request& r = running_[pick(running_.size())];
        if (r.pages.size() >= static_cast<std::size_t>(cache_test::max_pages)) return;
        if (!allocate(r.pages, 1)) return;
        r.key = key_of(r.conversation, static_cast<std::int32_t>(r.pages.size()));
        settle();
        write_page(r, r.pages.size() - 1);
        if constexpr (has_mamba) {
            if (r.state.is_valid()) rows_.write(Component::mamba, r.state.value(), state_marker(r.key));
        }
        if constexpr (has_swa) {
            const auto out_of_window = static_cast<std::int32_t>(r.pages.size()) - window / page_size;
            if (out_of_window > r.swa_from && coin(50)) {
                alloc().free_swa(std::span(r.pages).subspan(static_cast<std::size_t>(r.swa_from),
                                                            static_cast<std::size_t>(out_of_window - r.swa_from)));
                r.swa_from = out_of_window;
            }
        }
    }

    void finish_request() {
        if (running_.empty()) return;
        Request r = take(running_, pick(running_.size()));
        const CacheInsert ins = c().insert(
            TokenKey{r.key}, {.pages = r.pages, .swa_evicted = has_swa ? r.swa_from * page_size : 0, .state = r.state});
        touched_.push_back(r.key);
        release(r.receipt);
        if (held_.size() < cache_test::max_held && !ins.node.is_root()) {
            // Now and then a host-tier lock, which keeps `evict_host` off the node's host copy.
            held_.push_back(c().lock(ins.node, {.tier = coin(25) ? Tier::host : Tier::device}));
        }
    }

    void abort_request(std::size_t i) {
        Request r = take(running_, i);
        alloc().free(std::span(r.pages).subspan(static_cast<std::size_t>(r.own_from)));
        if constexpr (has_mamba) {
            if (r.state.is_valid()) alloc().free_state(std::span(&r.state, 1));
        }
        release(r.receipt);
    }
    void abort_some() {
        if (!running_.empty()) abort_request(pick(running_.size()));
    }
    void release_held() {
        if (!held_.empty()) c().unlock(take(held_, pick(held_.size())));
    }
    void release(LockReceipt& r) {
        if (!r.empty()) c().unlock(std::move(r));
    }
    template <class T>
    static T take(std::vector<T>& v, std::size_t i) {
        T out = std::move(v[i]);
        v.erase(v.begin() + static_cast<std::ptrdiff_t>(i));
        return out;
    }

    // ---- load-back ---------------------------------------------------------------------------------------

    void load_some() {
        if (loads_.size() >= max_loads) return;
        std::vector<TokenId> key = key_of(pick(cache_test::conversations), static_cast<std::int32_t>(1 + pick(cache_test::max_pages)));
        const MatchResult m = c().match(TokenKey{key});
        if (m.best_length == m.device_length) return;  // nothing on host only
        key.resize(static_cast<std::size_t>(m.best_length));
        touched_.push_back(key);
        const LoadBackStart start = c().load_back(m.best_node);
        if (start.status == LoadBackStart::Status::short_of_pages) ++tally_.short_loads;
        if (start) loads_.push_back({.id = start.id, .key = std::move(key)});
    }
    void submit_loads() {
        const bool fail = coin(10);
        if (fail) backend_.inject_copy_failure(c().controller().stream());
        const std::size_t n = c().start_loading();
        // The failure armed by `inject_copy_failure` hits the next copy on the stream, whichever it is; the clear
        // after each submission ends the failure there, so one injection fails one batch.
        if (n > 0 || fail) backend_.clear_copy_failure(c().controller().stream());
    }
    // Over the faulty tree, one check in ten fails the first load it finishes (`finish_load` throws before it
    // changes anything): the load keeps its ticket and locks, the cache stays sound, and the next check finishes
    // it with the rest.
    std::span<const LoadDone> check_loads() {
        if constexpr (std::is_same_v<typename P::tree_core, FaultyTreeCore>) {
            if (c().loads_in_flight() > 0 && coin(10)) {
                TreeFaults::next = TreeFault::finish_load;
                try {
                    const std::span<const LoadDone> done = c().loading_check();
                    TreeFaults::next = TreeFault::none;  // nothing was acknowledged: no finish ran
                    return done;
                } catch (const std::runtime_error&) {
                    ++tally_.failed_finishes;
                    REQUIRE(c().verify().empty());
                }
            }
        }
        return c().loading_check();
    }
    void acknowledge_loads() {
        for (const LoadDone& d : check_loads()) {
            const auto it = std::find_if(loads_.begin(), loads_.end(), [&](const Load& l) { return l.id == d.id; });
            REQUIRE(it != loads_.end());
            const Load load = take(loads_, static_cast<std::size_t>(it - loads_.begin()));
            const MatchResult m = c().match(TokenKey{load.key});
            if (d.committed) {
                ++tally_.committed;
                INFO("step ", step_, ": load ", d.id, " committed");
                // Served from device now: a later load waits for the parts this one copies.
                REQUIRE(m.device_length == static_cast<std::int32_t>(load.key.size()));
            } else {
                ++tally_.failed_loads;
            }
            // Either way, what the device serves holds the right rows (a failed load's poison would show).
            const std::vector<VirtualPage> pages(m.device_pages.begin(), m.device_pages.end());
            check_matched(load.key, pages, m.device_length);
        }
    }

    // ---- write-through -----------------------------------------------------------------------------------

    void submit_writes() {
        const bool fail = coin(10);
        if (fail) backend_.inject_copy_failure(c().controller().stream());
        const std::size_t n = c().start_writing();
        if (n > 0 || fail) backend_.clear_copy_failure(c().controller().stream());
    }
    void acknowledge_writes() {
        for (const WriteDone& d : c().writing_check()) {
            ++(d.committed ? tally_.written : tally_.failed_writes);
            if (!c().tree().contains(d.node)) continue;
            const NodeInfo info = c().tree().node_info(d.node);
            INFO("step ", step_, ": write ", d.id, " of ", to_string(d.component), (d.committed ? " committed" : " failed"));
            // A committed copy holds the rows; a failed one left no host value behind.
            if (!d.committed) REQUIRE(info.host[d.component].empty());
            if (d.committed && writes_settled()) REQUIRE(host_holds(info, d.component, key_of_node(info)));
        }
    }
    // No write-through copy in flight, so every host value the tree holds has been written.
    [[nodiscard]] bool writes_settled() const { return c().writes_in_flight() == 0; }

    // ---- eviction ----------------------------------------------------------------------------------------

    void evict_some() {
        std::vector<Component> cs{Component::full, Component::full};
        if constexpr (has_swa) cs.push_back(Component::swa);
        if constexpr (has_mamba) cs.push_back(Component::mamba);
        const Component comp = cs[pick(cs.size())];
        const Pages amount{comp, static_cast<std::int64_t>(1 + pick(4))};
        const bool fail = coin(5);
        if (fail) backend_.inject_copy_failure(c().controller().stream());
        auto run = c().start_evict(amount);
        if (run.copies() > 0 || fail) backend_.clear_copy_failure(c().controller().stream());
        // The write-back copies run in random order with the other streams before the drain.
        for (std::size_t k = pick(4); k > 0; --k) (void)backend_.run_one(pick(8));
        record(c().finish_evict(std::move(run)));
    }
    void evict_host_some() {
        std::vector<Component> cs{Component::full};
        if constexpr (has_swa) cs.push_back(Component::swa);
        if constexpr (has_mamba) cs.push_back(Component::mamba);
        const Component comp = cs[pick(cs.size())];
        tally_.host_evicted +=
            static_cast<std::uint64_t>(c().evict_host({comp, static_cast<std::int64_t>(1 + pick(4))}).count);
    }
    void record(const Eviction& ev) {
        tally_.backed_up += static_cast<std::uint64_t>(ev.backed_up);
        tally_.dropped += static_cast<std::uint64_t>(ev.dropped);
    }

    // ---- retraction --------------------------------------------------------------------------------------

    RetractionRequest retraction_of(std::span<const VirtualPage> own, std::int32_t prefix_pages, std::size_t pages) const {
        return {.own = own,
                .prefix_tokens = prefix_pages * page_size,
                .seq_len = static_cast<std::int32_t>(pages) * page_size,
                .window_tokens = has_swa ? window : 0};
    }
    void retract_some() {
        if constexpr (can_retract) {
            if (running_.empty() || retracted_.size() >= max_retracted) return;
            const std::size_t i = pick(running_.size());
            Request& r = running_[i];
            if (r.state.is_valid() || r.own_from == static_cast<std::int32_t>(r.pages.size())) return;
            const std::span<const VirtualPage> own = std::span(r.pages).subspan(static_cast<std::size_t>(r.own_from));
            arm_retractor();
            RetractionBackup backup = retract(alloc(), c().host_pools(), *retractor_, retraction_of(own, r.own_from, r.pages.size()),
                                              [&](const HostAllocResult& s) { return c().relieve_host(s); });
            if (backup.failure() != RetractionFailure::host_full) {  // a copy ran: it failed exactly when armed
                REQUIRE(static_cast<bool>(backup) != disarm_retractor());
            }
            if (!backup) return;  // short of host pages, or the copy failed: the request runs on, rows intact
            check_own(r);
            ++tally_.retracted;
            // The caller releases the request's own rows and its prefix lock together.
            Request gone = take(running_, i);
            alloc().free(std::span(gone.pages).subspan(static_cast<std::size_t>(gone.own_from)));
            release(gone.receipt);
            retracted_.push_back({.conversation = gone.conversation, .key = std::move(gone.key),
                                  .prefix_pages = gone.own_from, .backup = std::move(backup)});
        }
    }
    void restore_some() {
        if constexpr (can_retract) {
            if (retracted_.empty() || running_.size() >= cache_test::max_running) return;
            const std::size_t i = pick(retracted_.size());
            Retracted& q = retracted_[i];
            const MatchResult m = c().match(TokenKey{q.key});
            if (m.device_length < q.prefix_pages * page_size) {  // its prefix left the device
                if (coin(30)) drop_retracted(i);
                return;
            }
            Request r;
            r.conversation = q.conversation;
            r.key = q.key;
            r.pages.assign(m.device_pages.begin(), m.device_pages.end());
            r.pages.resize(static_cast<std::size_t>(q.prefix_pages));
            if (!m.device_node.is_root()) r.receipt = c().lock(m.device_node);
            r.own_from = q.prefix_pages;
            const auto own = static_cast<std::int32_t>(q.key.size()) / page_size - r.own_from;
            if (!allocate(r.pages, own)) return release(r.receipt);
            settle();
            const std::span<const VirtualPage> fresh = std::span(r.pages).subspan(static_cast<std::size_t>(r.own_from));
            arm_retractor();
            const bool ok = restore(alloc(), c().host_pools(), *retractor_, q.backup, retraction_of(fresh, r.own_from, r.pages.size()));
            REQUIRE(ok != disarm_retractor());
            if (!ok) {  // the backup stays live: give the fresh rows back and retry later
                ++tally_.failed_restores;
                REQUIRE(q.backup);
                alloc().free(fresh);
                return release(r.receipt);
            }
            ++tally_.restored;
            // Byte-exact: every own FULL row, and the SWA rows of the window; the SWA rows before the window
            // were not backed up, so the request drops them.
            r.swa_from = r.own_from;
            if constexpr (has_swa) {
                const std::int32_t first = std::max(0, static_cast<std::int32_t>(r.key.size()) - window) / page_size;
                if (first > r.own_from) {
                    alloc().free_swa(std::span(r.pages).subspan(static_cast<std::size_t>(r.own_from),
                                                                static_cast<std::size_t>(first - r.own_from)));
                    r.swa_from = first;
                }
            }
            check_own(r);
            retracted_.erase(retracted_.begin() + static_cast<std::ptrdiff_t>(i));
            running_.push_back(std::move(r));
        }
    }
    // Now and then arms a failure of the retractor's next copy (a retraction short of host pages copies nothing,
    // so the failure may wait for a later one).
    void arm_retractor() {
        if (retractor_armed_ || !coin(10)) return;
        backend_.inject_copy_failure(retractor_->stream());
        retractor_armed_ = true;
    }
    // After a copy ran: whether it was armed to fail; ends the failure on the stream.
    bool disarm_retractor() {
        if (!retractor_armed_) return false;
        backend_.clear_copy_failure(retractor_->stream());
        retractor_armed_ = false;
        return true;
    }
    void drop_retracted(std::size_t i) {
        Retracted q = take(retracted_, i);
        q.backup.discard(c().host_pools());
    }

    // ---- compaction and moves of the whole cache ---------------------------------------------------------

    void compact_some() {
        const std::size_t k = pick(4);
        if constexpr (Alloc::has_float) {
            if (k == 2) {
                (void)alloc().compact_holes(coin(50) ? Side::low : Side::high);
                return;
            }
            if (k == 3) {
                (void)alloc().make_room(coin(50) ? Side::low : Side::high, (1 + pick(4)) * 128);
                return;
            }
        }
        (void)alloc().flush(k == 0 ? FlushMode::urgent : FlushMode::opportunistic);
    }
    // Moves the cache into the other slot with its copies still queued; the old object is destroyed.
    void relocate() {
        if (c().loads_in_flight() > 0) ++tally_.moves;
        const std::size_t next = 1 - active_;
        slots_[next].emplace(std::move(c()));
        slots_[active_].reset();
        bind(next);
    }

    // ---- rows and checks ---------------------------------------------------------------------------------

    void write_page(const Request& r, std::size_t k) {
        const auto first = static_cast<std::int32_t>(k) * page_size;
        rows_.write_page(Component::full, r.pages[k], r.key, first);
        if constexpr (has_swa) rows_.write_page(Component::swa, r.pages[k], r.key, first);
    }
    // The matched pages' FULL rows, and the SWA rows of the last window before the boundary.
    void check_matched(std::span<const TokenId> key, std::span<const VirtualPage> pages, std::int32_t length) {
        for (std::size_t k = 0; k < pages.size(); ++k) {
            const auto first = static_cast<std::int32_t>(k) * page_size;
            INFO("step ", step_, " matched page ", k, " (virtual ", pages[k].value(), ")");
            REQUIRE(rows_.page_holds(Component::full, pages[k], key, first));
            if constexpr (has_swa) {
                if (first + page_size > length - window) REQUIRE(rows_.page_holds(Component::swa, pages[k], key, first));
            }
        }
    }
    // A running request's own rows: FULL, live SWA, its state.
    void check_own(const Request& r) {
        for (auto k = static_cast<std::size_t>(r.own_from); k < r.pages.size(); ++k) {
            const auto first = static_cast<std::int32_t>(k) * page_size;
            INFO("step ", step_, " own page ", k, " of a request of ", r.pages.size());
            REQUIRE(rows_.page_holds(Component::full, r.pages[k], r.key, first));
            if constexpr (has_swa) {
                if (static_cast<std::int32_t>(k) >= r.swa_from) REQUIRE(rows_.page_holds(Component::swa, r.pages[k], r.key, first));
            }
        }
        if constexpr (has_mamba) {
            if (r.state.is_valid()) REQUIRE(rows_.holds(Component::mamba, r.state.value(), state_marker(r.key)));
        }
    }

    // The cache's and the tree's `verify()` (a walk of every node), then the counts.
    void check_step() {
        INFO("step ", step_);
        REQUIRE(c().verify().empty());
        const Cache& cc = c();
        const auto units = [&](Component comp) { return cc.tree().evictable_size(comp) + cc.tree().protected_size(comp); };
        std::int64_t own = 0, own_swa = 0, states = 0;
        for (const Request& r : running_) {
            own += static_cast<std::int64_t>(r.pages.size()) - r.own_from;
            own_swa += static_cast<std::int64_t>(r.pages.size()) - r.swa_from;
            states += r.state.is_valid() ? 1 : 0;
        }
        if (cc.loads_in_flight() == 0) {  // in flight, a load's destinations are neither the tree's nor a request's
            REQUIRE(cc.allocator().live_pages(Component::full) == units(Component::full) / page_size + own);
            if constexpr (has_swa) REQUIRE(cc.allocator().live_pages(Component::swa) == units(Component::swa) / page_size + own_swa);
            if constexpr (has_mamba) REQUIRE(cc.allocator().live_pages(Component::mamba) == units(Component::mamba) + states);
        }
        per_component<std::int64_t> retracted{};
        for (const Retracted& q : retracted_) {
            for (Component comp : all_components) retracted[comp] += static_cast<std::int64_t>(q.backup.host(comp).size());
        }
        Cache& mc = c();
        REQUIRE(mc.host_pools().used(Component::full) == cc.tree().host_size(Component::full) / page_size + retracted[Component::full]);
        if constexpr (has_swa)
            REQUIRE(mc.host_pools().used(Component::swa) == cc.tree().host_size(Component::swa) / page_size + retracted[Component::swa]);
        if constexpr (has_mamba) REQUIRE(mc.host_pools().used(Component::mamba) == cc.tree().host_size(Component::mamba));
        for (const std::vector<TokenId>& key : touched_) {
            if (key.empty()) continue;
            const MatchResult m = c().match(TokenKey{key});
            const std::vector<VirtualPage> pages(m.device_pages.begin(), m.device_pages.end());
            check_matched(key, pages, m.device_length);
        }
        touched_.clear();
    }

    // Every node's device and host rows, and every running request's own rows.
    void sweep() {
        for (NodeRef n : c().tree().nodes()) {
            const NodeInfo info = c().tree().node_info(n);
            INFO("step ", step_, " node at ", info.start, " length ", info.length);
            const std::vector<TokenId> key = key_of_node(info);
            for (std::size_t k = 0; k < info.pages.size(); ++k) {
                const auto first = info.start + static_cast<std::int32_t>(k) * page_size;
                REQUIRE(rows_.page_holds(Component::full, info.pages[k], key, first));
                if constexpr (has_swa) {
                    if (info.device[Component::swa]) REQUIRE(rows_.page_holds(Component::swa, info.pages[k], key, first));
                }
            }
            if constexpr (has_mamba) {
                if (info.state.is_valid()) REQUIRE(rows_.holds(Component::mamba, info.state.value(), state_marker(key)));
            }
            for (Component comp : all_components) {
                if (!info.host[comp].empty() && writes_settled()) REQUIRE(host_holds(info, comp, key));
            }
        }
        for (const Request& r : running_) check_own(r);
    }
    // The key up to the node's end: its own tokens, zeros before (the rows checks read only its own).
    static std::vector<TokenId> key_of_node(const NodeInfo& info) {
        std::vector<TokenId> key(static_cast<std::size_t>(info.start), 0);
        key.insert(key.end(), info.tokens.begin(), info.tokens.end());
        return key;
    }
    // `info`'s host copy of `comp` holds the markers of `key` (the tokens up to the node's end).
    bool host_holds(const NodeInfo& info, Component comp, std::span<const TokenId> key) {
        auto lease = c().host_pools().lease();
        const std::size_t entry = alloc().spec()[comp].entry_bytes;
        const std::vector<HostPage>& hp = info.host[comp];
        for (std::size_t k = 0; k < hp.size(); ++k) {
            std::int32_t physical = -1;
            lease.physical(comp, std::span(&hp[k], 1), std::span(&physical, 1));
            const std::byte* page = lease.region(comp).data + static_cast<std::size_t>(physical) * lease.page_bytes(comp);
            const std::int32_t rows = c().page_size(comp);
            for (std::int32_t row = 0; row < rows; ++row) {
                const std::int32_t pos = info.start + static_cast<std::int32_t>(k) * page_size + row;
                const std::uint32_t want = comp == Component::mamba ? state_marker(key)
                                                                   : marker(comp, key[static_cast<std::size_t>(pos)], pos);
                if (test_rows::uniform_word(page + static_cast<std::size_t>(row) * entry, entry) != want) return false;
            }
        }
        return true;
    }

    std::mt19937_64 rng_;
    HostBackend backend_{{.mode = ExecutionMode::manual}};
    HostBackend::Stream stream_;
    std::optional<Cache> slots_[2];
    std::size_t active_ = 0;
    std::optional<Retractor> retractor_;  // after the cache: destroyed first (controller rule)
    Rows<Alloc> rows_{nullptr};
    std::vector<Request> running_;
    std::vector<Retracted> retracted_;
    std::vector<Load> loads_;
    std::vector<LockReceipt> held_;
    std::vector<std::vector<TokenId>> touched_;
    std::uint64_t step_ = 0;
    bool retractor_armed_ = false;
    Tally tally_;
};

template <class P>
void drive(const HostWrites& writes, std::uint64_t salt, std::size_t envelopes, std::int32_t host_pages) {
    const std::uint64_t ops = unikv::test::env_or("UNIKV_HICACHE_FUZZ_OPS", default_ops);
    const std::uint64_t seed = unikv::test::env_or("UNIKV_HICACHE_FUZZ_SEED", 20261202) * 31 + salt;
    INFO("seed ", seed, " ops ", ops);
    // A failed REQUIRE unwinds through live receipts, backups and tickets: count those drops instead of aborting.
    struct QuietDrops {
        DroppedHandler previous = set_dropped_handler([](Dropped) noexcept {});
        ~QuietDrops() { (void)set_dropped_handler(previous); }
    } quiet;
    const std::uint64_t drops = dropped_count();
    HiDriver<P> d(writes, seed, envelopes, host_pages);
    d.run(ops);
    CHECK(dropped_count() == drops);  // no list, receipt, reservation, backup or ticket was dropped
    const Tally& t = d.tally();
    if constexpr (std::is_same_v<typename P::tree_core, FaultyTreeCore>) CHECK(t.failed_finishes > 0);
    MESSAGE("committed ", t.committed, " failed loads ", t.failed_loads, " short ", t.short_loads, " backed up ",
            t.backed_up, " dropped ", t.dropped, " retracted ", t.retracted, " restored ", t.restored, " moves ",
            t.moves, " host evicted ", t.host_evicted, " written ", t.written, " failed writes ", t.failed_writes,
            " failed finishes ", t.failed_finishes);
}

// The four layouts under `writes`, one subcase each; a layout's salt is the same under every policy.
void drive_layouts(const HostWrites& writes) {
    SUBCASE("FullLayout, envelope host") { drive<Policies<FullLayout, PageEnvelopeHost<>>>(writes, 1, 64, 40); }
    SUBCASE("SwaFullLayout, separate host pools, failing finishes") {
        drive<FaultyPolicies<SwaFullLayout>>(writes, 2, 128, 40);
    }
    SUBCASE("MambaFullLayout") { drive<Policies<MambaFullLayout>>(writes, 4, 96, 40); }
    SUBCASE("TriPoolLayout") { drive<Policies<TriPoolLayout>>(writes, 5, 160, 40); }
}

}  // namespace

TEST_CASE("Cache keeps every served row right under random requests, loads, evictions and retractions "
          "(WritePolicy::back)") {
    drive_layouts(write_back);
}
TEST_CASE("Cache keeps every served row right under random requests, loads, evictions and retractions "
          "(WritePolicy::through)") {
    drive_layouts(write_through);
}
TEST_CASE("Cache keeps every served row right under random requests, loads, evictions and retractions "
          "(WritePolicy::selective, threshold 2)") {
    drive_layouts(write_selective);
}

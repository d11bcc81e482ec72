// A randomized model-based test over every shipped layout and pool policy. A simple reference model knows,
// for each virtual page and state slot, which version of its row markers it should hold; the allocator runs
// on a manual backend with three streams (its own, a transfer engine's, a forward pass's) that execute in a
// random interleaving. After every step: verify() is empty, the counts match the model, and,
// whenever the allocator's stream has drained, every settled row reads back its marker through translation.
//
// UNIKV_ALLOC_FUZZ_OPS (total operations over all layouts, default 200000) and UNIKV_ALLOC_FUZZ_SEED
// (default 20240917) make it a soak test: `UNIKV_ALLOC_FUZZ_OPS=20000000 ./test_allocator -tc='*randomized*'`.
// UNIKV_ALLOC_FUZZ_TRACE=1 prints each step's operation (and pool spans around allocations) to stderr.
//
// The model follows the engine contract the allocator documents: work that uses translated ids (row writes,
// loads, backups, the forward) is ordered after the allocator's stream; pages a transfer or the running
// forward uses are not freed until it is acknowledged; a backup may wait in the controller's queue with its
// physical pages resolved only while the host-transfer gate is installed.

#include "alloc_support.hpp"
#include "drop_counter.hpp"
#include "fuzz_env.hpp"

#include <cstdio>
#include <deque>
#include <optional>
#include <random>
#include <string>

using namespace alloc_test;

namespace {

using unikv::test::env_or;

constexpr std::uint32_t loaded_version = 15;  // rows written by a host-to-device load
constexpr std::int32_t page_size = 2;
constexpr std::size_t envelope = 64;  // 2 rows of 32 bytes; a Mamba slot is 64 bytes too

template <class L>
class Run {
    using A = UnifiedAllocator<L, HostBackend>;
    static constexpr bool has_swa = A::has_swa;
    static constexpr bool has_mamba = A::has_mamba;
    static constexpr bool has_res = A::has_reservations;
    static constexpr bool has_float = A::has_float;
    static constexpr bool gates = layout_allows_move_gates_v<L>;

    struct Pending {  // a reservation whose load is not submitted
        Reservation r;
        std::vector<std::int32_t> bound;  // vids bound to r.pages()[0..bound.size())
    };
    struct Load {  // a submitted group of reservations, one event
        std::vector<Reservation> rs;
        std::vector<std::vector<std::int32_t>> bound;
        HostBackend::Event done;
        HostBackend::PinnedBuffer host;
        bool applied = false;
        MoveGateHold gate;  // the host-transfer gate, closed from the load's submission to its ack
    };
    struct Write {  // a device-to-host backup in flight
        std::vector<std::int32_t> vids;
        std::vector<std::int32_t> versions;
        HostBackend::Event done;
        HostBackend::PinnedBuffer host;
        std::vector<std::int32_t> src;  // physical pages captured when the backup was planned
        Component component = Component::full;
        MoveGateHold gate;  // the host-transfer gate, closed from the backup's planning to its ack
    };

public:
    Run(std::uint64_t seed, std::uint64_t ops) : rng_(seed), ops_(ops) {
        std::uniform_int_distribution<int> coin(0, 1);
        host_gate_ = gates && coin(rng_) == 1;
        disagg_gate_ = gates && coin(rng_) == 1;
        const auto ids = static_cast<std::size_t>(alloc_.spec()[Component::full].num_pages) + 1;
        full_.assign(ids, -1);
        swa_.assign(ids, -1);
        locked_.assign(ids, 0);
        loading_.assign(ids, 0);
        reading_.assign(ids, 0);
        written_.assign(ids, 0);
        if constexpr (has_mamba) state_.assign(static_cast<std::size_t>(alloc_.spec()[Component::mamba].num_pages) + 1, -1);
    }

    void run() {
        for (std::uint64_t i = 0; i < ops_; ++i) {
            step_ = i;
            step();
            settle_events();
            check();
            if (failed_) return;
        }
        finish();
    }

private:
    ArenaConfig config() const {
        ArenaConfig c = small_config(44 * envelope, page_size, 4);
        return c;
    }

    int pick(int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng_); }
    bool chance(int percent) { return pick(100) < percent; }

    // ---- model helpers ------------------------------------------------------------------------------------
    std::vector<std::int32_t> live_full(bool for_free) const {
        std::vector<std::int32_t> out;
        for (std::size_t v = 1; v < full_.size(); ++v) {
            if (full_[v] < 0 || locked_[v] || written_[v] || loading_[v] || reading_[v]) continue;
            if (for_free && swa_bound_to_pending(static_cast<std::int32_t>(v))) continue;
            out.push_back(static_cast<std::int32_t>(v));
        }
        return out;
    }
    bool swa_bound_to_pending(std::int32_t v) const {
        for (const Pending& p : pending_) {
            for (std::int32_t b : p.bound) {
                if (b == v) return true;
            }
        }
        return false;
    }
    template <class T>
    std::vector<T> sample(std::vector<T> from, std::size_t n) {
        std::shuffle(from.begin(), from.end(), rng_);
        if (from.size() > n) from.resize(n);
        return from;
    }

    // Queues marker writes for rows of `pages` on the allocator stream (a kernel ordered after its moves).
    void queue_rows(Component c, const std::vector<std::pair<std::int32_t, std::vector<std::uint32_t>>>& pages) {
        if (pages.empty()) return;
        const std::size_t entry = alloc_.spec()[c].entry_bytes;
        const std::size_t pb = alloc_.spec()[c].page_bytes;
        HostBackend::PinnedBuffer host = backend_.allocate_pinned(pages.size() * pb);
        std::vector<std::int32_t> src;
        std::vector<std::int32_t> dst;
        for (std::size_t i = 0; i < pages.size(); ++i) {
            for (std::size_t r = 0; r < pages[i].second.size(); ++r) {
                for (std::size_t w = 0; w < entry / 4; ++w) {
                    std::memcpy(host.data() + i * pb + r * entry + 4 * w, &pages[i].second[r], 4);
                }
            }
            src.push_back(static_cast<std::int32_t>(i));
            dst.push_back(pages[i].first);
        }
        backend_.copy_pages_async(host.region(), src, alloc_.region(), dst, pb, stream_);
        staging_.push_back(std::move(host));
    }
    std::vector<std::uint32_t> rows_of(Component c, std::int32_t v, std::uint32_t version) const {
        const std::int32_t rows = c == Component::mamba ? 1 : page_size;
        std::vector<std::uint32_t> out;
        for (std::int32_t r = 0; r < rows; ++r) out.push_back(marker(c, v, r, version));
        return out;
    }
    std::int32_t phys_page(Component c, std::int32_t v) const {
        if constexpr (has_mamba) {
            if (c == Component::mamba) {
                const StateId in{v};
                PhysicalPage out;
                alloc_.translate_state(std::span(&in, 1), std::span(&out, 1));
                return out.value();
            }
        }
        const VirtualPage in{v};
        PhysicalPage out;
        if (c == Component::full) alloc_.translate_full(std::span(&in, 1), std::span(&out, 1));
        if constexpr (has_swa) {
            if (c == Component::swa) alloc_.translate_swa(std::span(&in, 1), std::span(&out, 1));
        }
        return out.value();
    }
    std::uint32_t next_version() { return static_cast<std::uint32_t>(pick(15)); }
    // Engine contract: work that uses translated ids is ordered after the allocator's stream (its moves and
    // the row writes queued there), like any kernel of the engine.
    void order_after_allocator(HostBackend::Stream& s) {
        HostBackend::Event e = backend_.make_event();
        e.ref().record(stream_);
        s.ref().wait(e);
    }

    // ---- operations ---------------------------------------------------------------------------------------
    void step() {
        const int op = pick(100);
        if (trace_) std::fprintf(stderr, "step %llu op %d\n", static_cast<unsigned long long>(step_), op);
        if (op < 16) return do_alloc();
        if (op < 26) return do_free();
        if (op < 32) return do_free_swa();
        if (op < 35) return do_free_full();
        if (op < 43) return do_states();
        if (op < 51) return do_reserve();
        if (op < 54) return do_cancel_or_drop();
        if (op < 58) return do_submit();
        if (op < 62) return do_ack();
        if (op < 66) return do_backup();
        if (op < 76) return do_run_streams();
        if (op < 82) return do_forward();
        if (op < 84) {
            if constexpr (gates) {
                if (disagg_gate_) {
                    if (disagg_hold_) {
                        disagg_hold_.release();
                    } else {
                        disagg_hold_ = alloc_.install_move_gate(MoveGateSlot::disagg);
                    }
                }
            }
            return;
        }
        if (op < 92) {
            (void)alloc_.flush(chance(25) ? FlushMode::urgent : FlushMode::opportunistic);
            return;
        }
        if (op < 96) return do_float();
        return do_ensure();
    }

    void do_alloc() {
        const auto n = static_cast<std::size_t>(1 + pick(4));
        const CapacityDemand d{.full = static_cast<std::int64_t>(n), .swa = has_swa ? static_cast<std::int64_t>(n) : 0};
        const bool promised = alloc_.can_reserve(d);
        const bool now = alloc_.available_size() >= static_cast<std::int64_t>(n);
        std::vector<VirtualPage> pages(n);
        if (trace_) dump("before alloc " + std::to_string(n) + " promised " + std::to_string(promised));
        const AllocResult r = alloc_.alloc(pages);
        if (trace_) dump("after alloc ok " + std::to_string(static_cast<bool>(r)) + " why " + std::to_string(static_cast<int>(r.shortfall)));
        expect(promised == static_cast<bool>(r), "can_reserve disagrees with alloc");
        expect(!now || static_cast<bool>(r), "alloc failed below available_size");
        if (!r) return;
        std::vector<std::pair<std::int32_t, std::vector<std::uint32_t>>> full_rows;
        std::vector<std::pair<std::int32_t, std::vector<std::uint32_t>>> swa_rows;
        for (VirtualPage p : pages) {
            const std::int32_t v = p.value();
            expect(full_[static_cast<std::size_t>(v)] < 0, "alloc returned a live id");
            const std::uint32_t ver = next_version();
            full_[static_cast<std::size_t>(v)] = static_cast<int>(ver);
            full_rows.emplace_back(phys_page(Component::full, v), rows_of(Component::full, v, ver));
            if constexpr (has_swa) {
                swa_[static_cast<std::size_t>(v)] = static_cast<int>(ver);
                swa_rows.emplace_back(phys_page(Component::swa, v), rows_of(Component::swa, v, ver));
            }
        }
        queue_rows(Component::full, full_rows);
        if constexpr (has_swa) queue_rows(Component::swa, swa_rows);
    }

    void dump(const std::string& what) const {
        std::fprintf(stderr, "  %s | blocked %d\n", what.c_str(), static_cast<int>(alloc_.moves_blocked()));
        for (Component c : {Component::mamba, Component::swa, Component::full}) {
            if (!layout_components_v<L>.has(c)) continue;
            const auto span = alloc_.byte_span(c);
            std::fprintf(stderr, "    %s [%zu,%zu) live %d holes %d res %d pend %d reuse %d\n", std::string(to_string(c)).c_str(), span.first / envelope,
                         span.second / envelope, alloc_.live_pages(c), alloc_.hole_pages(c), alloc_.reserved_pages(c),
                         alloc_.pending_load_pages(c), alloc_.pending_reuse_pages(c));
        }
    }

    // Picks up to three freeable pages that satisfy `keep`, updates the model, and frees them with `call`.
    template <class Keep, class Call>
    void free_some(Keep keep, bool clears_full, bool clears_swa, Call call) {
        std::vector<std::int32_t> candidates;
        for (std::int32_t v : live_full(true)) {
            if (keep(v)) candidates.push_back(v);
        }
        std::vector<VirtualPage> pages;
        for (std::int32_t v : sample(candidates, static_cast<std::size_t>(1 + pick(3)))) {
            pages.emplace_back(v);
            if (clears_full) full_[static_cast<std::size_t>(v)] = -1;
            if (clears_swa) swa_[static_cast<std::size_t>(v)] = -1;
        }
        if (!pages.empty()) call(pages);
    }
    void do_free() {
        free_some([](std::int32_t) { return true; }, true, true, [this](const auto& p) { alloc_.free(p); });
    }
    void do_free_swa() {
        if constexpr (has_swa) {
            free_some([this](std::int32_t v) { return swa_[static_cast<std::size_t>(v)] >= 0; }, false, true,
                      [this](const auto& p) { alloc_.free_swa(p); });
        }
    }
    void do_free_full() {
        free_some([this](std::int32_t v) { return !has_swa || swa_[static_cast<std::size_t>(v)] == -1; }, true, false,
                  [this](const auto& p) { alloc_.free_full(p); });
    }

    void do_states() {
        if constexpr (has_mamba) {
            if (chance(55)) {
                const auto n = static_cast<std::size_t>(1 + pick(3));
                const bool promised = alloc_.can_reserve({.mamba = static_cast<std::int64_t>(n)});
                std::vector<StateId> ids(n);
                const AllocResult r = alloc_.alloc_state(ids);
                expect(promised == static_cast<bool>(r), "can_reserve disagrees with alloc_state");
                if (!r) return;
                std::vector<std::pair<std::int32_t, std::vector<std::uint32_t>>> rows;
                for (StateId s : ids) {
                    const std::uint32_t ver = next_version();
                    expect(state_[static_cast<std::size_t>(s.value())] < 0, "alloc_state returned a live slot");
                    state_[static_cast<std::size_t>(s.value())] = static_cast<int>(ver);
                    rows.emplace_back(phys_page(Component::mamba, s.value()), rows_of(Component::mamba, s.value(), ver));
                }
                queue_rows(Component::mamba, rows);
            } else {
                std::vector<std::int32_t> live;
                for (std::size_t s = 1; s < state_.size(); ++s) {
                    if (state_[s] >= 0) live.push_back(static_cast<std::int32_t>(s));
                }
                auto victims = sample(live, static_cast<std::size_t>(1 + pick(3)));
                if (victims.empty()) return;
                std::vector<StateId> ids;
                for (std::int32_t s : victims) {
                    ids.emplace_back(s);
                    state_[static_cast<std::size_t>(s)] = -1;
                }
                alloc_.free_state(ids);
            }
        }
    }

    void do_reserve() {
        if constexpr (has_res) {
            const int k = 1 + pick(3);
            ReserveResult r = alloc_.alloc_physical(Component::swa, k);
            if (!r) {
                expect(r.reservation.empty(), "a failed reservation holds pages");
                return;
            }
            std::vector<std::int32_t> tombs;
            for (std::int32_t v : live_full(true)) {
                if (swa_[static_cast<std::size_t>(v)] == -1) tombs.push_back(v);
            }
            auto targets = sample(tombs, static_cast<std::size_t>(pick(k + 1)));
            std::vector<VirtualPage> pages;
            for (std::int32_t v : targets) {
                pages.emplace_back(v);
                swa_[static_cast<std::size_t>(v)] = -2;  // unknown until the load runs
            }
            alloc_.bind_swa(pages, r.reservation);
            pending_.push_back({std::move(r.reservation), targets});
        }
    }

    void do_cancel_or_drop() {
        if (pending_.empty()) return;
        const auto i = static_cast<std::size_t>(pick(static_cast<int>(pending_.size())));
        for (std::int32_t v : pending_[i].bound) swa_[static_cast<std::size_t>(v)] = -1;  // tombstone back
        if (chance(85)) {
            alloc_.cancel(std::move(pending_[i].r));
        } else {
            const std::size_t before = alloc_.unconsumed_reservations();
            const std::int64_t reported = drops_[Dropped::reservation];
            pending_[i].r = Reservation{};  // dropped: detected, reported and cancelled
            expect(alloc_.unconsumed_reservations() == before + 1, "a dropped reservation was not detected");
            expect(drops_[Dropped::reservation] == reported + 1 && drops_.total() == reported + 1,
                   "a dropped reservation was not reported as one");
        }
        pending_.erase(pending_.begin() + static_cast<std::ptrdiff_t>(i));
    }

    void do_submit() {
        if (pending_.empty()) return;
        Load load{{}, {}, backend_.make_event(), {}, false, transfer_hold()};
        std::size_t pages = 0;
        for (const Pending& p : pending_) pages += p.r.pages().size();
        const std::size_t pb = alloc_.spec()[Component::swa].page_bytes;
        load.host = backend_.allocate_pinned(pages * pb);
        std::vector<std::int32_t> src;
        std::vector<std::int32_t> dst;
        for (Pending& p : pending_) {
            for (std::size_t j = 0; j < p.r.pages().size(); ++j) {
                const std::size_t hp = src.size();
                const std::vector<std::uint32_t> rows =
                    j < p.bound.size() ? rows_of(Component::swa, p.bound[j], loaded_version) : std::vector<std::uint32_t>(page_size, 0xC0FFEEu);
                for (std::size_t r = 0; r < rows.size(); ++r) {
                    for (std::size_t w = 0; w < 8; ++w) std::memcpy(load.host.data() + hp * pb + r * 32 + 4 * w, &rows[r], 4);
                }
                src.push_back(static_cast<std::int32_t>(hp));
                dst.push_back(p.r.pages()[j].value());
            }
            for (std::int32_t v : p.bound) loading_[static_cast<std::size_t>(v)] = 1;
            load.bound.push_back(p.bound);
            load.rs.push_back(std::move(p.r));
        }
        pending_.clear();
        order_after_allocator(transfer_);
        backend_.copy_pages_async(load.host.region(), src, alloc_.region(), dst, pb, transfer_);
        load.done.ref().record(transfer_);
        alloc_.set_transfer_done_event({.owner = 7, .direction = TransferDirection::load}, load.done);
        expect(alloc_.pending_load_pages(Component::swa) == 0, "a load registration left pending pages");
        loads_.push_back(std::move(load));
    }

    void do_ack() {
        if (!planned_.empty() && chance(60)) {
            issue(std::move(planned_.front()));
            planned_.erase(planned_.begin());
            return;
        }
        for (std::size_t i = 0; i < loads_.size(); ++i) {
            Load& load = loads_[i];
            if (!load.done.ref().query()) continue;
            // The ack: redundant (unbound) destinations go back with free_physical.
            std::vector<PhysicalPage> redundant;
            for (std::size_t k = 0; k < load.rs.size(); ++k) {
                const auto pages = load.rs[k].pages();
                for (std::size_t j = load.bound[k].size(); j < pages.size(); ++j) redundant.push_back(pages[j]);
            }
            if (!redundant.empty()) alloc_.free_physical(Component::swa, redundant);
            for (const auto& bound : load.bound) {
                for (std::int32_t v : bound) loading_[static_cast<std::size_t>(v)] = 0;
            }
            loads_.erase(loads_.begin() + static_cast<std::ptrdiff_t>(i));
            return;
        }
        for (std::size_t i = 0; i < writes_.size(); ++i) {
            Write& w = writes_[i];
            if (!w.done.ref().query()) continue;
            for (std::size_t k = 0; k < w.vids.size(); ++k) {
                for (std::int32_t r = 0; r < page_size; ++r) {
                    std::uint32_t word = 0;
                    std::memcpy(&word, w.host.data() + k * envelope + static_cast<std::size_t>(r) * 32, 4);
                    expect(word == marker(w.component, w.vids[k], r, static_cast<std::uint32_t>(w.versions[k])),
                           "a backup read rows that moved or changed under it");
                }
                locked_[static_cast<std::size_t>(w.vids[k])] = 0;
            }
            writes_.erase(writes_.begin() + static_cast<std::ptrdiff_t>(i));
            return;
        }
    }

    void do_backup() {
        std::vector<std::int32_t> settled;
        for (std::int32_t v : live_full(false)) {
            if (full_[static_cast<std::size_t>(v)] >= 0) settled.push_back(v);
        }
        auto vids = sample(settled, static_cast<std::size_t>(1 + pick(3)));
        if (vids.empty()) return;
        // A backup copies FULL pages, or (with SWA, half the time) the SWA pages of windows that are bound.
        Component c = Component::full;
        if constexpr (has_swa) {
            if (chance(50)) {
                std::vector<std::int32_t> bound;
                for (std::int32_t v : vids) {
                    if (swa_[static_cast<std::size_t>(v)] >= 0) bound.push_back(v);
                }
                if (!bound.empty()) {
                    vids = bound;
                    c = Component::swa;
                }
            }
        }
        Write w{vids, {}, backend_.make_event(), backend_.allocate_pinned(vids.size() * envelope), {}, c,
                transfer_hold()};
        for (std::size_t k = 0; k < vids.size(); ++k) {
            w.versions.push_back(c == Component::full ? full_[static_cast<std::size_t>(vids[k])] : swa_[static_cast<std::size_t>(vids[k])]);
            locked_[static_cast<std::size_t>(vids[k])] = 1;
            w.src.push_back(phys_page(c, vids[k]));
        }
        // With the host-transfer gate installed, a backup may sit in the controller's queue (its physical pages
        // already resolved) before its copy is issued: only the gate keeps those pages in place meanwhile.
        if (host_gate_ && chance(50)) {
            planned_.push_back(std::move(w));
            return;
        }
        issue(std::move(w));
    }

    // A hold of the host-transfer gate for one transfer, when this run installs that gate: the gate is closed
    // while any transfer is in flight, each holding it once.
    MoveGateHold transfer_hold() {
        if constexpr (gates) {
            if (host_gate_) return alloc_.install_move_gate(MoveGateSlot::host_transfer);
        }
        return {};
    }

    void issue(Write w) {
        std::vector<std::int32_t> dst;
        for (std::size_t k = 0; k < w.src.size(); ++k) dst.push_back(static_cast<std::int32_t>(k));
        order_after_allocator(transfer_);
        backend_.copy_pages_async(alloc_.region(), w.src, w.host.region(), dst, envelope, transfer_);
        w.done.ref().record(transfer_);
        alloc_.set_transfer_done_event({.owner = 7, .direction = TransferDirection::write}, w.done);
        writes_.push_back(std::move(w));
    }

    void do_run_streams() {
        HostBackend::Stream* streams[] = {&stream_, &transfer_, &forward_stream_};
        HostBackend::Stream& s = *streams[pick(3)];
        for (int k = pick(4); k >= 0; --k) {
            if (!backend_.run_next(s)) break;
        }
    }

    void do_forward() {
        if (forward_) return;
        if (chance(20)) alloc_.clear_inflight_forward();  // the previous forward ended: forgetting it is allowed
        auto vids = sample(live_full(true), static_cast<std::size_t>(1 + pick(3)));
        if (vids.empty()) return;
        forward_host_ = backend_.allocate_pinned((2 * vids.size() + 4) * envelope);
        std::vector<std::int32_t> src;
        std::vector<std::int32_t> full_dst;
        std::vector<std::int32_t> swa_src;
        std::vector<std::int32_t> swa_dst;
        forward_writes_.clear();
        std::vector<VirtualPage> pages;
        for (std::size_t k = 0; k < vids.size(); ++k) {
            const std::int32_t v = vids[k];
            const std::uint32_t ver = next_version();
            const bool swa_live = has_swa && swa_[static_cast<std::size_t>(v)] >= 0;
            const auto put = [&](Component c, std::size_t hp) {
                const auto rows = rows_of(c, v, ver);
                for (std::size_t r = 0; r < rows.size(); ++r) {
                    for (std::size_t w = 0; w < 8; ++w) std::memcpy(forward_host_.data() + hp * envelope + r * 32 + 4 * w, &rows[r], 4);
                }
            };
            put(Component::full, 2 * k);
            src.push_back(static_cast<std::int32_t>(2 * k));
            full_dst.push_back(phys_page(Component::full, v));
            if (swa_live) {
                put(Component::swa, 2 * k + 1);
                swa_src.push_back(static_cast<std::int32_t>(2 * k + 1));
                swa_dst.push_back(phys_page(Component::swa, v));
            }
            forward_writes_.push_back({v, static_cast<int>(ver), swa_live});
            written_[static_cast<std::size_t>(v)] = 1;
            pages.emplace_back(v);
        }
        order_after_allocator(forward_stream_);
        backend_.copy_pages_async(forward_host_.region(), src, alloc_.region(), full_dst, envelope, forward_stream_);
        if (!swa_src.empty()) {
            backend_.copy_pages_async(forward_host_.region(), swa_src, alloc_.region(), swa_dst, envelope, forward_stream_);
        }
        // It also reads other pages (attention over the prefix): their rows as they are now.
        forward_reads_.clear();
        std::vector<std::int32_t> read_src;
        std::vector<std::int32_t> read_dst;
        for (std::int32_t v : sample(live_full(true), 4)) {
            const auto hp = static_cast<std::int32_t>(2 * vids.size() + read_src.size());
            if (static_cast<std::size_t>(hp) >= forward_host_.size() / envelope) break;
            forward_reads_.push_back({v, full_[static_cast<std::size_t>(v)], false});
            reading_[static_cast<std::size_t>(v)] = 1;
            read_src.push_back(phys_page(Component::full, v));
            read_dst.push_back(hp);
        }
        if (!read_src.empty()) {
            backend_.copy_pages_async(alloc_.region(), read_src, forward_host_.region(), read_dst, envelope, forward_stream_);
        }
        forward_done_ = backend_.make_event();
        forward_done_->ref().record(forward_stream_);
        alloc_.set_inflight_forward(*forward_done_, pages);
        forward_ = true;
    }

    void do_float() {
        if constexpr (has_float) {
            const Side side = chance(50) ? Side::low : Side::high;
            if (chance(60)) {
                (void)alloc_.make_room(side, static_cast<std::size_t>(pick(12)) * envelope);
            } else {
                (void)alloc_.compact_holes(side);
            }
        } else {
            (void)alloc_.flush(FlushMode::urgent);
        }
    }

    void do_ensure() {
        CapacityDemand d{.full = pick(8)};
        if constexpr (has_swa) d.swa = pick(8);
        if constexpr (has_mamba) d.mamba = pick(8);
        const bool promised = alloc_.can_reserve(d);
        const AllocResult r = alloc_.ensure_capacity(d);
        expect(promised == static_cast<bool>(r), "can_reserve disagrees with ensure_capacity");
    }

    // ---- per-step checks ------------------------------------------------------------------------------------
    void settle_events() {
        if (forward_ && forward_done_->ref().query()) {
            for (const auto& w : forward_writes_) {
                full_[static_cast<std::size_t>(w.v)] = w.version;
                if (w.swa) swa_[static_cast<std::size_t>(w.v)] = w.version;
                written_[static_cast<std::size_t>(w.v)] = 0;
            }
            for (std::size_t k = 0; k < forward_reads_.size(); ++k) {
                const auto& r = forward_reads_[k];
                const std::size_t hp = 2 * forward_writes_.size() + k;
                for (std::int32_t row = 0; row < page_size; ++row) {
                    std::uint32_t word = 0;
                    std::memcpy(&word, forward_host_.data() + hp * envelope + static_cast<std::size_t>(row) * 32, 4);
                    expect(word == marker(Component::full, r.v, row, static_cast<std::uint32_t>(r.version)),
                           "the forward read rows that were reused under it");
                }
                reading_[static_cast<std::size_t>(r.v)] = 0;
            }
            forward_ = false;
        }
        for (Load& load : loads_) {
            if (load.applied || !load.done.ref().query()) continue;
            for (const auto& bound : load.bound) {
                for (std::int32_t v : bound) {
                    if (swa_[static_cast<std::size_t>(v)] == -2) swa_[static_cast<std::size_t>(v)] = static_cast<int>(loaded_version);
                }
            }
            load.applied = true;
        }
    }

    void check() {
        if (const std::string broken = test_verify::broken(alloc_); !broken.empty()) {
            fail("verify: " + broken);
            return;
        }
        std::int32_t full_live = 0;
        std::int32_t swa_live = 0;
        for (std::size_t v = 1; v < full_.size(); ++v) {
            full_live += full_[v] >= 0 ? 1 : 0;
            swa_live += swa_[v] != -1 ? 1 : 0;
        }
        expect(alloc_.live_pages(Component::full) == full_live, "FULL live count differs from the model");
        if constexpr (has_swa) expect(alloc_.live_pages(Component::swa) == swa_live, "SWA live count differs from the model");
        if constexpr (has_mamba) {
            std::int32_t states = 0;
            for (int s : state_) states += s >= 0 ? 1 : 0;
            expect(alloc_.live_pages(Component::mamba) == states, "Mamba live count differs from the model");
        }
        // The other engines make progress between allocator calls, in a random interleaving.
        for (HostBackend::Stream* other : {&transfer_, &forward_stream_}) {
            if (!chance(other == &transfer_ ? 45 : 25)) continue;
            for (int k = pick(4); k >= 0 && backend_.run_next(*other);) --k;
        }
        if (chance(70)) {
            while (backend_.run_next(stream_)) {
            }
        }
        if (backend_.queued(stream_) != 0) return;
        ++content_checks_;
        check_device_tables();
        staging_.clear();
        for (std::size_t v = 1; v < full_.size(); ++v) {
            if (written_[v]) continue;
            const auto id = static_cast<std::int32_t>(v);
            if (full_[v] >= 0) check_rows(Component::full, id, static_cast<std::uint32_t>(full_[v]));
            if (has_swa && swa_[v] >= 0) check_rows(Component::swa, id, static_cast<std::uint32_t>(swa_[v]));
        }
        if constexpr (has_mamba) {
            for (std::size_t s = 1; s < state_.size(); ++s) {
                if (state_[s] >= 0) check_rows(Component::mamba, static_cast<std::int32_t>(s), static_cast<std::uint32_t>(state_[s]));
            }
        }
    }

    // Every fourth drained check publishes the device tables (moves already published theirs) and, once the
    // publish ran, compares every mirror with its host v2p.
    void check_device_tables() {
        if (content_checks_ % 4 != 0) return;
        const DeviceTables d = alloc_.device_tables();
        while (backend_.run_next(stream_)) {
        }
        expect(backend_.queued(stream_) == 0, "the device tables' publish did not run");
        expect(mirror_matches(d.full, alloc_.page_table(Component::full)), "the FULL mirror differs from its v2p");
        if constexpr (has_swa) expect(mirror_matches(d.swa, alloc_.page_table(Component::swa)), "the SWA mirror differs from its v2p");
        if constexpr (has_mamba) {
            expect(mirror_matches(d.mamba, alloc_.page_table(Component::mamba)), "the Mamba mirror differs from its v2p");
        }
    }

    void check_rows(Component c, std::int32_t v, std::uint32_t version) {
        const std::size_t entry = alloc_.spec()[c].entry_bytes;
        const std::int32_t rows = c == Component::mamba ? 1 : page_size;
        const std::int32_t p = phys_page(c, v);
        for (std::int32_t r = 0; r < rows; ++r) {
            std::uint32_t word = 0;
            std::memcpy(&word, alloc_.region().data + (static_cast<std::size_t>(p) * rows + static_cast<std::size_t>(r)) * entry, 4);
            if (word != marker(c, v, r, version)) {
                fail("row " + std::to_string(r) + " of " + std::string(to_string(c)) + " id " + std::to_string(v) +
                     " at physical page " + std::to_string(p) + " holds " + std::to_string(word) + ", expected version " +
                     std::to_string(version));
                return;
            }
        }
    }

    void finish() {
        // Let every stream run, ack everything, cancel what is pending, free everything: the pools drain.
        backend_.run_all();
        settle_events();
        while (!loads_.empty() || !writes_.empty() || !planned_.empty()) {
            backend_.run_all();
            do_ack();
        }
        while (!pending_.empty()) {
            for (std::int32_t v : pending_.back().bound) swa_[static_cast<std::size_t>(v)] = -1;
            alloc_.cancel(std::move(pending_.back().r));
            pending_.pop_back();
        }
        alloc_.clear_inflight_forward();
        disagg_hold_.release();
        settle_events();
        check();
        std::vector<VirtualPage> all;
        for (std::size_t v = 1; v < full_.size(); ++v) {
            if (full_[v] >= 0) all.emplace_back(static_cast<std::int32_t>(v));
        }
        alloc_.free(all);
        if constexpr (has_mamba) {
            std::vector<StateId> states;
            for (std::size_t s = 1; s < state_.size(); ++s) {
                if (state_[s] >= 0) states.emplace_back(static_cast<std::int32_t>(s));
            }
            alloc_.free_state(states);
        }
        (void)alloc_.flush(FlushMode::urgent);
        backend_.run_all();
        expect(alloc_.verify().empty(), "accounting broken after draining");
        expect(alloc_.live_pages(Component::full) == 0, "FULL pages left after freeing everything");
        expect(alloc_.hole_pages(Component::full) == 0, "FULL holes left after an urgent flush of an empty pool");
    }

    void expect(bool ok, const std::string& what) {
        if (!ok) fail(what);
    }
    void fail(const std::string& what) {
        if (failed_) return;
        failed_ = true;
        FAIL_CHECK("step ", step_, ": ", what);
    }

public:
    [[nodiscard]] bool failed() const { return failed_; }
    [[nodiscard]] std::uint64_t content_checks() const { return content_checks_; }
    [[nodiscard]] std::uint64_t moved_bytes() const { return backend_.counters().bytes_copied; }

    // Queued copies read and write the staging and transfer buffers declared below the streams: run them
    // while those buffers live (a run that failed early leaves work queued).
    ~Run() { backend_.run_all(); }
    Run(const Run&) = delete;
    Run& operator=(const Run&) = delete;

private:
    unikv::test::DropCounter drops_;  // dropped reservations are reported, not aborted on; outlives the allocator
    std::mt19937_64 rng_;
    std::uint64_t ops_;
    std::uint64_t step_ = 0;
    bool failed_ = false;
    std::uint64_t content_checks_ = 0;
    bool trace_ = env_or("UNIKV_ALLOC_FUZZ_TRACE", 0) != 0;
    HostBackend backend_{{.mode = ExecutionMode::manual}};
    HostBackend::Stream stream_ = backend_.make_stream();
    HostBackend::Stream transfer_ = backend_.make_stream();
    HostBackend::Stream forward_stream_ = backend_.make_stream();
    A alloc_{backend_, config(), stream_};
    bool host_gate_ = false;
    bool disagg_gate_ = false;
    MoveGateHold disagg_hold_;  // the disagg gate while it is closed
    std::vector<int> full_;    // per virtual page: marker version, or -1 when free
    std::vector<int> swa_;     // per virtual page: version, -1 tombstone, -2 bound to a load that has not run
    std::vector<int> state_;   // per state slot: version or -1
    std::vector<char> locked_;   // a backup reads the page: it must not be freed or rewritten
    std::vector<char> written_;  // the running forward writes the page: rows unknown until it ends
    std::vector<char> loading_;  // bound to a load that is not acked: the load-back keeps it locked
    std::vector<char> reading_;  // the running forward reads the page: it must not be freed
    std::vector<Pending> pending_;
    std::vector<Load> loads_;
    std::vector<Write> writes_;
    std::vector<Write> planned_;
    std::deque<HostBackend::PinnedBuffer> staging_;
    struct ForwardWrite {
        std::int32_t v;
        int version;
        bool swa;
    };
    bool forward_ = false;
    std::optional<HostBackend::Event> forward_done_;
    HostBackend::PinnedBuffer forward_host_;
    std::vector<ForwardWrite> forward_writes_;
    std::vector<ForwardWrite> forward_reads_;
};

template <class L>
void soak(std::uint64_t seed, std::uint64_t ops) {
    // Several short runs with fresh gates beat one long run at finding interleavings.
    constexpr std::uint64_t per_run = 5000;
    std::uint64_t checks = 0;
    std::uint64_t bytes = 0;
    for (std::uint64_t done = 0, k = 0; done < ops; done += per_run, ++k) {
        CAPTURE(seed + k);
        Run<L> run(seed + k, std::min(per_run, ops - done));
        run.run();
        checks += run.content_checks();
        bytes += run.moved_bytes();
        if (run.failed()) return;
    }
    MESSAGE(ops, " operations, ", checks, " full content checks, ", bytes, " bytes copied");
    CHECK(checks > ops / 4);
}

}  // namespace

TEST_CASE("randomized operations match a reference model on every layout and policy") {
    const std::uint64_t total = env_or("UNIKV_ALLOC_FUZZ_OPS", 200000);
    const std::uint64_t seed = env_or("UNIKV_ALLOC_FUZZ_SEED", 20240917);
    const std::uint64_t each = (total + 6) / 7;
    MESSAGE("UNIKV_ALLOC_FUZZ_SEED=", seed, " UNIKV_ALLOC_FUZZ_OPS=", total);
    SUBCASE("[Full lazy]") { soak<FullLayout>(seed + 5000, each); }
    SUBCASE("[Full eager]") { soak<EagerFullLayout>(seed + 6000, each); }
    SUBCASE("[Swa lazy | Full lazy]") { soak<SwaFullLayout>(seed, each); }
    SUBCASE("[Mamba lazy | Full lazy]") { soak<MambaFullLayout>(seed + 1000, each); }
    SUBCASE("[Mamba lazy | Swa float | Full lazy]") { soak<TriPoolLayout>(seed + 2000, each); }
    SUBCASE("[Swa eager | Full eager]") { soak<EagerSwaFullLayout>(seed + 3000, each); }
    SUBCASE("[Mamba eager | Full eager]") { soak<EagerMambaFullLayout>(seed + 4000, each); }
}

// A randomized run of the controller against a model, on a manual HostBackend whose streams advance in a
// random order (`run_one`): random allocations, frees, writes of live rows to fresh host pages, loads of host
// copies into fresh rows (virtual SWA destinations or reservations), starts, checks, drains, urgent flushes,
// host frees, and moves of the whole stack (allocator, host pools, controller) with transfers in flight.
// Checked after every step: the gate is closed exactly while the controller has something in flight, no
// flush moves a page then, acks come back in queue order with the rows they copied (host rows for a write,
// device rows through translation for a load), and the allocator's byte accounting is clean; every 32 steps
// every settled live row is checked through translation. UNIKV_TRANSFER_OPS sets the length (default 3000),
// UNIKV_TRANSFER_SEED the seed.

#include <map>
#include <optional>
#include <random>
#include <set>

#include "fuzz_env.hpp"
#include "transfer_support.hpp"

using namespace transfer_test;

namespace {

using L = SwaFullLayout;
using Alloc = UnifiedAllocator<L, HostBackend>;

struct Stack {
    Alloc alloc;
    Host<L> host;
    Controller<L> ctl;
};

// What a page's rows hold: the markers of (id, version).
struct Content {
    std::int32_t id = 0;
    std::uint32_t version = 0;
};
// A host copy of one device page: its FULL and SWA host pages and what they hold.
struct Hosted {
    HostPage full, swa;
    Content content;
    int readers = 0;  // loads in flight from it
};
struct Pending {
    TransferDirection direction;
    std::vector<VirtualPage> pages;       // write sources / load targets
    std::vector<std::size_t> hosted;      // indices into `hosted_`
    std::optional<Reservation> reservation;
};

class Run {
public:
    explicit Run(std::uint64_t seed) : rng_(seed), stream_(backend_.make_stream()) {
        Alloc alloc(backend_, layered_config(96 * 256, 2), stream_);
        Host<L> host(backend_, alloc.spec(), Rig<L>::host_config(alloc.spec()), stream_);
        slots_[0].emplace(Stack{std::move(alloc), std::move(host), Controller<L>(backend_)});
        page_size_ = s().alloc.spec()[Component::full].page_size;
    }

    void step(std::uint64_t i) {
        switch (pick(12)) {
            case 0: case 1: alloc_pages(); break;
            case 2: free_page(); break;
            case 3: queue_write(); break;
            case 4: queue_load(); break;
            case 5: (void)s().ctl.start_writing(s().alloc, s().host); break;
            case 6: (void)s().ctl.start_loading(s().alloc, s().host); break;
            case 7: acks(s().ctl.writing_check()); acks(s().ctl.loading_check()); break;
            case 8:
                if (s().ctl.queued(TransferDirection::write) == 0) acks(s().ctl.drain_writes());
                break;
            case 9: flush_and_race(); break;
            case 10: free_hosted(); break;
            case 11: relocate(); break;
        }
        for (int k = pick(4); k > 0; --k) (void)backend_.run_one(static_cast<std::size_t>(rng_()));
        REQUIRE(s().ctl.has_inflight() == s().alloc.moves_blocked());
        REQUIRE(s().alloc.verify().empty());
        if (i % 32 == 31) sweep();
    }

    void finish() {
        (void)s().ctl.start_writing(s().alloc, s().host);
        (void)s().ctl.start_loading(s().alloc, s().host);
        backend_.run_all();
        acks(s().ctl.writing_check());
        acks(s().ctl.loading_check());
        CHECK(pending_.empty());
        CHECK_FALSE(s().ctl.has_inflight());
        CHECK_FALSE(s().alloc.moves_blocked());
        sweep();
        CHECK(writes_acked_ > 0);
        CHECK(loads_acked_ > 0);
    }

private:
    Stack& s() { return *slots_[slot_]; }
    int pick(int n) { return static_cast<int>(rng_() % static_cast<std::uint64_t>(n)); }

    std::byte* row(Component c, std::int32_t physical_row) {
        return s().alloc.region().data + static_cast<std::size_t>(physical_row) * s().alloc.spec()[c].entry_bytes;
    }
    std::int32_t physical_row(Component c, VirtualPage v, std::int32_t r) {
        const VirtualToken in{v.value() * page_size_ + r};
        PhysicalToken out;
        if (c == Component::full) s().alloc.translate_full(std::span(&in, 1), std::span(&out, 1));
        else s().alloc.translate_swa(std::span(&in, 1), std::span(&out, 1));
        return out.value();
    }
    void write_rows(VirtualPage v, Content content) {
        for (Component c : {Component::full, Component::swa}) {
            const std::size_t entry = s().alloc.spec()[c].entry_bytes;
            for (std::int32_t r = 0; r < page_size_; ++r) {
                const std::uint32_t m = marker(c, content.id, r, content.version);
                std::byte* p = row(c, physical_row(c, v, r));
                for (std::size_t w = 0; w < entry / 4; ++w) std::memcpy(p + 4 * w, &m, 4);
            }
        }
    }
    bool rows_hold(VirtualPage v, Content content) {
        for (Component c : {Component::full, Component::swa}) {
            for (std::int32_t r = 0; r < page_size_; ++r) {
                if (uniform_word(row(c, physical_row(c, v, r)), s().alloc.spec()[c].entry_bytes) !=
                    marker(c, content.id, r, content.version)) {
                    return false;
                }
            }
        }
        return true;
    }
    bool host_holds(const Hosted& h) {
        auto lease = s().host.lease();
        for (Component c : {Component::full, Component::swa}) {
            const HostPage page = c == Component::full ? h.full : h.swa;
            std::int32_t physical = -1;
            lease.physical(c, std::span(&page, 1), std::span(&physical, 1));
            const std::size_t entry = s().alloc.spec()[c].entry_bytes;
            const std::byte* base = lease.region(c).data + static_cast<std::size_t>(physical) * s().host.page_bytes(c);
            for (std::int32_t r = 0; r < page_size_; ++r) {
                if (uniform_word(base + static_cast<std::size_t>(r) * entry, entry) !=
                    marker(c, h.content.id, r, h.content.version)) {
                    return false;
                }
            }
        }
        return true;
    }
    // Runs the allocator's stream so rows written now land where translation says (moves may be queued).
    void settle_allocator() {
        while (backend_.run_next(s().alloc.stream())) {
        }
    }

    void alloc_pages() {
        std::vector<VirtualPage> pages(static_cast<std::size_t>(1 + pick(3)));
        if (!s().alloc.alloc(pages)) return;
        settle_allocator();
        if (backend_.queued(s().alloc.stream()) != 0) {  // a move behind a transfer event: give the rows back
            s().alloc.free(pages);
            return;
        }
        for (VirtualPage v : pages) {
            const Content c{.id = v.value(), .version = next_version_++ & 0xFu};
            write_rows(v, c);
            live_[v.value()] = c;
        }
    }
    std::optional<VirtualPage> idle_page() {
        std::vector<std::int32_t> idle;
        for (const auto& [v, c] : live_) {
            if (!busy_.contains(v)) idle.push_back(v);
        }
        if (idle.empty()) return std::nullopt;
        return VirtualPage{idle[static_cast<std::size_t>(pick(static_cast<int>(idle.size())))]};
    }
    void free_page() {
        if (auto v = idle_page()) {
            s().alloc.free(std::span(&*v, 1));
            live_.erase(v->value());
        }
    }
    void queue_write() {
        if (const auto v = idle_page()) queue_write(*v);
    }
    void queue_write(VirtualPage page) {
        const std::optional<VirtualPage> v = page;
        if (s().host.available(Component::full) < 1 || s().host.available(Component::swa) < 1) return;
        HostPage full, swa;
        const HostRequest batch[2] = {{.component = Component::full, .out = std::span(&full, 1)},
                                      {.component = Component::swa, .out = std::span(&swa, 1)}};
        REQUIRE(s().host.alloc(batch));
        hosted_.push_back({.full = full, .swa = swa, .content = live_[v->value()], .readers = 1});
        s().ctl.queue_write(s().alloc, {.full = std::span(&*v, 1), .full_host = std::span(&full, 1),
                                        .swa = std::span(&*v, 1), .swa_host = std::span(&swa, 1)},
                            next_tag_);
        busy_.insert(v->value());
        pending_.emplace(next_tag_++, Pending{.direction = TransferDirection::write, .pages = {*v},
                                              .hosted = {hosted_.size() - 1}, .reservation = std::nullopt});
    }
    void queue_load() {
        std::vector<std::size_t> ready;
        for (std::size_t i = 0; i < hosted_.size(); ++i) {
            if (hosted_[i].readers == 0 && hosted_[i].full.is_valid()) ready.push_back(i);
        }
        if (ready.empty()) return;
        const std::size_t h = ready[static_cast<std::size_t>(pick(static_cast<int>(ready.size())))];
        VirtualPage v;
        Pending p{.direction = TransferDirection::load, .pages = {}, .hosted = {h}, .reservation = std::nullopt};
        TransferRequest request{.full = std::span(&v, 1), .full_host = std::span(&hosted_[h].full, 1),
                                .swa_host = std::span(&hosted_[h].swa, 1)};
        if (pick(2) == 0) {
            if (!s().alloc.alloc(std::span(&v, 1))) return;
            request.swa = std::span(&v, 1);
        } else {
            if (!s().alloc.alloc_full(std::span(&v, 1))) return;
            ReserveResult r = s().alloc.alloc_physical(Component::swa, 1);
            if (!r) {
                s().alloc.free(std::span(&v, 1));
                return;
            }
            s().alloc.bind_swa(std::span(&v, 1), r.reservation);
            p.reservation.emplace(std::move(r.reservation));
            request.swa_reserved = p.reservation->pages();
        }
        p.pages = {v};
        s().ctl.queue_load(s().alloc, request, next_tag_);
        hosted_[h].readers = 1;
        busy_.insert(v.value());
        live_[v.value()] = hosted_[h].content;
        pending_.emplace(next_tag_++, std::move(p));
    }
    void acks(std::span<const Controller<L>::ack_type> list) {
        for (const auto& ack : list) {
            REQUIRE(ack.succeeded);
            const auto it = pending_.find(ack.tag);
            REQUIRE(it != pending_.end());
            Pending& p = it->second;
            REQUIRE(p.direction == ack.direction);
            // FIFO per direction: no older transfer of this direction is still pending.
            for (auto older = pending_.begin(); older != it; ++older) REQUIRE(older->second.direction != ack.direction);
            Hosted& h = hosted_[p.hosted[0]];
            if (ack.direction == TransferDirection::write) {
                CHECK(host_holds(h));
                ++writes_acked_;
            } else {
                CHECK(rows_hold(p.pages[0], h.content));
                ++loads_acked_;
            }
            h.readers = 0;
            busy_.erase(p.pages[0].value());
            pending_.erase(it);
        }
    }
    // An urgent flush (it must move nothing while anything is in flight), then writes of the rows it moved,
    // submitted while the moves may still be queued: the copies must run after them.
    void flush_and_race() {
        const bool inflight = s().ctl.has_inflight();
        std::map<std::int32_t, std::int32_t> where;
        for (const auto& [v, c] : live_) where[v] = physical_row(Component::full, VirtualPage{v}, 0);
        const FlushResult r = s().alloc.flush(FlushMode::urgent);
        if (inflight) CHECK(r.pages_moved == 0);
        std::vector<VirtualPage> relocated;
        for (const auto& [v, c] : live_) {
            if (!busy_.contains(v) && where[v] != physical_row(Component::full, VirtualPage{v}, 0)) {
                relocated.push_back(VirtualPage{v});
            }
        }
        for (VirtualPage v : relocated) queue_write(v);
        (void)s().ctl.start_writing(s().alloc, s().host);
    }
    void free_hosted() {
        for (std::size_t i = 0; i < hosted_.size(); ++i) {
            Hosted& h = hosted_[i];
            if (h.readers == 0 && h.full.is_valid() && pick(3) == 0) {
                s().host.free(Component::full, std::span(&h.full, 1));
                s().host.free(Component::swa, std::span(&h.swa, 1));
                h.full = h.swa = HostPage{};
                return;
            }
        }
    }
    void relocate() {
        const std::size_t to = 1 - slot_;
        slots_[to].emplace(std::move(*slots_[slot_]));
        slots_[slot_].reset();
        slot_ = to;
    }
    void sweep() {
        backend_.run_all();
        for (const auto& [v, c] : live_) {
            if (!pending_load_target(v)) CHECK(rows_hold(VirtualPage{v}, c));  // write sources are stable
        }
    }
    bool pending_load_target(std::int32_t v) const {
        for (const auto& [tag, p] : pending_) {
            if (p.direction == TransferDirection::load && p.pages[0].value() == v) return true;
        }
        return false;
    }

    std::mt19937_64 rng_;
    HostBackend backend_{{.mode = ExecutionMode::manual}};
    HostBackend::Stream stream_;
    std::optional<Stack> slots_[2];
    std::size_t slot_ = 0;
    std::int32_t page_size_ = 0;
    std::map<std::int32_t, Content> live_;
    std::set<std::int32_t> busy_;
    std::vector<Hosted> hosted_;
    std::map<std::uint64_t, Pending> pending_;  // by tag: tags grow in queue order
    std::uint64_t next_tag_ = 1;
    std::uint32_t next_version_ = 1;
    std::uint64_t writes_acked_ = 0, loads_acked_ = 0;
};

}  // namespace

TEST_CASE("randomized transfers in random completion order keep rows, acks and the gate right") {
    const std::uint64_t seed = unikv::test::env_or("UNIKV_TRANSFER_SEED", 1);
    const std::uint64_t ops = unikv::test::env_or("UNIKV_TRANSFER_OPS", 3000);
    for (std::uint64_t s = seed; s < seed + 3; ++s) {
        CAPTURE(s);
        Run run(s);
        for (std::uint64_t i = 0; i < ops; ++i) {
            CAPTURE(i);
            run.step(i);
        }
        run.finish();
    }
}

#pragma once
// The load-backs a tree core knows from queue to ack (`begin_load` / `finish_load`, shared by both cores): one
// record per load, holding its destinations, cut into parts of one whole node and one component each. A split
// cuts a part in two like the node's own values, so a part always names exactly the node it loads. The parts are
// invisible to match and insert (an insert that adopts its own pages meanwhile wins); a plan step whose part is
// already loading is flagged (`LoadBackStep::loading`). At the ack each part whose node still lacks the component
// is installed; the rest is handed back for the caller to free. Records are few (the loads in flight), so every
// call scans them: O(parts) (a plan's flags: O(steps * parts)).

#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <unikv/component.hpp>
#include <unikv/error.hpp>
#include <unikv/ids.hpp>
#include <unikv/tree/handles.hpp>
#include <unikv/tree/options.hpp>
#include <unikv/tree/results.hpp>

namespace unikv::detail::tree {

// What a node is now, as the install decisions of `LoadRecords::finish` read it.
struct LoadTarget {
    per_component<bool> device{};  // device data present (SWA: rows live)
    per_component<bool> host{};    // a host copy present
    bool parent_full = false;      // the parent has FULL device data (or is the root)
    std::span<const VirtualPage> pages{};  // the node's FULL device pages
};

class LoadRecords {
public:
    // True while no load is recorded.
    [[nodiscard]] bool empty() const noexcept { return records_.empty(); }
    // Loads recorded.
    [[nodiscard]] std::size_t size() const noexcept { return records_.size(); }

    // Whether some recorded load copies `component` of node slot `node`. O(parts).
    [[nodiscard]] bool loading(std::uint32_t node, Component component) const noexcept {
        for (const Record& r : records_) {
            for (const Part& p : r.parts) {
                if (p.node.index() == node && p.component == component) return true;
            }
        }
        return false;
    }

    // Records load `id` of `plan` (a tree's `load_back_plan`, fresh) into `dest`: the FULL steps' pages one after
    // another in plan order, the Mamba step's state. Throws `logic_error` (nothing recorded) for an id in use, a
    // step already loading, or destinations that do not fit the plan. O(plan + pages).
    void begin(std::uint64_t id, std::span<const LoadBackStep> plan, const LoadedValue& dest) {
        UNIKV_EXPECTS(id != 0 && find(id) == records_.end(), "begin_load: load id ", id, " is 0 or in use");
        // A finished record's buffers are reused: a steady state of loads allocates nothing here.
        Record r = recycled();
        r.id = id;
        r.state = dest.state;
        r.parts.reserve(plan.size());
        std::uint32_t full_at = 0;
        bool wants_state = false;
        for (const LoadBackStep& s : plan) {
            UNIKV_EXPECTS(!s.loading, "begin_load: ", to_string(s.component), " of node ", s.node.index(),
                          " is being loaded by an earlier load");
            const auto pages = static_cast<std::uint32_t>(s.host.size());
            Part p{.node = s.node,
                   .component = s.component,
                   .resident = false,
                   .offset = 0,
                   .pages = pages,
                   .done = false,
                   .moved = false};
            if (s.component == Component::full) {
                p.offset = full_at;
                full_at += pages;
            } else if (s.component == Component::swa) {
                if (!s.full_pages.empty()) {  // bound under the node's resident FULL pages
                    p.resident = true;
                    p.offset = static_cast<std::uint32_t>(r.under.size());
                    r.under.insert(r.under.end(), s.full_pages.begin(), s.full_pages.end());
                } else {  // bound under this load's FULL pages of the same node
                    const auto full = std::find_if(r.parts.begin(), r.parts.end(), [&](const Part& f) {
                        return f.component == Component::full && f.node == s.node;
                    });
                    UNIKV_EXPECTS(full != r.parts.end() && full->pages == pages, "begin_load: the SWA step of node ",
                                  s.node.index(), " has neither resident FULL pages nor a FULL step");
                    p.offset = full->offset;
                }
            } else {
                wants_state = true;
            }
            r.parts.push_back(p);
        }
        UNIKV_EXPECTS(dest.pages.size() == full_at, "begin_load: ", dest.pages.size(),
                      " destination pages for a plan of ", full_at, " FULL pages");
        UNIKV_EXPECTS(wants_state == dest.state.is_valid(),
                      "begin_load: a destination state goes with a Mamba step, and only there");
        r.full.assign(dest.pages.begin(), dest.pages.end());
        r.taken.assign(r.full.size(), false);
        r.spare_swa.reserve(r.under.size() + r.full.size());  // so a failed copy's finish allocates nothing
        spare_full_.reserve(r.full.size());
        records_.push_back(std::move(r));
        spare_records_.reserve(records_.size());  // `recycle` keeps every finished record without allocating
    }

    // Node slot `lower` was split: `upper` (new) takes its first `upper_pages` pages. Every FULL and SWA part on
    // `lower` is cut the same way, the upper part placed before it (parts stay top-down); Mamba stays below.
    // O(parts); allocates only when a part is cut.
    void split(std::uint32_t lower, NodeRef upper, std::uint32_t upper_pages) {
        for (Record& r : records_) {
            for (std::size_t i = 0; i < r.parts.size(); ++i) {
                Part& p = r.parts[i];
                if (p.node.index() != lower || p.component == Component::mamba) continue;
                Part up = p;
                up.node = upper;
                up.pages = upper_pages;
                p.offset += upper_pages;
                p.pages -= upper_pages;
                r.parts.insert(r.parts.begin() + static_cast<std::ptrdiff_t>(i), up);
                ++i;
            }
        }
    }

    // Finishes load `id`: when `copied`, installs each part whose node still lacks the component
    // (`install(node, component, value)`, top-down) and returns the rest; otherwise returns everything. SWA rows
    // bound under this load's pages whose node got its FULL rows another way meanwhile are moved under the node's
    // own pages (`move_swa(kept, incoming)`) right before they are installed. `target` reads a node. Idempotent
    // across a throw: each part is marked done as it is decided (an install that threw after it changed the node
    // counts as done), and what is to be freed is kept in the record, which is forgotten only once every part is
    // done; a call after a throw goes on where it stopped. A failed copy allocates nothing (`begin` reserved it),
    // so abandoning a load cannot throw. Throws `logic_error` for an unknown id. O(parts + pages).
    template <class Target, class Install, class MoveSwa>
    LoadLeftovers finish(std::uint64_t id, bool copied, Target&& target, Install&& install, MoveSwa&& move_swa) {
        const auto it = find(id);
        UNIKV_EXPECTS(it != records_.end(), "finish_load: no load ", id, " is recorded");
        Record& r = *it;
        const auto slice = [](const std::vector<VirtualPage>& v, const Part& p) {
            return std::span<const VirtualPage>(v).subspan(p.offset, p.pages);
        };
        const auto append = [](std::vector<VirtualPage>& to, std::span<const VirtualPage> pages) {
            to.insert(to.end(), pages.begin(), pages.end());
        };
        // Installs `p`; what it took is recorded even when the install throws after it changed the node.
        const auto install_part = [&](Part& p, const LoadedValue& value) {
            const auto took = [&] {
                if (p.component == Component::full) std::fill_n(r.taken.begin() + p.offset, p.pages, true);
                if (p.component == Component::mamba) r.state_taken = true;
                p.done = true;
            };
            try {
                install(p.node, p.component, value);
            } catch (...) {
                if (target(p.node).device[p.component]) took();
                throw;
            }
            took();
        };
        for (Part& p : r.parts) {
            if (p.done) continue;
            const LoadTarget t = target(p.node);
            const Component c = p.component;
            const bool wanted = copied && !t.device[c] && t.host[c];
            if (c == Component::full) {
                if (wanted && t.parent_full) install_part(p, LoadedValue{.pages = slice(r.full, p), .state = {}});
            } else if (c == Component::swa && p.resident) {
                if (wanted && std::ranges::equal(t.pages, slice(r.under, p))) {
                    install_part(p, LoadedValue{});
                } else {
                    append(r.spare_swa, slice(r.under, p));
                }
            } else if (c == Component::swa) {
                const bool ours = r.taken[p.offset];  // the FULL part of the same pages was installed
                if (wanted && ours) {
                    install_part(p, LoadedValue{});
                } else if (wanted && !t.pages.empty()) {  // the node's FULL came another way: move the rows there
                    if (!p.moved) {
                        move_swa(t.pages, slice(r.full, p));
                        p.moved = true;
                    }
                    install_part(p, LoadedValue{});
                } else if (ours) {  // the FULL pages stay the node's, without these rows
                    append(r.spare_swa, slice(r.full, p));
                }  // otherwise they go with their FULL pages
            } else if (wanted && t.device[Component::full]) {
                install_part(p, LoadedValue{.pages = {}, .state = r.state});
            }
            p.done = true;
        }
        spare_full_.clear();
        for (std::size_t i = 0; i < r.full.size(); ++i) {
            if (!r.taken[i]) spare_full_.push_back(r.full[i]);
        }
        spare_swa_.clear();
        spare_swa_.swap(r.spare_swa);
        const StateId spare_state = r.state_taken ? StateId{} : r.state;
        recycle(it);
        return {.full = spare_full_, .swa = spare_swa_, .state = spare_state};
    }

    // What is wrong with the records (appended to `out`): each part names a live node (`alive`) and covers it
    // whole (`length`) within its record's pages. O(parts).
    template <class Alive, class Length>
    void verify(std::vector<std::string>& out, std::int32_t page_tokens, Alive&& alive, Length&& length) const {
        for (const Record& r : records_) {
            for (const Part& p : r.parts) {
                const std::string where = detail::concat("load ", r.id, ", ", to_string(p.component), " of node ",
                                                         p.node.index(), ": ");
                if (!alive(p.node)) {
                    out.push_back(where + "the node is gone");
                    continue;
                }
                if (p.component == Component::mamba) continue;
                const auto want = static_cast<std::uint32_t>(length(p.node) / page_tokens);
                const std::size_t limit = p.component == Component::swa && p.resident ? r.under.size() : r.full.size();
                if (p.pages != want || p.offset + p.pages > limit) {
                    out.push_back(detail::concat(where, p.pages, " pages at ", p.offset, " for a node of ", want,
                                                 " pages (", limit, " recorded)"));
                }
            }
        }
    }

private:
    struct Part {
        NodeRef node{};
        Component component = Component::full;
        bool resident = false;     // SWA: bound under the node's resident FULL pages (`under`), not `full`
        std::uint32_t offset = 0;  // first page in `full` (FULL, SWA not resident) or `under` (SWA resident)
        std::uint32_t pages = 0;
        bool done = false;         // decided by `finish` (installed, or handed back)
        bool moved = false;        // SWA: its rows were moved under the node's own FULL pages (`move_swa`)
    };
    struct Record {
        std::uint64_t id = 0;
        std::vector<VirtualPage> full;   // the destination FULL pages, plan order
        std::vector<VirtualPage> under;  // resident FULL pages SWA rows were bound under
        StateId state{};
        std::vector<Part> parts;         // top-down, FULL before SWA before Mamba on a node
        // Kept by `finish` across a throw: destination FULL pages installed, SWA rows to free.
        std::vector<bool> taken;
        std::vector<VirtualPage> spare_swa;
        bool state_taken = false;
    };

    // An empty record, with the buffers of a finished one when there is one.
    [[nodiscard]] Record recycled() {
        if (spare_records_.empty()) return Record{};
        Record r = std::move(spare_records_.back());
        spare_records_.pop_back();
        r.full.clear();
        r.under.clear();
        r.parts.clear();
        r.taken.clear();
        r.spare_swa.clear();
        r.state_taken = false;
        return r;
    }
    // Forgets the record at `it`, keeping its buffers for the next `begin` (at most a few: the loads in flight).
    void recycle(std::vector<Record>::iterator it) noexcept {
        if (spare_records_.size() < spare_records_.capacity()) spare_records_.push_back(std::move(*it));
        records_.erase(it);
    }

    [[nodiscard]] std::vector<Record>::iterator find(std::uint64_t id) {
        return std::find_if(records_.begin(), records_.end(), [&](const Record& r) { return r.id == id; });
    }

    std::vector<Record> records_;
    std::vector<Record> spare_records_;  // finished records whose buffers `begin` reuses
    std::vector<VirtualPage> spare_full_, spare_swa_;  // `finish`'s result
};

}  // namespace unikv::detail::tree

#pragma once
/// \file
/// `ForwardHazard`: what the allocator knows about the forward pass that may still be running on the
/// device: its done event, and the virtual pages (and Mamba state slots) it writes. Compaction never moves a
/// page a running forward writes (a non-urgent flush stops before it; an urgent one, and every float or eager
/// move, first makes its stream wait the done event), and a moved source page that the running forward may
/// still read is reused only once the event has fired (pending reuse).

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include <unikv/component.hpp>
#include <unikv/ids.hpp>

namespace unikv {

template <class Backend>
class ForwardHazard {
public:
    using stream_ref = typename Backend::stream_ref;
    using event_ref = typename Backend::event_ref;

    /// A hazard tracker for virtual page ids below `num_page_ids` and state ids below `num_state_ids`.
    ForwardHazard(std::int32_t num_page_ids, std::int32_t num_state_ids)
        : page_marks_(static_cast<std::size_t>(num_page_ids > 0 ? num_page_ids : 0), 0),
          state_marks_(static_cast<std::size_t>(num_state_ids > 0 ? num_state_ids : 0), 0) {}

    /// Registers the latest forward: `done` fires when it finished; it writes `pages` (FULL and SWA rows of
    /// those virtual pages) and `states`. Replaces the previous registration. O(writes); no allocation once
    /// the internal lists reached their peak size. Ids out of range are ignored.
    void set(event_ref done, std::span<const VirtualPage> pages, std::span<const StateId> states) {
        clear();
        done_ = std::move(done);
        registered_ = true;
        mark(page_marks_, written_pages_, pages);
        mark(state_marks_, written_states_, states);
    }
    /// Forgets the registered forward.
    void clear() noexcept {
        for (std::int32_t v : written_pages_) page_marks_[static_cast<std::size_t>(v)] = 0;
        for (std::int32_t v : written_states_) state_marks_[static_cast<std::size_t>(v)] = 0;
        written_pages_.clear();
        written_states_.clear();
        registered_ = false;
    }
    /// True while a registered forward may still run (its event has not fired). Never blocks.
    [[nodiscard]] bool running() const { return registered_ && !done_.query(); }
    /// True when the registered forward writes virtual id `v` of component `c`.
    [[nodiscard]] bool writes(Component c, std::int32_t v) const noexcept {
        const std::vector<std::uint8_t>& marks = c == Component::mamba ? state_marks_ : page_marks_;
        return registered_ && v >= 0 && static_cast<std::size_t>(v) < marks.size() && marks[static_cast<std::size_t>(v)] != 0;
    }
    /// The done event (meaningful only while `running()`).
    [[nodiscard]] const event_ref& event() const noexcept { return done_; }
    /// Makes `stream` wait the done event (a stream dependency, no host block).
    void wait(stream_ref stream) const { stream.wait(done_); }

private:
    template <class Id>
    static void mark(std::vector<std::uint8_t>& marks, std::vector<std::int32_t>& list, std::span<const Id> ids) {
        for (Id id : ids) {
            const std::int32_t v = id.value();
            if (v < 0 || static_cast<std::size_t>(v) >= marks.size() || marks[static_cast<std::size_t>(v)] != 0) continue;
            marks[static_cast<std::size_t>(v)] = 1;
            list.push_back(v);
        }
    }

    event_ref done_{};
    bool registered_ = false;
    std::vector<std::uint8_t> page_marks_;
    std::vector<std::uint8_t> state_marks_;
    std::vector<std::int32_t> written_pages_;
    std::vector<std::int32_t> written_states_;
};

}  // namespace unikv

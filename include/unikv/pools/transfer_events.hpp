#pragma once
/// \file
/// `TransferEvents`: the completion events of host<->device transfers (the cache's loads and writes) that every
/// page move must be ordered after. Keys are (owner, direction); registering a key again replaces its event.
/// Waiting is a stream dependency (`stream.wait(event)`), never a host block.

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace unikv {

/// The direction of a host<->device transfer.
enum class TransferDirection : std::uint8_t {
    load,   ///< host to device (load-back); registering its event submits every pending reservation
    write,  ///< device to host (backup)
};

/// Identifies one transfer stream of one controller: `owner` is any caller-chosen id.
struct TransferKey {
    std::uint64_t owner = 0;
    TransferDirection direction = TransferDirection::load;
    friend constexpr bool operator==(const TransferKey&, const TransferKey&) noexcept = default;
};

/// The registered transfer-done events of one allocator. `Backend` gives the stream and event handles.
template <class Backend>
class TransferEvents {
public:
    using stream_ref = typename Backend::stream_ref;
    using event_ref = typename Backend::event_ref;

    /// Records `event` under `key`, replacing an older event of the same key. Queues nothing. O(keys).
    void set(TransferKey key, event_ref event) {
        for (auto& [k, e] : events_) {
            if (k == key) {
                e = std::move(event);
                return;
            }
        }
        events_.emplace_back(key, std::move(event));
    }
    /// Registered events not yet waited on.
    [[nodiscard]] std::size_t size() const noexcept { return events_.size(); }
    [[nodiscard]] bool empty() const noexcept { return events_.empty(); }
    /// True when an event is registered under `key`.
    [[nodiscard]] bool contains(TransferKey key) const noexcept {
        for (const auto& entry : events_) {
            if (entry.first == key) return true;
        }
        return false;
    }
    /// Makes `stream` wait every registered event, then forgets them: work queued on `stream` afterwards runs
    /// after every transfer registered so far. Stream dependencies only, no host block. O(keys).
    void wait_all(stream_ref stream) {
        for (const auto& entry : events_) stream.wait(entry.second);
        events_.clear();
    }

private:
    std::vector<std::pair<TransferKey, event_ref>> events_;
};

}  // namespace unikv

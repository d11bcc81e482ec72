#pragma once
// Counts dropped results (`unikv/dropped.hpp`) instead of letting the default handler abort, for as long as it
// lives: tests that drop a result on purpose install one and check what was reported.

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>

#include <unikv/dropped.hpp>

namespace unikv::test {

/// Installs a counting handler (one count per `Dropped` kind) and restores the previous handler when destroyed.
/// One at a time: the counts are process-wide, as the handler is.
class DropCounter {
public:
    DropCounter() noexcept : previous_(set_dropped_handler(&count)) {
        for (auto& c : counts()) c.store(0);
    }
    ~DropCounter() { (void)set_dropped_handler(previous_); }
    DropCounter(const DropCounter&) = delete;
    DropCounter& operator=(const DropCounter&) = delete;

    /// Reports of kind `what` since construction.
    [[nodiscard]] std::int64_t operator[](Dropped what) const noexcept {
        return counts()[static_cast<std::size_t>(what)].load();
    }
    /// Reports of every kind since construction.
    [[nodiscard]] std::int64_t total() const noexcept {
        std::int64_t sum = 0;
        for (const auto& c : counts()) sum += c.load();
        return sum;
    }

private:
    static constexpr std::size_t kinds = static_cast<std::size_t>(Dropped::load_ticket) + 1;
    static std::array<std::atomic<std::int64_t>, kinds>& counts() noexcept {
        static std::array<std::atomic<std::int64_t>, kinds> c{};
        return c;
    }
    static void count(Dropped what) noexcept { counts()[static_cast<std::size_t>(what)].fetch_add(1); }

    DroppedHandler previous_;
};

}  // namespace unikv::test

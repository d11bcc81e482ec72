// expect: unikv: a storage backend needs std::span<const StorageDone> poll
// Sharing a type that is not a storage backend (here, one without poll) is refused with the member it lacks named;
// the control shares a complete one.
#include <chrono>
#include <cstddef>
#include <span>

#include <unikv/storage/shared_storage.hpp>

struct Store {
    static constexpr bool needs_separate_pools = true;
    unikv::StorageTicket exists(std::span<const unikv::ObjectKey>) { return {}; }
    unikv::StorageTicket get(std::span<const unikv::ObjectRead>) { return {}; }
    unikv::StorageTicket put(std::span<const unikv::ObjectWrite>) { return {}; }
#ifdef UNIKV_COMPILE_FAIL_CONTROL
    std::span<const unikv::StorageDone> poll(std::chrono::nanoseconds = {}) { return {}; }
#endif
    [[nodiscard]] std::size_t in_flight() const { return 0; }
    [[nodiscard]] unikv::StorageStats stats() const { return {}; }
};
static_assert(sizeof(unikv::SharedStorage<Store>) > 0);
int main() {
    unikv::SharedStorage<Store> shared{Store{}};
    unikv::StorageShare<Store> share = shared.share();
    (void)share.in_flight();
}

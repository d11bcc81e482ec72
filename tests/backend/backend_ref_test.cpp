#include <doctest/doctest.h>

#include <cstring>
#include <type_traits>
#include <vector>

#include <unikv/backend/backend_ref.hpp>
#include <unikv/backend/host_backend.hpp>

using namespace unikv;

static_assert(std::is_trivially_copyable_v<backend_ref<HostBackend>>);
static_assert(sizeof(backend_ref<HostBackend>) == sizeof(HostBackend*));
static_assert(std::is_convertible_v<HostBackend&, backend_ref<HostBackend>>);
static_assert(!std::is_constructible_v<backend_ref<HostBackend>, HostBackend&&>);  // never a temporary

TEST_CASE("a backend_ref forwards buffers, copies between memory spaces, fills and counts to its backend") {
    HostBackend backend({.mode = ExecutionMode::manual});
    const backend_ref<HostBackend> ref = backend;
    const backend_ref<HostBackend> copy = ref;
    CHECK(copy == ref);
    CHECK(&copy.get() == &backend);

    HostBackend::Stream stream = ref.make_stream();
    HostBackend::DeviceBuffer arena = ref.allocate_device(4 * 64);
    HostBackend::PinnedBuffer host = ref.allocate_pinned(4 * 64);
    for (std::size_t i = 0; i < host.size(); ++i) host.data()[i] = static_cast<std::byte>(i * 7 + 1);

    const std::vector<std::int32_t> src{0, 1, 2};
    const std::vector<std::int32_t> dst{3, 1, 0};
    copy.copy_pages_async(host.region(), src, arena.region(), dst, 64, stream);
    copy.fill_pages_async(host.region(), std::vector<std::int32_t>{3}, 64, std::byte{0x5A}, stream);
    HostBackend::Event done = ref.make_event();
    done.ref().record(stream);
    CHECK(ref.counters().copies_queued == 2);
    CHECK(arena.data()[3 * 64] == std::byte{0});  // manual mode: nothing ran yet
    done.ref().synchronize();
    for (std::size_t k = 0; k < src.size(); ++k) {
        CHECK(std::memcmp(arena.data() + static_cast<std::size_t>(dst[k]) * 64,
                          host.data() + static_cast<std::size_t>(src[k]) * 64, 64) == 0);
    }
    CHECK(host.data()[3 * 64 + 17] == std::byte{0x5A});
    CHECK(ref.counters().host_synchronizations == backend.counters().host_synchronizations);
    CHECK(ref.counters().bytes_copied == 4 * 64);
}

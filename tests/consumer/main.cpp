// Builds against the umbrella header and moves one page, so a broken install or include path fails here.
#include <cstdio>
#include <cstring>
#include <vector>

#include <unikv/unikv.hpp>

int main() {
    unikv::HostBackend backend;
    auto stream = backend.make_stream();
    auto arena = backend.allocate_device(8 * 64);
    std::memset(arena.data() + 2 * 64, 0x42, 64);
    const std::vector<std::int32_t> src{2}, dst{5};
    backend.copy_pages_async(arena.region(), src, arena.region(), dst, 64, stream);
    stream.ref().synchronize();
    const bool ok = arena.data()[5 * 64 + 63] == std::byte{0x42};
    std::printf("unikv consumer (%s): %s\n", UNIKV_CONSUMER_MODE, ok ? "ok" : "FAILED");
    return ok ? 0 : 1;
}

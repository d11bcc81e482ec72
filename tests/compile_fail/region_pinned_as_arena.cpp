// expect: could not convert .* from .*MemorySpace::pinned_host.* to .*MemorySpace::device
// A pinned host pool cannot stand for the arena: regions carry their memory space, and what expects the arena
// takes a device_region_ref only (copies take any pair of spaces).
#include <unikv/backend/host_backend.hpp>
#include <unikv/pools/layouts.hpp>
#include <unikv/pools/unified_allocator.hpp>

using namespace unikv;

// Engine code that writes into the arena, as a kernel launcher does.
void write_rows(device_region_ref arena);

void stage(HostBackend& backend, const UnifiedAllocator<SwaFullLayout, HostBackend>& alloc) {
    const HostBackend::PinnedBuffer host_pool = backend.allocate_pinned(4096);
    (void)alloc;
#ifdef UNIKV_COMPILE_FAIL_CONTROL
    write_rows(alloc.region());
#else
    write_rows(host_pool.region());
#endif
}

int main() {}

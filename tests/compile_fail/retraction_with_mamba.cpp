// expect: unikv: retraction into the host pool backs up FULL rows and the SWA window, but the layout has a Mamba pool
// Retracting a request of a layout with a Mamba pool is rejected at compile time, with one message; the
// control retracts the same request on SwaFullLayout.
#include <cstdint>

#include <unikv/backend/host_backend.hpp>
#include <unikv/host/separate_host_pools.hpp>
#include <unikv/pools/layouts.hpp>
#include <unikv/transfer/retraction.hpp>

using namespace unikv;

#ifdef UNIKV_COMPILE_FAIL_CONTROL
using L = SwaFullLayout;
#else
using L = MambaFullLayout;
#endif
using Host = SeparateHostPools::impl<HostBackend, L>;

void retract_one(UnifiedAllocator<L, HostBackend>& alloc, Host& host,
                 TransferController<HostBackend, Host, std::uint64_t>& ctl, const RetractionRequest& request) {
    RetractionBackup backup = retract(alloc, host, ctl, request, [](const HostAllocResult&) { return false; });
    backup.discard(host);
}

int main() {}

// expect: unikv: a host pool's impl<B, L> needs std::vector<std::string> verify\(\) const
// check_host_pool checks each protocol member of a host-pool policy's impl and names the missing one.
#include <string>
#include <vector>

#include <unikv/backend/host_backend.hpp>
#include <unikv/host/separate_host_pools.hpp>
#include <unikv/pools/layouts.hpp>

using namespace unikv;

template <class B, class L>
struct no_verify : SeparateHostPools::impl<B, L> {
    using SeparateHostPools::impl<B, L>::impl;
#ifndef UNIKV_COMPILE_FAIL_CONTROL
    std::vector<std::string> verify() const = delete;
#endif
};

struct NoVerify {
    template <class B, class L>
    using impl = no_verify<B, L>;
};

static_assert(check_host_pool<NoVerify, HostBackend, SwaFullLayout>());

int main() {}

// expect: unikv: a Backend needs event_ref::failed\(\)
// A backend whose events cannot report a failed copy is rejected: a transfer controller would commit it.
#include <unikv/backend/host_backend.hpp>

#ifdef UNIKV_COMPILE_FAIL_CONTROL
static_assert(unikv::detail::check_backend<unikv::HostBackend>());
#else
struct SilentEvents : unikv::HostBackend {
    struct event_ref : unikv::HostBackend::event_ref {
        bool failed() const = delete;
    };
};
static_assert(unikv::detail::check_backend<SilentEvents>());
#endif
int main() {}

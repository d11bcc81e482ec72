// expect: unikv: a Backend needs make_stream\(\) and make_event\(\)
// A backend that lacks one requirement is named by the static_assert for that requirement.
#include <unikv/backend/host_backend.hpp>

#ifdef UNIKV_COMPILE_FAIL_CONTROL
static_assert(unikv::detail::check_backend<unikv::HostBackend>());
#else
// Everything a backend needs except the stream and event factories.
struct NoFactories : unikv::HostBackend {
    void make_stream() = delete;
    void make_event() = delete;
};
static_assert(unikv::detail::check_backend<NoFactories>());
#endif
int main() {}

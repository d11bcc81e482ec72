// expect: use of deleted function
// A stream view bound to a temporary owner would dangle once the statement ends: it does not compile. The
// control keeps the owner alive, binds its view, and synchronizes through the owner.
#include <unikv/backend/host_backend.hpp>

int main() {
    unikv::HostBackend backend;
#ifdef UNIKV_COMPILE_FAIL_CONTROL
    const unikv::HostBackend::Stream owner = backend.make_stream();
    const unikv::HostBackend::stream_ref view = owner;
    view.synchronize();
    owner.synchronize();
#else
    const unikv::HostBackend::stream_ref view = backend.make_stream();
    view.synchronize();
#endif
}

// expect: unikv: a host mode says whether host copies are matched
// A host-mode tag that does not say whether host copies are matched is rejected, with one message; the
// control checks CacheMode.
#include <unikv/transfer/host_mode.hpp>

#ifdef UNIKV_COMPILE_FAIL_CONTROL
using Mode = unikv::CacheMode;
#else
struct Mode {};
#endif

static_assert(unikv::check_host_mode<Mode>());

int main() {}

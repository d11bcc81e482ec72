// expect: unikv: a write policy backs up either on insert \(write_through_threshold >= 1\) or on eviction
// A write-policy tag that says neither when to back up on insert nor that eviction backs up is rejected where
// a cache checks it, with one message; the control checks WriteBack.
#include <unikv/transfer/write_policies.hpp>

#ifdef UNIKV_COMPILE_FAIL_CONTROL
using Policy = unikv::WriteBack;
#else
struct Policy {};
#endif

static_assert(unikv::check_write_policy<Policy>());

int main() {}

// expect: unikv: WriteThroughSelective<Threshold> backs up on the Threshold-th hit, so it needs Threshold >= 1
// A selective write-through that would back up on the zeroth hit is rejected, with one message; the control
// uses the default threshold.
#include <unikv/transfer/write_policies.hpp>

#ifdef UNIKV_COMPILE_FAIL_CONTROL
using Policy = unikv::WriteThroughSelective<>;
#else
using Policy = unikv::WriteThroughSelective<0>;
#endif

Policy policy;  // completes the class, which checks its threshold

int main() {}

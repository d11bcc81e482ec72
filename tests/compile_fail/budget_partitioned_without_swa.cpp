// expect: unikv: PartitionedSWABudget splits Full and Swa statically, so it needs a layout with both pools; use PartitionedMambaBudget
// A static FULL/SWA split over a FULL+Mamba layout is rejected with one message; the fix it names
// (PartitionedMambaBudget) builds.
#include <unikv/budget/partitioned_mamba_budget.hpp>
#include <unikv/budget/partitioned_swa_budget.hpp>
#include <unikv/pools/layouts.hpp>

using namespace unikv;

#ifdef UNIKV_COMPILE_FAIL_CONTROL
using Budget = budget_t<PartitionedMambaBudget, MambaFullLayout>;
#else
using Budget = budget_t<PartitionedSWABudget, MambaFullLayout>;
#endif

int main() { return static_cast<int>(sizeof(Budget) == 0); }

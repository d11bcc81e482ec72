// expect: unikv: PartitionedMambaBudget splits Full and Mamba statically, so it needs a layout with both pools and no Swa
// A static FULL/Mamba split over the tri-pool is rejected with one message; the fix it names
// (PartitionedSWABudget, which bounds Mamba too) builds.
#include <unikv/budget/partitioned_mamba_budget.hpp>
#include <unikv/budget/partitioned_swa_budget.hpp>
#include <unikv/pools/layouts.hpp>

using namespace unikv;

#ifdef UNIKV_COMPILE_FAIL_CONTROL
using Budget = budget_t<PartitionedSWABudget, TriPoolLayout>;
#else
using Budget = budget_t<PartitionedMambaBudget, TriPoolLayout>;
#endif

int main() { return static_cast<int>(sizeof(Budget) == 0); }

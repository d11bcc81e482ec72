// expect: unikv: SharedHybridBudget budgets Full, Swa and Mamba jointly, so it needs a layout with all three pools
// The hybrid budget over a FULL+SWA layout (no Mamba pool) is rejected with one message; the fix it names
// (SharedSWABudget) builds.
#include <unikv/budget/shared_hybrid_budget.hpp>
#include <unikv/budget/shared_swa_budget.hpp>
#include <unikv/pools/layouts.hpp>

using namespace unikv;

#ifdef UNIKV_COMPILE_FAIL_CONTROL
using Budget = budget_t<SharedSWABudget, SwaFullLayout>;
#else
using Budget = budget_t<SharedHybridBudget, SwaFullLayout>;
#endif

int main() { return static_cast<int>(sizeof(Budget) == 0); }

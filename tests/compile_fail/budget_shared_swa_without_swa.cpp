// expect: unikv: SharedSWABudget needs a layout with both Full and Swa pools
// A joint FULL+SWA budget over a FULL-only layout is rejected with one message; the fix it names (BaseBudget)
// builds.
#include <unikv/budget/base_budget.hpp>
#include <unikv/budget/shared_swa_budget.hpp>
#include <unikv/pools/layouts.hpp>

using namespace unikv;

#ifdef UNIKV_COMPILE_FAIL_CONTROL
using Budget = budget_t<BaseBudget, FullLayout>;
#else
using Budget = budget_t<SharedSWABudget, FullLayout>;
#endif

int main() { return static_cast<int>(sizeof(Budget) == 0); }

// expect: unikv: SharedSWABudget needs a layout with both Full and Swa pools
// The cache routes the budget rule to check_budget: the joint FULL+SWA budget over a Full+Mamba layout gets
// that one message. The control uses BaseBudget.
#include <unikv/backend/host_backend.hpp>
#include <unikv/budget/shared_swa_budget.hpp>
#include <unikv/cache.hpp>

struct Policies : unikv::DefaultCachePolicies {
    using backend = unikv::HostBackend;
    using layout = unikv::MambaFullLayout;
#ifdef UNIKV_COMPILE_FAIL_CONTROL
    using budget = unikv::BaseBudget;
#else
    using budget = unikv::SharedSWABudget;
#endif
};
static_assert(sizeof(unikv::Cache<Policies>) > 0);
int main() {}

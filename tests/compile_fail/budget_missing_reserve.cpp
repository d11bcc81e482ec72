// expect: unikv: a budget's impl<L> needs void reserve\(const CapacityView&, const PrefillAsk&\)
// A budget that selects and prepares but never charges the step is rejected with one message naming the
// missing call; the control adds it and builds.
#include <unikv/budget/base_budget.hpp>
#include <unikv/budget/budget_concept.hpp>
#include <unikv/pools/layouts.hpp>

using namespace unikv;

struct ForgetfulBudget {
    template <class L>
    struct impl : detail::step_state {
        static constexpr bool load_back_needs_full_tokens = false;
        explicit impl(const BudgetConfig&) noexcept {}
        [[nodiscard]] Selection check_prefill(const CapacityView&, const PrefillAsk& a) const { return {{}, a}; }
        [[nodiscard]] Reclaim prepare_load_back(const CapacityView&, const LoadBackAsk&) const { return {}; }
#ifdef UNIKV_COMPILE_FAIL_CONTROL
        void reserve(const CapacityView&, const PrefillAsk&) noexcept {}
#endif
    };
};

using Budget = budget_t<ForgetfulBudget, FullLayout>;

int main() { return static_cast<int>(sizeof(Budget) == 0); }

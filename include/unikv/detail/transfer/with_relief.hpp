#pragma once
// The one retry loop of every allocation that can be relieved (device pages, host pages, a load-back's
// destinations, a retraction's host pages): allocate, and while it falls short and the relief frees something,
// allocate again.

#include <utility>

namespace unikv::detail {

// Runs `attempt` (returning a result that converts to false on a shortfall) until it succeeds or
// `relieve(shortfall)` returns false (it freed nothing). Every round that goes on frees something, so the rounds
// are bounded by what can be freed. Returns the last attempt's result.
template <class Attempt, class Relieve>
auto with_relief(Attempt&& attempt, Relieve&& relieve) {
    for (;;) {
        auto r = attempt();  // returned, never reassigned: nvcc flags assigning a [[nodiscard]] result type
        if (r || !relieve(std::as_const(r))) return r;
    }
}

}  // namespace unikv::detail

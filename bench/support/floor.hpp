#pragma once
// Floors measured in the same binary, so every benchmark reports a ratio that holds across machines.

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <functional>
#include <map>

namespace unikv::bench {

// Best-of-`repeats` seconds for one call of `fn` (after one warm-up call).
inline double best_seconds(const std::function<void()>& fn, int repeats = 7) {
    fn();
    double best = 1e30;
    for (int i = 0; i < repeats; ++i) {
        const auto t0 = std::chrono::steady_clock::now();
        fn();
        const auto t1 = std::chrono::steady_clock::now();
        best = std::min(best, std::chrono::duration<double>(t1 - t0).count());
    }
    return best;
}

// Memoizes a floor per key (for example bytes per iteration), measured once per process.
class FloorCache {
public:
    double get(std::size_t key, const std::function<double()>& measure) {
        auto it = cache_.find(key);
        if (it == cache_.end()) it = cache_.emplace(key, measure()).first;
        return it->second;
    }

private:
    std::map<std::size_t, double> cache_;
};

}  // namespace unikv::bench

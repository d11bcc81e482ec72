#pragma once
// Environment overrides of the randomized tests (seed, length, tracing), so a failing run can be replayed.

#include <cstdint>
#include <cstdlib>

namespace unikv::test {

/// The unsigned number in environment variable `name`, or `fallback` when it is unset or empty.
inline std::uint64_t env_or(const char* name, std::uint64_t fallback) {
    const char* v = std::getenv(name);
    return v != nullptr && *v != '\0' ? std::strtoull(v, nullptr, 10) : fallback;
}

}  // namespace unikv::test

#pragma once
/// \file
/// The one exception of the simulator's inputs: a trace line, a generator setting or a command-line value that
/// the simulator cannot use. Its message names the place (`file:line: field ...` or `--flag: ...`), so `main`
/// prints it as it is and exits non-zero.

#include <charconv>
#include <concepts>
#include <stdexcept>
#include <string>

#include <unikv/error.hpp>

namespace unikv::sim {

/// Bad input from the user: a malformed trace, an out-of-range setting, an unknown name.
class InputError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

/// Concatenates message parts: strings, integers, enums and floating-point numbers (shortest round-trip form).
template <class... Parts>
[[nodiscard]] std::string message(const Parts&... parts) {
    std::string out;
    const auto append = [&out]<class T>(const T& part) {
        if constexpr (std::floating_point<T>) {
            char buf[32];
            out.append(buf, std::to_chars(buf, buf + sizeof buf, part).ptr);
        } else {
            unikv::detail::append_part(out, part);
        }
    };
    (append(parts), ...);
    return out;
}

}  // namespace unikv::sim

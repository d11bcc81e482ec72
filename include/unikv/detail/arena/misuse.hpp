#pragma once
/// \file
/// `misuse`: throws the `logic_error` of a broken precondition found by a helper on behalf of a public call,
/// so the message names the call the caller made (`unikv: <call>: ...`), not the helper.

#include <unikv/error.hpp>

namespace unikv::detail {

template <class... Parts>
[[noreturn]] void misuse(const char* call, const Parts&... parts) {
    throw logic_error(concat("unikv: ", call, ": ", parts...));
}

}  // namespace unikv::detail

#pragma once
/// \file
/// Exception types and the precondition / invariant macros.
///
/// * A broken precondition is a caller bug (double free, freeing a tombstone, a bad id): `UNIKV_EXPECTS`
///   throws `unikv::logic_error` with a message that names the call, the failed condition and the bad value.
/// * An internal invariant that cannot fail unless unikv itself is wrong: `UNIKV_ASSERT` (debug builds).
/// * Environment failures: `unikv::cuda_error`, `unikv::out_of_memory`, `unikv::transfer_error` (a copy a
///   request needed failed).
/// Expected outcomes (no room, prefix miss, gated) are return values, never exceptions.

#include <charconv>
#include <concepts>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include <unikv/config.hpp>

namespace unikv {

/// A caller broke a documented precondition. The object that threw is unchanged.
class logic_error : public std::logic_error {
public:
    using std::logic_error::logic_error;
};

/// A CUDA runtime call failed. The message carries the call and the CUDA error string.
class cuda_error : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

/// A copy that a request needed failed (a load-back of its prefix): nothing wrong was served, the request
/// must be admitted again.
class transfer_error : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

/// Device or host memory could not be obtained from the system. A `std::bad_alloc`, so an engine's existing
/// out-of-memory handlers catch it; `what()` carries the call and the size asked for.
class out_of_memory : public std::bad_alloc {
public:
    explicit out_of_memory(std::string message) : message_(std::move(message)) {}
    [[nodiscard]] const char* what() const noexcept override { return message_.c_str(); }

private:
    std::string message_;
};

namespace detail {

template <class T>
concept has_value_member = requires(const T& t) {
    { t.value() } -> std::integral;
};

inline void append_part(std::string& out, std::string_view s) { out.append(s); }
inline void append_part(std::string& out, const char* s) { out.append(s); }
inline void append_part(std::string& out, bool b) { out.append(b ? "true" : "false"); }

template <class T>
    requires(std::integral<T> && !std::same_as<T, bool> && !std::same_as<T, char>)
void append_part(std::string& out, T v) {
    char buf[24];
    auto res = std::to_chars(buf, buf + sizeof buf, v);
    out.append(buf, res.ptr);
}

template <class T>
    requires(std::is_enum_v<T>)
void append_part(std::string& out, T v) {
    append_part(out, static_cast<std::underlying_type_t<T>>(v));
}

template <has_value_member T>
void append_part(std::string& out, const T& id) {
    append_part(out, id.value());
}

/// Concatenates message parts: strings, integers, enums, strong ids (`.value()`).
template <class... Parts>
std::string concat(const Parts&... parts) {
    std::string out;
    (append_part(out, parts), ...);
    return out;
}

/// Throws the `logic_error` of a broken precondition that a helper found on behalf of a public call, so the
/// message names the call the caller made (`unikv: <call>: ...`), not the helper.
template <class... Parts>
[[noreturn]] void misuse(const char* call, const Parts&... parts) {
    throw logic_error(concat("unikv: ", call, ": ", parts...));
}

[[noreturn]] inline void throw_precondition(const char* func, const char* cond, const std::string& detail) {
    throw logic_error(concat("unikv: ", func, ": precondition `", cond, "` failed", detail.empty() ? "" : ": ",
                             detail));
}

[[noreturn]] inline void assertion_failed(const char* file, int line, const char* cond) noexcept {
    std::fprintf(stderr, "unikv: internal invariant `%s` broken at %s:%d\n", cond, file, line);
    std::abort();
}

}  // namespace detail
}  // namespace unikv

/// Checks a caller precondition; on failure throws `unikv::logic_error` naming the enclosing function, the
/// condition and the message parts (strings, integers, strong ids), which are only formatted on failure.
#define UNIKV_EXPECTS(cond, ...)                                                                         \
    do {                                                                                                 \
        if (!(cond)) [[unlikely]]                                                                        \
            ::unikv::detail::throw_precondition(__func__, #cond, ::unikv::detail::concat(__VA_ARGS__)); \
    } while (false)

#if UNIKV_ASSERTS_ENABLED
/// Checks an internal invariant in debug builds; a failure aborts with the condition and location.
#define UNIKV_ASSERT(cond)                                                                     \
    do {                                                                                       \
        if (!(cond)) [[unlikely]]                                                              \
            ::unikv::detail::assertion_failed(__FILE__, __LINE__, #cond);                      \
    } while (false)
#else
#define UNIKV_ASSERT(cond) static_cast<void>(0)
#endif

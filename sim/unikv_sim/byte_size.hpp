#pragma once
/// \file
/// Memory sizes on the command line: `8GiB`, `512MiB`, `1.5TiB`, `40GB`, `4096`.
///
/// A size is a number with at most three decimals, optionally followed (a space between is allowed) by a unit:
/// `B`, binary `KiB` `MiB` `GiB` `TiB` (powers of 1024) or decimal `KB` `MB` `GB` `TB` (powers of 1000; `kB` too).
/// Units are case-sensitive, since `Mb` (megabit) and `MB` differ. A size must be a whole number of bytes,
/// greater than zero and below 2^64.

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

#include <unikv_sim/input_error.hpp>

namespace unikv::sim {

/// Parses `text` as a size in bytes. Throws `InputError` naming `flag` when `text` is not a size, is zero, is not
/// a whole number of bytes, or overflows 64 bits.
[[nodiscard]] inline std::uint64_t parse_bytes(std::string_view text, std::string_view flag) {
    const auto bad = [&](std::string_view why) {
        return InputError(message(flag, ": '", text, "' ", why,
                                  "; write a number and a unit, for example 8GiB, 512MiB, 1.5TiB, 40GB or 4096"));
    };
    std::size_t at = 0;
    std::uint64_t whole = 0;
    std::uint64_t frac = 0;  // the decimals as an integer over 10^frac_digits
    std::uint64_t frac_scale = 1;
    bool digits = false;
    for (; at < text.size() && text[at] >= '0' && text[at] <= '9'; ++at, digits = true) {
        if (__builtin_mul_overflow(whole, 10u, &whole) || __builtin_add_overflow(whole, text[at] - '0', &whole))
            throw bad("is too large");
    }
    if (at < text.size() && text[at] == '.') {
        for (++at; at < text.size() && text[at] >= '0' && text[at] <= '9'; ++at, digits = true) {
            if (frac_scale == 1000) throw bad("has more than three decimals");
            frac = frac * 10 + static_cast<std::uint64_t>(text[at] - '0');
            frac_scale *= 10;
        }
    }
    if (!digits) throw bad("is not a size");
    if (at < text.size() && text[at] == ' ') ++at;
    const std::string_view unit = text.substr(at);
    constexpr std::uint64_t k = 1000, ki = 1024;
    struct Unit {
        std::string_view name;
        std::uint64_t bytes;
    };
    constexpr Unit units[] = {{"", 1},           {"B", 1},
                              {"KiB", ki},       {"MiB", ki * ki},       {"GiB", ki * ki * ki},
                              {"TiB", ki * ki * ki * ki},
                              {"kB", k},         {"KB", k},              {"MB", k * k},
                              {"GB", k * k * k}, {"TB", k * k * k * k}};
    std::uint64_t scale = 0;
    for (const Unit& u : units)
        if (u.name == unit) scale = u.bytes;
    if (scale == 0) throw bad("has an unknown unit");
    std::uint64_t bytes = 0;
    if (__builtin_mul_overflow(whole, scale, &bytes)) throw bad("is too large");
    // frac < 1000 and scale <= 2^40, so the product fits.
    if (frac * scale % frac_scale != 0) throw bad("is not a whole number of bytes");
    if (__builtin_add_overflow(bytes, frac * scale / frac_scale, &bytes)) throw bad("is too large");
    if (bytes == 0) throw bad("is zero");
    return bytes;
}

/// `bytes` in the largest binary unit that shows it in at most three decimals, for example `8 GiB`,
/// `1.5 TiB`, `4097 B`.
[[nodiscard]] inline std::string format_bytes(std::uint64_t bytes) {
    constexpr std::string_view names[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    for (int u = 6; u > 0; --u) {
        const std::uint64_t scale = std::uint64_t{1} << (10 * u);
        if (bytes < scale) continue;
        const std::uint64_t milli = bytes % scale * 1000;  // < 2^64 for scales up to PiB
        if (u <= 5 && milli % scale != 0) continue;
        if (u == 6 && bytes % scale != 0) continue;
        const std::uint64_t whole = bytes / scale, frac = milli / scale;
        std::string out = std::to_string(whole);
        if (frac != 0) {
            std::string f = std::to_string(1000 + frac).substr(1);
            while (f.back() == '0') f.pop_back();
            out += "." + f;
        }
        return out + " " + std::string(names[u]);
    }
    return std::to_string(bytes) + " B";
}

/// `bytes` rounded to one decimal of the largest binary unit below it, for reports: `1.2 GiB`, `512.0 KiB`,
/// `0 B`.
[[nodiscard]] inline std::string format_bytes_rounded(std::uint64_t bytes) {
    constexpr std::string_view names[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    if (bytes < 1024) return std::to_string(bytes) + " B";
    int u = 0;
    double v = static_cast<double>(bytes) / 1024;
    while (v >= 1024 && u < 5) {
        v /= 1024;
        ++u;
    }
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1f %s", v, names[u].data());
    return buf;
}

}  // namespace unikv::sim

#pragma once
/// \file
/// How host capacity given as bytes becomes pages: `split_host_bytes` splits a total over the components of a
/// layout in proportion to their device bytes (`HostConfig::device_bytes`), the way upstream splits
/// `--hicache-size`, or by default to their bytes per cached token; `host_pages_for` resolves a whole
/// `HostConfig` (explicit page counts win). The envelope host needs no split: its sides share one buffer of
/// `host_arena_bytes` bytes. Each refuses a host too small for one page of every pool. Cold paths (construction).

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>

#include <unikv/arena/model.hpp>
#include <unikv/component.hpp>
#include <unikv/error.hpp>
#include <unikv/host/host_pool_concept.hpp>

namespace unikv {

namespace detail {

/// True when `config.pages` gives any page count; throws `logic_error` for a negative one, one for a
/// component outside `components`, or 0 for a component inside when another is given (every pool needs a page).
inline bool host_pages_given(ComponentMask components, const HostConfig& config) {
    bool given = false;
    for (Component c : all_components) {
        UNIKV_EXPECTS(config.pages[c] >= 0, "HostConfig::pages of ", to_string(c), " is ", config.pages[c],
                      "; give a page count >= 0");
        if (config.pages[c] == 0) continue;
        UNIKV_EXPECTS(components.has(c), "HostConfig::pages gives ", config.pages[c], " pages of ", to_string(c),
                      ", which has no host pages here; set it to 0");
        given = true;
    }
    for (Component c : all_components) {
        UNIKV_EXPECTS(!given || !components.has(c) || config.pages[c] > 0, "HostConfig::pages gives the ",
                      to_string(c), " host pool no page; give every pool at least one");
    }
    return given;
}

}  // namespace detail

/// The default weights of `split_host_bytes`: each component's device bytes per cached token, scaled by
/// `tokens_per_state` so they stay integral: FULL and SWA `page_bytes * tokens_per_state / page_tokens`, Mamba
/// one state's bytes (a state serves `tokens_per_state` tokens). Absent components weigh 0.
[[nodiscard]] inline per_component<std::size_t> bytes_per_cached_token(const ArenaSpec& device,
                                                                       ComponentMask components,
                                                                       std::int32_t tokens_per_state) {
    UNIKV_EXPECTS(tokens_per_state > 0, "HostConfig::tokens_per_state is ", tokens_per_state, "; give a count > 0");
    per_component<std::size_t> w{};
    for (Component c : all_components) {
        if (!components.has(c) || !device[c].present) continue;
        w[c] = c == Component::mamba ? device[c].page_bytes
                                     : device[c].page_bytes * static_cast<std::size_t>(tokens_per_state) /
                                           static_cast<std::size_t>(device[c].page_size);
    }
    return w;
}

/// Splits `total` host bytes over the components in `components` (each must be a pool of `device`): component
/// `c` gets `floor(total * w_c / W)` bytes, where `w_c = weights[c]` and `W` is the sum over `components`, and
/// so `floor(bytes_c / device[c].page_bytes)` pages. When every weight is 0 the weights are
/// `bytes_per_cached_token(device, components, tokens_per_state)`. Absent components get 0. Throws
/// `logic_error` for a component that is not a pool of `device`, a page count that overflows int32, or a
/// non-zero `total` that leaves a component without one page (the message names the least total that gives
/// each one).
/// Example: page bytes 128 (FULL) and 64 (SWA), weights 3:1, 1024 bytes: FULL 768 bytes = 6 pages, SWA 256
/// bytes = 4 pages.
[[nodiscard]] inline per_component<std::int32_t> split_host_bytes(
    std::size_t total, const ArenaSpec& device, ComponentMask components, per_component<std::size_t> weights,
    std::int32_t tokens_per_state = HostConfig{}.tokens_per_state) {
    std::size_t weight_sum = 0;
    for (Component c : all_components) {
        if (!components.has(c)) continue;
        UNIKV_EXPECTS(device[c].present && device[c].page_bytes > 0, "component ", to_string(c),
                      " is not a pool of the device arena; split only over the layout's pools");
        weight_sum += weights[c];
    }
    if (weight_sum == 0) {
        weights = bytes_per_cached_token(device, components, tokens_per_state);
        for (Component c : all_components) weight_sum += components.has(c) ? weights[c] : 0;
    }
    per_component<std::int32_t> pages{};
    for (Component c : all_components) {
        if (!components.has(c)) continue;
        // long double keeps the 64-bit product's leading bits exactly enough: the share is floored to a page.
        const auto share = static_cast<long double>(total) * static_cast<long double>(weights[c]) /
                           static_cast<long double>(weight_sum);
        const auto n = static_cast<std::size_t>(share) / device[c].page_bytes;
        UNIKV_EXPECTS(n <= static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max() - 1), "the ",
                      to_string(c), " host pool would have ", n, " pages, more than int32 ids can name; give fewer "
                      "host bytes");
        pages[c] = static_cast<std::int32_t>(n);
    }
    for (Component c : all_components) {
        if (total == 0 || !components.has(c) || pages[c] > 0) continue;
        std::size_t least = 0;  // the total whose share of every component is one whole page
        for (Component k : all_components) {
            if (!components.has(k) || weights[k] == 0) continue;
            const auto need = static_cast<long double>(device[k].page_bytes) * static_cast<long double>(weight_sum) /
                              static_cast<long double>(weights[k]);
            least = std::max(least, static_cast<std::size_t>(need) + 1);
        }
        detail::misuse("HostConfig", total, " host bytes give the ", to_string(c), " host pool no page (",
                       device[c].page_bytes, " bytes)", weights[c] == 0 ? ", and its weight is 0" : "",
                       "; give at least ", least, " bytes, or weights (device_bytes) that leave each pool a page");
    }
    return pages;
}

/// The host pages of each component in `components` that `config` asks for: `config.pages` when any entry is
/// non-zero (then an entry for a component outside `components` is a `logic_error`), else
/// `split_host_bytes(config.total_bytes, device, components, config.device_bytes)`.
[[nodiscard]] inline per_component<std::int32_t> host_pages_for(const ArenaSpec& device, ComponentMask components,
                                                                const HostConfig& config) {
    if (detail::host_pages_given(components, config)) return config.pages;
    return split_host_bytes(config.total_bytes, device, components, config.device_bytes, config.tokens_per_state);
}

/// The bytes of one host arena shared by the components in `components` (the envelope host): the sum of
/// `pages * page_bytes` when `config.pages` is given, else `config.total_bytes`, which must hold one page of
/// each component when it is not 0 (`logic_error` naming the least).
[[nodiscard]] inline std::size_t host_arena_bytes(const ArenaSpec& device, ComponentMask components,
                                                  const HostConfig& config) {
    if (!detail::host_pages_given(components, config)) {
        // One page of each side: FULL's pages lie on its own page grid above the other side's bytes.
        std::size_t below = 0;
        for (Component c : all_components) {
            if (c != Component::full && components.has(c)) below += device[c].page_bytes;
        }
        const std::size_t full = components.has(Component::full) ? device[Component::full].page_bytes : 0;
        const std::size_t least = full == 0 ? below : (detail::ceil_div(below, full) + 1) * full;
        UNIKV_EXPECTS(config.total_bytes == 0 || config.total_bytes >= least, "HostConfig::total_bytes is ",
                      config.total_bytes, ", less than one page of each component; give at least ", least, " bytes");
        return config.total_bytes;
    }
    std::size_t bytes = 0;
    for (Component c : all_components) bytes += static_cast<std::size_t>(config.pages[c]) * device[c].page_bytes;
    return bytes;
}

}  // namespace unikv

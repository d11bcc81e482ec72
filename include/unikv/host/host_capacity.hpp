#pragma once
/// \file
/// How host capacity given as bytes becomes pages: `split_host_bytes` splits a total over the components of a
/// layout in proportion to their device bytes (`HostConfig::device_bytes`), the way upstream splits
/// `--hicache-size`; `host_pages_for` resolves a whole `HostConfig` (explicit page counts win). The envelope
/// host needs no split: its sides share one buffer of `host_arena_bytes` bytes. Cold paths (construction).

#include <cstddef>
#include <cstdint>
#include <limits>

#include <unikv/arena/model.hpp>
#include <unikv/component.hpp>
#include <unikv/error.hpp>
#include <unikv/host/host_pool_concept.hpp>

namespace unikv {

namespace detail {

/// True when `config.pages` gives any page count; throws `logic_error` for a negative one or one for a
/// component outside `components`.
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
    return given;
}

}  // namespace detail

/// Splits `total` host bytes over the components in `components` (each must be a pool of `device`): component
/// `c` gets `floor(total * w_c / W)` bytes, where `w_c = weights[c]` and `W` is the sum over `components`, and
/// so `floor(bytes_c / device[c].page_bytes)` pages. When every weight is 0, `w_c = device[c].page_bytes`:
/// every component gets the same number of pages, `floor(total / sum of page_bytes)`. Absent components get 0.
/// Throws `logic_error` for a component that is not a pool of `device`, or a page count that overflows int32.
/// Example: page bytes 128 (FULL) and 64 (SWA), weights 3:1, 1024 bytes: FULL 768 bytes = 6 pages, SWA 256
/// bytes = 4 pages; weights 0:0: 1024 / 192 = 5 pages each.
[[nodiscard]] inline per_component<std::int32_t> split_host_bytes(std::size_t total, const ArenaSpec& device,
                                                                  ComponentMask components,
                                                                  const per_component<std::size_t>& weights) {
    std::size_t weight_sum = 0;
    std::size_t page_bytes_sum = 0;
    for (Component c : all_components) {
        if (!components.has(c)) continue;
        UNIKV_EXPECTS(device[c].present && device[c].page_bytes > 0, "component ", to_string(c),
                      " is not a pool of the device arena; split only over the layout's pools");
        weight_sum += weights[c];
        page_bytes_sum += device[c].page_bytes;
    }
    per_component<std::int32_t> pages{};
    const auto to_pages = [](Component c, std::size_t n) {
        UNIKV_EXPECTS(n <= static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max() - 1), "the ",
                      to_string(c), " host pool would have ", n, " pages, more than int32 ids can name; give fewer "
                      "host bytes");
        return static_cast<std::int32_t>(n);
    };
    for (Component c : all_components) {
        if (!components.has(c)) continue;
        if (weight_sum == 0) {
            pages[c] = to_pages(c, total / page_bytes_sum);
            continue;
        }
        // long double keeps the 64-bit product's leading bits exactly enough: the share is floored to a page.
        const auto bytes = static_cast<std::size_t>(static_cast<long double>(total) * static_cast<long double>(weights[c]) /
                                                    static_cast<long double>(weight_sum));
        pages[c] = to_pages(c, bytes / device[c].page_bytes);
    }
    return pages;
}

/// The host pages of each component in `components` that `config` asks for: `config.pages` when any entry is
/// non-zero (then an entry for a component outside `components` is a `logic_error`), else
/// `split_host_bytes(config.total_bytes, device, components, config.device_bytes)`.
[[nodiscard]] inline per_component<std::int32_t> host_pages_for(const ArenaSpec& device, ComponentMask components,
                                                                const HostConfig& config) {
    if (detail::host_pages_given(components, config)) return config.pages;
    return split_host_bytes(config.total_bytes, device, components, config.device_bytes);
}

/// The bytes of one host arena shared by the components in `components` (the envelope host): the sum of
/// `pages * page_bytes` when `config.pages` is given, else `config.total_bytes`.
[[nodiscard]] inline std::size_t host_arena_bytes(const ArenaSpec& device, ComponentMask components,
                                                  const HostConfig& config) {
    if (!detail::host_pages_given(components, config)) return config.total_bytes;
    std::size_t bytes = 0;
    for (Component c : all_components) bytes += static_cast<std::size_t>(config.pages[c]) * device[c].page_bytes;
    return bytes;
}

}  // namespace unikv

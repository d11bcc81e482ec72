#pragma once
/// \file
/// The cluster's request router (`--router`): which engine instance an arriving request goes to. A plain function
/// of what each instance reports at the arrival (`InstanceView`), so the choice is repeatable and testable alone.
///
/// * `round_robin`: instance `k mod N` for the `k`-th request, whatever the caches hold;
/// * `least_loaded`: the fewest prompt tokens waiting for their first admission (ties: the fewest requests
///   running, then the first from instance `k mod N` on, so idle instances take new work in turn);
/// * `prefix`: of the instances whose queue is at most `balance_tokens` prompt tokens longer than the least loaded
///   one's, the one whose cache holds the longest prefix of the request (device or host, `Cache::peek`), as
///   cache-aware routers do (SGLang's router, Dynamo's KV router, Mooncake's conductor); ties: the less loaded. A
///   request none of them holds any of goes to the least loaded.

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

namespace unikv::sim {

/// How the cluster routes a request (see the file comment).
enum class RouterChoice : std::uint8_t { round_robin, least_loaded, prefix };

/// Every router, in `--router` order.
inline constexpr RouterChoice all_routers[] = {RouterChoice::round_robin, RouterChoice::least_loaded,
                                               RouterChoice::prefix};

/// The command-line name of `r`.
[[nodiscard]] constexpr std::string_view router_name(RouterChoice r) noexcept {
    switch (r) {
        case RouterChoice::round_robin: return "round-robin";
        case RouterChoice::least_loaded: return "least-loaded";
        case RouterChoice::prefix: return "prefix";
    }
    return "?";
}

/// The router called `name`, or nothing.
[[nodiscard]] constexpr std::optional<RouterChoice> router_from_name(std::string_view name) noexcept {
    for (const RouterChoice r : all_routers)
        if (router_name(r) == name) return r;
    return std::nullopt;
}

/// The cluster's shape and routing.
struct ClusterConfig {
    std::int32_t instances = 1;  ///< engine instances, each its own cache
    RouterChoice router = RouterChoice::round_robin;
    /// `prefix`: how many more queued prompt tokens than the least loaded instance the prefix holder may have.
    std::int64_t balance_tokens = 32768;
};

/// What one instance reports to the router at an arrival.
struct InstanceView {
    std::int64_t queued_tokens = 0;  ///< prompt tokens of its requests waiting for their first admission
    std::int32_t running = 0;        ///< requests admitted and not finished (between chunks included)
    std::int32_t cached_prefix = 0;  ///< tokens of the request its cache holds (asked for the `prefix` router only)
};

/// The instance that takes the `arrival`-th request (0-based) under `config`, given each instance's view.
/// Precondition: `views` has `config.instances` (at least one) entries. O(instances).
[[nodiscard]] inline std::int32_t route(const ClusterConfig& config, std::span<const InstanceView> views,
                                        std::int64_t arrival) noexcept {
    const auto n = static_cast<std::int32_t>(views.size());
    if (config.router == RouterChoice::round_robin) return static_cast<std::int32_t>(arrival % n);
    const auto less_loaded = [&](std::int32_t a, std::int32_t b) {
        return views[a].queued_tokens != views[b].queued_tokens ? views[a].queued_tokens < views[b].queued_tokens
                                                                : views[a].running < views[b].running;
    };
    const auto first = static_cast<std::int32_t>(arrival % n);  // ties go to the first from here on
    std::int32_t least = first;
    for (std::int32_t k = 1; k < n; ++k) {
        const std::int32_t i = (first + k) % n;
        if (less_loaded(i, least)) least = i;
    }
    if (config.router == RouterChoice::least_loaded) return least;
    std::int32_t holder = least;  // within the threshold itself
    for (std::int32_t k = 0; k < n; ++k) {
        const std::int32_t i = (first + k) % n;
        if (views[i].queued_tokens - views[least].queued_tokens > config.balance_tokens) continue;
        if (views[i].cached_prefix > views[holder].cached_prefix ||
            (views[i].cached_prefix == views[holder].cached_prefix && less_loaded(i, holder)))
            holder = i;
    }
    return holder;
}

}  // namespace unikv::sim

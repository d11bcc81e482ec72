#pragma once
/// \file
/// The definition of `run_preset<P>` (`replay_run.hpp`), included by the per-preset translation units only.

#include <optional>
#include <string>
#include <string_view>
#include <type_traits>

#include <unistd.h>

#include <unikv/budget/partitioned_mamba_budget.hpp>
#include <unikv/budget/partitioned_swa_budget.hpp>
#include <unikv/budget/shared_hybrid_budget.hpp>
#include <unikv/budget/shared_swa_budget.hpp>
#include <unikv/cache.hpp>
#include <unikv/error.hpp>
#include <unikv/pools/layout.hpp>
#include <unikv/transfer/write_policies.hpp>

#include <unikv_sim/byte_size.hpp>
#include <unikv_sim/cost_model.hpp>
#include <unikv_sim/engine.hpp>
#include <unikv_sim/input_error.hpp>
#include <unikv_sim/progress.hpp>
#include <unikv_sim/replay_run.hpp>
#include <unikv_sim/replay_scale.hpp>
#include <unikv_sim/report.hpp>
#include <unikv_sim/static_split.hpp>
#include <unikv_sim/storage_spec.hpp>

namespace unikv::sim {
namespace detail {

/// The unified budget of layout `L`: FULL and SWA jointly, the tri-pool's three jointly, else the one pool.
template <class L>
using unified_budget_t = std::conditional_t<
    layout_has_v<L, Component::swa>,
    std::conditional_t<layout_has_v<L, Component::mamba>, SharedHybridBudget, SharedSWABudget>, BaseBudget>;

/// A budget's name, for the report.
template <class B>
inline constexpr std::string_view budget_name = "?";
template <>
inline constexpr std::string_view budget_name<BaseBudget> = "BaseBudget";
template <>
inline constexpr std::string_view budget_name<SharedSWABudget> = "SharedSWABudget";
template <>
inline constexpr std::string_view budget_name<SharedHybridBudget> = "SharedHybridBudget";

/// The simulator's cache bundle: the defaults with the preset's layout and a budget, and any store.
template <class P, class Budget>
struct SimPolicies : DefaultCachePolicies {
    using layout = typename P::layout;
    using budget = Budget;
    using storage = AnyStorage;  // `--storage` picks the store at run time
};

/// The host tier's write policy of `--write-policy`: `selective` backs a node up on its second hit.
[[nodiscard]] constexpr HostWrites host_writes(WritePolicyChoice p) noexcept {
    switch (p) {
        case WritePolicyChoice::through: return {.policy = WritePolicy::through};
        case WritePolicyChoice::selective: return {.policy = WritePolicy::selective, .threshold = 2};
        case WritePolicyChoice::back: return {.policy = WritePolicy::back};
    }
    return {.policy = WritePolicy::through};
}

template <class P, class Budget>
ReplayResult replay_with(const Trace& trace, const ReplaySetup& setup, const CostModel& cost, const SimOptions& o,
                         const RunSpec& spec) {
    std::optional<ProgressLine> line;
    if (!o.json) line.emplace(stderr, spec.label, static_cast<std::int64_t>(trace.requests().size()));
    const auto progress = [&](const ReplayProgress& p) {
        if (line) line->update(p.finished, p.steps, p.simulated_ms);
    };
    return replay<SimPolicies<P, Budget>>(trace, setup, cost, progress);
}

}  // namespace detail

namespace detail {

// Refuses, before anything is allocated, memory whose 1/`k` scale the replay would really allocate beyond half of
// this machine's memory (every instance's arena and host pools are real buffers), naming the largest memory per
// instance that fits.
inline void expect_fits(const SimOptions& o, std::uint64_t k) {
    const auto ram = static_cast<std::uint64_t>(::sysconf(_SC_PHYS_PAGES)) *
                     static_cast<std::uint64_t>(::sysconf(_SC_PAGE_SIZE));
    const std::uint64_t room = ram / 2;
    const auto n = static_cast<std::uint64_t>(o.cluster.instances);
    const std::uint64_t device = o.device_memory_bytes / k * n;
    const std::uint64_t host = o.host_memory_bytes / k * n;
    const auto whole_gib = [](std::uint64_t bytes) { return format_bytes(bytes >> 30 << 30); };  // a size to pass
    if (device > room)
        throw InputError(message("--device-memory: ", format_bytes(o.device_memory_bytes), " is ",
                                 format_bytes_rounded(device), " at the replay's 1/", k, " byte scale",
                                 n > 1 ? message(" over ", n, " instances") : std::string(),
                                 ", more than half of this machine's ", format_bytes_rounded(ram),
                                 "; the largest that fits is ", whole_gib(room / n * k)));
    if (host > room - device)
        throw InputError(message("--host-memory: ", format_bytes(o.host_memory_bytes), " is ",
                                 format_bytes_rounded(host), " at the replay's 1/", k, " byte scale",
                                 n > 1 ? message(" over ", n, " instances") : std::string(),
                                 ", which with the device's ", format_bytes_rounded(device),
                                 " is more than half of this machine's ", format_bytes_rounded(ram),
                                 "; the largest host memory that fits is ", whole_gib((room - device) / n * k)));
}

}  // namespace detail

template <class P>
RunOutput run_preset(const Trace& trace, const SimOptions& o, const RunSpec& spec) {
    using L = typename P::layout;
    check_built<P>(o);
    ReplaySetup setup;
    try {
        setup.cache = replay_cache_config<P>(o.device_memory_bytes, spec.host_tier ? o.host_memory_bytes : 0);
        setup.cache.host.write = detail::host_writes(o.write_policy);
        setup.byte_scale = replay_byte_scale<P>(o.device_memory_bytes);
        detail::expect_fits(o, setup.byte_scale);
        setup.engine.continue_outputs = !o.fresh_outputs;
        setup.cluster = o.cluster;
        setup.arrival_scale = o.arrival_scale;
        setup.cache.retention = o.retention;
        if (const std::int32_t page = setup.cache.arena.page_sizes.full.tokens; o.retention.every_tokens % page != 0) {
            throw InputError(message("--retain-every: ", o.retention.every_tokens, " is not a multiple of ", P::name,
                                     "'s ", page, "-token page"));
        }
    } catch (const logic_error& e) {
        throw InputError(message("--device-memory: ", format_bytes(o.device_memory_bytes),
                                 " cannot hold one request of ", P::name, ": ", e.what()));
    }
    std::optional<StorageSpec> storage;
    if (!o.storage.empty() && spec.host_tier && spec.storage_tier) storage = parse_storage(o.storage);
    Accelerator hw{.host_link_bytes_per_s = o.host_link_gbps * 1e9};
    if (storage) hw = storage_link_for(hw, storage->kind);
    const CostModel cost = CostModel::of<P>(hw);
    // The run's own empty store, its bound at the replay's scale like the memory's, shared by every instance.
    std::optional<SharedStorage<AnyStorage>> store;
    if (storage) {
        const std::string run =
            spec.budget == BudgetChoice::unified ? std::string("unified") : message("static-", spec.swa_full_ratio);
        const std::uint64_t bound = std::max<std::uint64_t>(1, o.storage_bytes / setup.byte_scale);
        store.emplace(open_store(*storage, bound, message(P::name, "-", run)));
        setup.storage = &*store;
        setup.storage_model = P::name;
    }
    if (spec.budget == BudgetChoice::unified) {
        using B = detail::unified_budget_t<L>;
        return {detail::replay_with<P, B>(trace, setup, cost, o, spec), std::string(detail::budget_name<B>)};
    }
    if constexpr (static_split_built<P>) {
        // SGLang's Mamba pool (3 states per running request) comes off the top; see static_split.hpp.
        const std::int64_t states = sglang_mamba_states_per_running_request * setup.engine.max_running;
        setup.cache.budget = static_split(setup.cache.arena, layout_components_v<L>, spec.swa_full_ratio, states);
        const BudgetConfig& split = setup.cache.budget;
        constexpr bool has_swa = P::model.swa.layers > 0;
        std::string words = message(
            has_swa ? "PartitionedSWABudget" : "PartitionedMambaBudget", ": FULL ",
            with_commas(split.full_partition_pages), " pages",
            has_swa ? message(", SWA ", with_commas(split.swa_partition_pages), " pages") : std::string{},
            split.mamba_partition_pages > 0 ? message(", Mamba ", with_commas(split.mamba_partition_pages), " states")
                                            : std::string{},
            has_swa ? message(" (SGLang swa_full_tokens_ratio ", spec.swa_full_ratio, ")")
                    : std::string(" (SGLang's state pool: 3 states per running request)"));
        using Split = std::conditional_t<has_swa, PartitionedSWABudget, PartitionedMambaBudget>;
        return {detail::replay_with<P, Split>(trace, setup, cost, o, spec), std::move(words)};
    } else {
        throw logic_error(message("unikv-sim: run_preset: no static split for ", P::name, "; check_built refuses it"));
    }
}

}  // namespace unikv::sim

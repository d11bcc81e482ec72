#pragma once
/// \file
/// The simulator's settings as plain data (`SimOptions`), and the name lookups the command line checks its
/// values with. `command_line.hpp` fills a `SimOptions` from argv; nothing here depends on the parser.

#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <variant>

#include <unikv/cache/retention.hpp>
#include <unikv/presets.hpp>

#include <unikv_sim/generators.hpp>
#include <unikv_sim/input_error.hpp>
#include <unikv_sim/router.hpp>

namespace unikv::sim {

/// The host tier's write policy (`unikv/transfer/write_policies.hpp`): `WritePolicy::through`, `selective`
/// (a node backed up on its second hit), `back`.
enum class WritePolicyChoice : std::uint8_t { through, selective, back };

/// Every write policy, in `--write-policy` order.
inline constexpr WritePolicyChoice all_write_policies[] = {WritePolicyChoice::through, WritePolicyChoice::selective,
                                                           WritePolicyChoice::back};

/// The command-line name of `p`.
[[nodiscard]] constexpr std::string_view write_policy_name(WritePolicyChoice p) noexcept {
    switch (p) {
        case WritePolicyChoice::through: return "through";
        case WritePolicyChoice::selective: return "selective";
        case WritePolicyChoice::back: return "back";
    }
    return "?";
}

/// The write policy called `name`, or nothing.
[[nodiscard]] constexpr std::optional<WritePolicyChoice> write_policy_from_name(std::string_view name) noexcept {
    for (const WritePolicyChoice p : all_write_policies)
        if (write_policy_name(p) == name) return p;
    return std::nullopt;
}

/// The names of `presets::All`, in its order.
inline constexpr auto preset_names = []<std::size_t... I>(std::index_sequence<I...>) {
    return std::array<std::string_view, sizeof...(I)>{std::tuple_element_t<I, presets::All>::name...};
}(std::make_index_sequence<std::tuple_size_v<presets::All>>{});

/// Calls `f(std::type_identity<P>{})` for the preset `P` of `presets::All` called `name` and returns its result,
/// which must be of one type for every preset. Throws `InputError` naming `flag` and listing the known names when
/// no preset has that name.
template <class F>
auto with_preset(std::string_view name, std::string_view flag, F&& f) {
    using R = decltype(f(std::type_identity<std::tuple_element_t<0, presets::All>>{}));
    return [&]<std::size_t... I>(std::index_sequence<I...>) -> R {
        std::optional<R> out;
        const auto visit = [&]<class P>(std::type_identity<P> p) {
            if (!out && P::name == name) out.emplace(f(p));
        };
        (visit(std::type_identity<std::tuple_element_t<I, presets::All>>{}), ...);
        if (!out) {
            std::string known;
            for (const std::string_view n : preset_names) known += (known.empty() ? "" : ", ") + std::string(n);
            throw InputError(message(flag, ": unknown model preset '", name, "'; known presets: ", known));
        }
        return *std::move(out);
    }(std::make_index_sequence<std::tuple_size_v<presets::All>>{});
}

/// A Mooncake trace file to replay.
struct TraceFile {
    std::string path;
};

/// Everything the simulator was asked to do. Sizes are checked (non-zero) and names resolved when it is built
/// from the command line; whether the memory holds the trace's longest request is the cache's check, made when
/// the replay builds its arena (`make_arena_spec` names the floor).
struct SimOptions {
    std::variant<TraceFile, GeneratorConfig> input;  ///< `--trace FILE` or `--generate WORKLOAD`
    std::string model = "gemma-3-27b";               ///< a name of `preset_names`
    std::uint64_t device_memory_bytes = std::uint64_t{8} << 30;
    std::uint64_t host_memory_bytes = std::uint64_t{32} << 30;
    WritePolicyChoice write_policy = WritePolicyChoice::through;
    bool compare_static = false;  ///< also replay a static split of the same memory
    bool json = false;            ///< print one JSON object instead of the table
    bool fresh_outputs = false;   ///< decode ids no prompt contains instead of the content stream's
    RetentionConfig retention{};  ///< where the cache keeps windows and states (`--retain`, `--retain-every`)
    std::string csv_path;         ///< per-step CSV; empty for none
    std::string plot_path;        ///< PNG plot; empty for none
    std::size_t max_requests = std::numeric_limits<std::size_t>::max();  ///< replay at most this many
    double host_link_gbps = 55;   ///< host <-> device link of the cost model, GB/s per direction
    /// The storage tier (`--storage`): `file:DIR` or `redis://HOST:PORT`; empty for none.
    std::string storage;
    /// The store's capacity in the model's bytes (`--storage-size`; a file store's bound, scaled like the memory).
    std::uint64_t storage_bytes = std::uint64_t{1} << 40;
    /// Engine instances, the router and its balance threshold (`--instances`, `--router`, `--balance-tokens`).
    ClusterConfig cluster{};
    /// Arrival times are the trace's times this (`--arrival-scale`); replaced by the scale `target_load` asks for.
    double arrival_scale = 1;
    /// `--target-load F`: the arrival scale at which prefilling every prompt cold takes F of the instances'
    /// compute peak (`offered_prefill_load`); 0 when not given.
    double target_load = 0;
    /// Also replay without the storage tier and without the host tier, and the static split with every tier.
    bool compare_tiers = false;
};

}  // namespace unikv::sim

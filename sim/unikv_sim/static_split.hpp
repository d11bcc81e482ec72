#pragma once
/// \file
/// `--compare-static`: the static FULL/SWA split an engine would give the same memory, as the partitions of
/// `PartitionedSWABudget` (`BudgetConfig`).
///
/// The engine is SGLang. Its `--swa-full-tokens-ratio` (server_args.py, default 0.8) is the ratio of SWA to
/// FULL token slots, and `ModelRunner` sizes the two pools by solving (model_runner.py,
/// `set_num_token_hybrid`): `swa_tokens * swa_layers + full_tokens * full_layers = total layer-tokens`,
/// `swa_tokens = ratio * full_tokens`, each rounded down to whole pages. In bytes per token (which is what its
/// layer count stands for, every layer's row being equal in the models it serves) that is
/// `full_tokens = usable_bytes / (full_bytes_per_token + ratio * swa_bytes_per_token)`. Here the bytes per
/// token are the arena's entries, so the split covers exactly the arena a unified run gets.
///
/// Mamba: SGLang gives hybrid-state models a separate state pool of 3 states per running request
/// (`MAMBA_CACHE_SIZE_MAX_RUNNING_REQUESTS_RATIO`, model_runner_kv_cache_mixin.py), taken off the top before
/// the KV split. The tri-pool's static run sizes its FULL/SWA partitions from the memory left after those
/// states, and bounds Mamba to them (`mamba_partition_pages`), as its own pool. FULL+Mamba models split the same
/// way, FULL taking all the memory left after the states (`PartitionedMambaBudget`; the ratio splits nothing).
///
/// The partitions bound the arena's pools (`UnifiedAllocator::bound_pages`), so each behaves as a pool of its
/// own: its cached pages never hold another's memory, and a pool at its bound evicts its own pages.

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

#include <unikv/arena/model.hpp>
#include <unikv/budget/asks.hpp>
#include <unikv/component.hpp>
#include <unikv/error.hpp>

#include <unikv_sim/input_error.hpp>
#include <unikv_sim/metrics.hpp>

namespace unikv::sim {

/// SGLang's default `swa_full_tokens_ratio` (server_args.py).
inline constexpr double sglang_swa_full_tokens_ratio = 0.8;

/// The ratios `--compare-static` tries; the best (fewest dropped requests, then the highest hit rate) is
/// reported beside the default (which is one of them).
inline constexpr std::array<double, 5> static_ratio_sweep{0.05, 0.1, 0.2, 0.4, sglang_swa_full_tokens_ratio};

/// SGLang's Mamba state pool: states per running request.
inline constexpr std::int64_t sglang_mamba_states_per_running_request = 3;

/// The FULL and SWA partitions (pages) SGLang's sizing gives the arena `arena` of a layout with pools
/// `present` at SWA/FULL token ratio `ratio`, after `mamba_states` state slots (the Mamba partition where the
/// layout has Mamba; see the file comment). Each KV partition present is at least one page. Throws what
/// `make_arena_spec` throws for a bad arena, and `InputError` naming `--device-memory` when the states leave
/// less than a page of each KV pool. O(1).
[[nodiscard]] inline BudgetConfig static_split(const ArenaConfig& arena, ComponentMask present, double ratio,
                                               std::int64_t mamba_states = 0) {
    const ArenaSpec spec = make_arena_spec(arena, present);
    const SubPoolSpec& full = spec[Component::full];
    const SubPoolSpec& swa = spec[Component::swa];
    const SubPoolSpec& mamba = spec[Component::mamba];
    double usable = static_cast<double>(spec.arena_bytes - spec.sink_floor_bytes);
    if (mamba.present) {
        // SGLang refuses to start when its state pool leaves no memory for the KV pools; so does the comparison.
        const double states = static_cast<double>(mamba_states) * static_cast<double>(mamba.page_bytes);
        const double kv_floor = static_cast<double>(full.page_bytes + (swa.present ? swa.page_bytes : 0));
        if (usable - states < kv_floor) {
            throw InputError(message("--device-memory: the static split's state pool (", mamba_states,
                                     " states: 3 per running request) takes ", states, " of the ", usable,
                                     " bytes the arena has (at the replay's scale), leaving no KV pages; give "
                                     "more device memory"));
        }
        usable -= states;
    }
    const double full_tokens =
        std::max(0.0, usable) / (static_cast<double>(full.entry_bytes) + ratio * static_cast<double>(swa.entry_bytes));
    const auto pages = [](double tokens, std::int32_t page) {
        return std::max<std::int64_t>(1, static_cast<std::int64_t>(tokens) / page);
    };
    return {.full_partition_pages = pages(full_tokens, full.page_size),
            .swa_partition_pages = swa.present ? pages(ratio * full_tokens, swa.page_size) : 0,
            .mamba_partition_pages = mamba.present ? mamba_states : 0};
}

/// The index in `sweep` of the best split: the fewest dropped requests (a split that drops requests drops their
/// misses from its hit rate too), then the highest hit rate; the first of equals. `sweep` must not be empty.
/// O(n).
[[nodiscard]] inline std::size_t best_split(std::span<const ReplayFigures> sweep) {
    UNIKV_EXPECTS(!sweep.empty(), "best_split of an empty sweep");
    std::size_t best = 0;
    for (std::size_t i = 1; i < sweep.size(); ++i) {
        const ReplayFigures& a = sweep[i];
        const ReplayFigures& b = sweep[best];
        if (a.dropped < b.dropped || (a.dropped == b.dropped && a.hit_rate() > b.hit_rate())) best = i;
    }
    return best;
}

}  // namespace unikv::sim

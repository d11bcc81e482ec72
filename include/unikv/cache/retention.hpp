#pragma once
/// \file
/// What a cache keeps of a request's SWA window and Mamba state besides its chunk ends and its end: the
/// retention policies (`RetentionConfig`, runtime configuration of a `Cache`) and the positions they name for one
/// request (`RetainPoints`).
///
/// A prefix of a hybrid model is usable only where the tree holds, beside its FULL pages, the SWA rows of the
/// window before its end and a Mamba state at its end. A request slides its window past its prompt while it
/// decodes, and its state exists only at its chunk ends, so without a policy the next prompt that shares the prompt
/// (or part of it) finds the FULL pages and recomputes. The cache keeps both where later prompts are likely to end
/// their match:
/// * at a prompt's end (its last whole page), before the request decodes past it;
/// * at a branch point: where the prompt leaves the cached path its admission matched (the next prompt sharing
///   that prefix ends its match there);
/// * optionally every N tokens (a sparse checkpoint, kept before any request asks).
/// The window is kept by caching the prefix up to the point before the request's window slides past it (the tree
/// then owns those rows; the request slides only its own). A state exists only at the end of a forward, so under
/// Mamba the admission cuts a prefill chunk at the next point (`Admission::chunked`): the engine's checkpoint of
/// that chunk caches the state there. Eviction then takes the windows only a chunk ended on first and branch-tail
/// windows last (`InsertValues::window_class`).

#include <cstdint>

namespace unikv {

/// The retention policies of a cache (named fields; `CacheConfig::retention`). Each keeps a window and a state
/// (where the layout has them) at more positions, at the cost of the memory they hold until evicted.
struct RetentionConfig {
    /// Keep them at each prompt's last whole page.
    bool prompt_ends = true;
    /// Keep them where a prompt leaves the path its admission matched.
    bool branch_points = true;
    /// Keep them every `every_tokens` tokens (a multiple of the page size; 0: never): of the prompt, and of the
    /// decoded rows where the window has not slid past (a restore's recompute).
    std::int32_t every_tokens = 0;
};

/// Window classes an insert raises (`InsertValues::window_class`): the eviction order of SWA windows.
inline constexpr std::uint8_t window_class_chunk = 0;   ///< only a chunk boundary ends there
inline constexpr std::uint8_t window_class_end = 1;     ///< a prompt's or finished request's end, a sparse checkpoint
inline constexpr std::uint8_t window_class_branch = 2;  ///< a branch point: evicted last

/// The positions (tokens, whole pages) a policy keeps for one request.
struct RetainPoints {
    /// Where its prompt leaves the cached path (0: none).
    std::int32_t branch = 0;
    /// Its prompt's last whole page (0: not kept).
    std::int32_t prompt_end = 0;
    /// The sparse interval (0: none).
    std::int32_t every = 0;

    /// The points of a prompt of `prompt` tokens whose cached FULL pages reach `cached` tokens, pages of `page`.
    [[nodiscard]] static constexpr RetainPoints of(const RetentionConfig& policy, std::int32_t prompt,
                                                   std::int32_t cached, std::int32_t page) noexcept {
        return {.branch = policy.branch_points ? cached : 0,
                .prompt_end = policy.prompt_ends ? prompt / page * page : 0,
                .every = policy.every_tokens};
    }
    /// The first point in `(from, to)`, or `to` when none. O(1).
    [[nodiscard]] constexpr std::int32_t next_after(std::int32_t from, std::int32_t to) const noexcept {
        std::int32_t next = to;
        const auto take = [&](std::int32_t at) {
            if (at > from && at < next) next = at;
        };
        take(branch);
        take(prompt_end);
        if (every > 0) take((from / every + 1) * every);
        return next;
    }
    /// The window class of a checkpoint at `at`.
    [[nodiscard]] constexpr std::uint8_t class_at(std::int32_t at) const noexcept {
        if (at > 0 && at == branch) return window_class_branch;
        if (at > 0 && (at == prompt_end || (every > 0 && at % every == 0))) return window_class_end;
        return window_class_chunk;
    }
};

}  // namespace unikv

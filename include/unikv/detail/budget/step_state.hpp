#pragma once
// The per-step state every budget keeps (reference §6.1): the offsets pre-charged to its pools (the mixed
// batch's pending decode tokens, then each admitted request's demand) and what is left of the step's
// chunked-prefill budget. Plain counters: a budget holds no pointer to the cache.

#include <cstdint>
#include <optional>

#include <unikv/budget/asks.hpp>
#include <unikv/budget/refusal.hpp>
#include <unikv/detail/budget/capacity.hpp>

namespace unikv::detail {

class step_state {
public:
    /// Starts a step: every offset is the pending decode demand (`total_offset` and `swa_offset`: one token
    /// per running request), no state is charged, and the whole chunk budget is left. O(1).
    void begin_step(const StepDemand& step) noexcept {
        total_offset_ = step.decode_tokens;
        swa_offset_ = step.decode_tokens;
        state_offset_ = 0;
        chunk_left_ = step.chunk_tokens;
    }
    /// FULL tokens pre-charged this step: pending decode tokens plus each admission's extension (page
    /// rounded), one page and its decode.
    [[nodiscard]] std::int64_t total_offset() const noexcept { return total_offset_; }
    /// SWA tokens pre-charged this step: pending decode tokens plus each admission's SWA estimate.
    [[nodiscard]] std::int64_t swa_offset() const noexcept { return swa_offset_; }
    /// Mamba states pre-charged this step: one per admission.
    [[nodiscard]] std::int64_t state_offset() const noexcept { return state_offset_; }
    /// Prefill tokens the step's chunk budget has left.
    [[nodiscard]] std::int32_t chunk_left() const noexcept { return chunk_left_; }

protected:
    // `ask` cut to the chunk budget: whole pages of what is left, no decode while chunked; nullopt when not
    // even one page (nor the whole extension) is left.
    [[nodiscard]] std::optional<PrefillAsk> cut_to_chunk(const PrefillAsk& ask, std::int32_t page) const noexcept {
        if (ask.extend <= chunk_left_) return ask;
        const std::int32_t cut = chunk_left_ / page * page;
        if (cut == 0) return std::nullopt;
        return PrefillAsk{.prefix_length = ask.prefix_length, .extend = cut, .max_new = 0, .chunked = true};
    }
    [[nodiscard]] static BudgetCheck chunk_refusal() noexcept {
        return BudgetCheck::refused(
            {.cause = RefusalCause::chunk_exhausted, .missing = {Component::full, 1}});
    }
    // FULL tokens an admission charges (reference `reserve`): its extension page-rounded, one page, its decode.
    [[nodiscard]] static std::int64_t full_charge(const PrefillAsk& a, std::int32_t page) noexcept {
        return ceil_page(a.extend, page) + page + a.max_new;
    }
    void charge_full(const PrefillAsk& a, std::int32_t page) noexcept {
        total_offset_ += full_charge(a, page);
        chunk_left_ -= a.extend;
    }
    void charge_swa(std::int64_t tokens) noexcept { swa_offset_ += tokens; }
    void charge_state() noexcept { ++state_offset_; }

private:
    std::int64_t total_offset_ = 0;
    std::int64_t swa_offset_ = 0;
    std::int64_t state_offset_ = 0;
    std::int32_t chunk_left_ = StepDemand{}.chunk_tokens;
};

}  // namespace unikv::detail

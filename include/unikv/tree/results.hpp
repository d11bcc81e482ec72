#pragma once
/// \file
/// Results of tree calls: `MatchResult`, `PrefixPeek`, `InsertResult`, `EvictResult`, `HostInsertResult`, and
/// `NodeInfo` for inspection.

#include <array>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <span>
#include <vector>

#include <unikv/ids.hpp>
#include <unikv/tree/actions.hpp>
#include <unikv/tree/components.hpp>
#include <unikv/tree/handles.hpp>
#include <unikv/tree/keys.hpp>

namespace unikv {

/// The FULL virtual pages of a matched prefix, viewed in place: one run per node on the path, top-down, so a
/// match writes one entry per node instead of one id per page. Iterates as one sequence of pages; `runs()` gives
/// the runs for bulk copies (into a request's page table). Points into the tree: valid until the next non-const
/// call on it.
class PageRuns {
public:
    /// A forward iterator over the pages of every run in order.
    class iterator {
    public:
        using value_type = VirtualPage;
        using difference_type = std::ptrdiff_t;
        using reference = const VirtualPage&;
        using pointer = const VirtualPage*;
        using iterator_category = std::forward_iterator_tag;

        iterator() = default;
        reference operator*() const noexcept { return (*run_)[at_]; }
        pointer operator->() const noexcept { return &(*run_)[at_]; }
        iterator& operator++() noexcept {
            if (++at_ == run_->size()) {
                ++run_;
                at_ = 0;
            }
            return *this;
        }
        iterator operator++(int) noexcept {
            iterator old = *this;
            ++*this;
            return old;
        }
        friend bool operator==(const iterator&, const iterator&) = default;

    private:
        friend class PageRuns;
        iterator(const std::span<const VirtualPage>* run, std::size_t at) noexcept : run_(run), at_(at) {}
        const std::span<const VirtualPage>* run_ = nullptr;
        std::size_t at_ = 0;  // index in *run_; runs are never empty, so the end is {one past the last run, 0}
    };

    /// No pages.
    PageRuns() = default;
    /// Views `runs` (each non-empty), `pages` pages in all. For the tree cores.
    PageRuns(std::span<const std::span<const VirtualPage>> runs, std::size_t pages) noexcept
        : runs_(runs), size_(pages) {}

    /// The runs, top-down, each non-empty.
    [[nodiscard]] std::span<const std::span<const VirtualPage>> runs() const noexcept { return runs_; }
    /// Number of pages.
    [[nodiscard]] std::size_t size() const noexcept { return size_; }
    /// True when no page matched.
    [[nodiscard]] bool empty() const noexcept { return size_ == 0; }
    /// First page.
    [[nodiscard]] iterator begin() const noexcept { return {runs_.data(), 0}; }
    /// Past the last page.
    [[nodiscard]] iterator end() const noexcept { return {runs_.data() + runs_.size(), 0}; }

private:
    std::span<const std::span<const VirtualPage>> runs_{};
    std::size_t size_ = 0;
};

static_assert(std::forward_iterator<PageRuns::iterator>);

/// What `match_prefix` found. Lengths are in tokens and are whole pages. A miss is a result with lengths 0 and
/// the root as nodes, never an error.
struct [[nodiscard]] MatchResult {
    /// Deepest node at which every component's validator accepts device data only (the root on a miss).
    NodeRef device_node{};
    /// Tokens covered by `device_node`: the prefix the request can use without loading anything.
    std::int32_t device_length = 0;
    /// Deepest node at which every validator accepts device or host data (`device_node` when host hits are
    /// excluded).
    NodeRef best_node{};
    /// Tokens covered by `best_node`.
    std::int32_t best_length = 0;
    /// `best_length - device_length`: tokens of the best match that need a load-back of at least one component
    /// (usually FULL host-only pages; their FULL rows may still be resident when only SWA or Mamba is on host).
    std::int32_t host_hit_length = 0;
    /// SWA tokens that are host-only within the last window before `best_length` (0 when host hits are
    /// excluded or without Swa).
    std::int32_t swa_host_hit_length = 0;
    /// Tokens of the key with FULL device data on the walked path, ignoring the other validators.
    std::int32_t full_length = 0;
    /// Deepest device boundary if the SWA validator were ignored, when it lies beyond `device_length`; else 0.
    /// The engine recomputes from `device_length` and keeps SWA live up to here so the tree can recover it.
    std::int32_t swa_branching_length = 0;
    /// Deepest device boundary if the Mamba validator were ignored, when it lies beyond `device_length`; else 0.
    /// The engine checkpoints its state here so later requests find one.
    std::int32_t mamba_branching_length = 0;
    /// FULL virtual pages of `[0, device_length)`, one run per node (see `PageRuns`): valid until the next
    /// non-const call on the tree.
    PageRuns device_pages{};
};

/// What `peek_prefix` (the tree) or `peek` (the cache) found: the two lengths a match of the same key would return,
/// read without changing anything, for a router that asks several caches how much of a request each holds.
/// Lengths are in tokens and are whole pages; a miss is both 0.
struct [[nodiscard]] PrefixPeek {
    /// The prefix a match would serve from device with every component valid: `MatchResult::device_length` of
    /// `match_prefix` on the same key.
    std::int32_t device_length = 0;
    /// The same with host-only data counted (what a load-back would add): `MatchResult::best_length` of
    /// `match_prefix` with `HostHits::include`. At least `device_length`.
    std::int32_t best_length = 0;
    friend bool operator==(const PrefixPeek&, const PrefixPeek&) = default;
};

/// What `insert` did.
struct [[nodiscard]] InsertResult {
    /// The node that ends exactly at the end of the key (the root for an empty key): lock it for the request.
    NodeRef node{};
    /// Tokens of the key that were already in the tree's structure before the call.
    std::int32_t prefix_length = 0;
    /// A node of the key's path took the request's FULL pages or SWA rows beside a host copy of them (one a
    /// prefetch grafted while the request computed): a host that only stages copies lets go of it.
    bool beside_host = false;
    /// Duplicate pages and states to free, SWA recoveries to apply, write-throughs to queue (see
    /// `TreeConfig::write_through_threshold`): execute, then `mark_executed()`.
    TreeActions actions;
};

/// What `evict`, `evict_host`, `finish_backup` or `drop_host` did.
struct [[nodiscard]] EvictResult {
    /// Device units freed per component: tokens for Full and Swa, states for Mamba.
    per_component<std::int64_t> device_freed{};
    /// Host units freed per component, same units.
    per_component<std::int64_t> host_freed{};
    /// Backups first, then frees, in order: execute, then `mark_executed()`.
    TreeActions actions;

    /// Device units of `c` freed.
    [[nodiscard]] std::int64_t freed(Component c) const noexcept { return device_freed[c]; }
    /// Host units of `c` freed.
    [[nodiscard]] std::int64_t host_freed_of(Component c) const noexcept { return host_freed[c]; }
};

/// Where a tree's host copies stop forming chains from the root (`host_chain_break`), which a switch to
/// write-through needs (reference §4.4): a write-through copies a node's device data only, so a host copy it cannot
/// extend upward would stay an island.
struct [[nodiscard]] HostChainBreak {
    enum class Kind : std::uint8_t {
        none,                   ///< every host copy hangs from a chain of FULL host copies from the root
        aux_without_full,       ///< a node holds an SWA or Mamba host copy without its FULL host copy
        under_unbacked_parent,  ///< a node holds a host copy under a parent (not the root) without a FULL one
    };
    Kind kind = Kind::none;
    std::int32_t start = 0;  ///< the node's first token
    std::int32_t end = 0;    ///< one past its last token
    [[nodiscard]] explicit operator bool() const noexcept { return kind != Kind::none; }
};

/// What `insert_host` did. No device data is touched, so there are no actions: the caller frees `unused`.
struct [[nodiscard]] HostInsertResult {
    /// The node ending at the key's end when grafted; otherwise the deepest node the key covers whole (root when
    /// none).
    NodeRef node{};
    /// True when the key's end is now cached (the graft happened); false when the tree held less than `from`
    /// tokens of the key (nothing changed at all).
    bool grafted = false;
    /// The host pages the tree did not take, per component, in key order, for the caller to free (all of them
    /// when not grafted). Mamba: the state, or nothing.
    per_component<std::vector<HostPage>> unused{};
};

/// One load-back a request needs (see `RadixTree::load_back_plan`): copy `host`, the host copy of `component` on
/// `node`, to device (SWA rows under `full_pages`). A caller records the whole plan's copy with `begin_load` when
/// it queues it and `finish_load` at its ack (or, copying synchronously, each step with `commit_load_back`).
struct LoadBackStep {
    /// The node to load.
    NodeRef node{};
    /// What to load.
    Component component = Component::full;
    /// First token of the node.
    std::int32_t start = 0;
    /// Tokens of the node.
    std::int32_t length = 0;
    /// The host copy: one host page per page (Full, Swa), one (Mamba). Points into the tree: valid until the next
    /// non-const call on it other than `commit_load_back` (so a caller can load the plan step by step). Lock the
    /// node (device and host tiers) while the copies run, so no eviction drops the host pages being read.
    std::span<const HostPage> host{};
    /// For an SWA step, the node's FULL virtual pages, one per page: the loaded SWA rows are bound under them
    /// (`UnifiedAllocator::bind_swa(full_pages, reservation)`). Empty when the node has no FULL device pages when
    /// the plan is made, i.e. an earlier FULL step of this plan loads them: bind under the pages given to that
    /// step's `commit_load_back`. Always empty for a FULL step (its destination pages are the caller's, from
    /// `alloc_full`) and for a Mamba step (a state has its own slot). Same validity as `host`.
    std::span<const VirtualPage> full_pages{};
    /// A load recorded earlier (`begin_load`, not finished yet) copies this part: a plan with such a step must
    /// wait for that load's ack (`begin_load` refuses it).
    bool loading = false;
};

/// What `finish_load` hands back for the caller to free: `free(full)` (destinations no node took, with the SWA
/// rows bound under them), `free_swa(swa)` (SWA rows no node took, under pages that stay), `free_state(state)`.
/// Spans into the tree: valid until its next call.
struct LoadLeftovers {
    std::span<const VirtualPage> full{};
    std::span<const VirtualPage> swa{};
    /// The destination state when no node took it (none otherwise).
    StateId state{};
};

/// A copy of one node's state, for tests, debugging and tools (cold path: allocates).
struct NodeInfo {
    /// The parent (the root's parent is the root).
    NodeRef parent{};
    /// Namespace of the node's key.
    KeyNamespace ns{};
    /// First token position of the node.
    std::int32_t start = 0;
    /// Tokens on the node.
    std::int32_t length = 0;
    /// Number of children.
    std::uint32_t children = 0;
    /// Retention class.
    std::uint8_t retention = 0;
    /// Window class of its SWA (`InsertValues::window_class`).
    std::uint8_t window_class = 0;
    /// The node's tokens.
    std::vector<TokenId> tokens;
    /// FULL device pages (empty: no FULL device data).
    std::vector<VirtualPage> pages;
    /// Host pages per component (Mamba: one page when present).
    per_component<std::vector<HostPage>> host;
    /// Device data present, per component (SWA: rows bound to `pages`).
    per_component<bool> device{};
    /// A backup of the component is pending (`finish_backup` not called yet).
    per_component<bool> backup_pending{};
    /// A write-through of the component was emitted and is neither committed (`set_host`) nor skipped.
    per_component<bool> write_through_pending{};
    /// FULL, SWA: the node's host copy (or pending write-through) and its parent's are one value cut by a split.
    per_component<bool> joined{};
    /// FULL, SWA: the storage tier holds the node's data of the component (`drop_host` with `HostDrop::stored`), so
    /// inserts emit no write-through of it.
    per_component<bool> stored{};
    /// Inserts over the node so far (saturating), the count `TreeConfig::write_through_threshold` compares.
    std::uint32_t hits = 0;
    /// The Mamba device state (none when absent).
    StateId state{};
    /// Device lock counts per component.
    per_component<std::uint32_t> device_locks{};
    /// Host lock counts per component.
    per_component<std::uint32_t> host_locks{};
};

}  // namespace unikv

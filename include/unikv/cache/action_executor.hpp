#pragma once
/// \file
/// `ActionExecutor`: the one place that knows both the tree's action vocabulary (`tree/actions.hpp`) and the
/// allocator's calls. "The tree decides, the cache executes": `execute` runs an action list (of an
/// `InsertResult`, `EvictResult` or `finish_backup`) front to back against a `UnifiedAllocator`:
///
/// | action                    | allocator call  |
/// |---------------------------|-----------------|
/// | `free_pages`              | `free`          |
/// | `free_swa`                | `free_swa`      |
/// | `free_states`             | `free_state`    |
/// | `recover_swa_locked_full` | `transfer_swa`  |
///
/// What it cannot do alone, `backup` (a device-to-host copy) and `free_host` (host pages, which the host tier
/// owns), it hands back as `HostActions`: a move-only, `[[nodiscard]]` result that owns the list. A backup must
/// read its rows before they are freed, so once the list reaches its first `backup` the device actions after
/// it wait in the result too: the caller makes the copies, then calls `complete` (which runs them and marks
/// the list executed). A `write_through` (a device-to-host copy of rows that stay) is handed back the same way, but
/// the device actions after it do not wait: no action of an insert's list frees the rows it reads, and the caller
/// keeps them device-locked from the commit (`set_host`) until the copy's ack. A `HostActions` destroyed before
/// `complete` is reported like an unexecuted action list (`Dropped::actions`, `dropped.hpp`), and the device
/// actions it held are not run.
///
/// The executor holds no reference to the allocator or the tree (each call names the allocator), so a struct
/// holding all three moves as a whole. A misused allocator call (the tree and the allocator disagree: a caller
/// bug) throws `logic_error` from the call that found it, naming the id; the actions before it were executed
/// and the list is left unexecuted, so the drop is reported too.

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include <unikv/error.hpp>
#include <unikv/ids.hpp>
#include <unikv/pools/results.hpp>
#include <unikv/tree/actions.hpp>
#include <unikv/tree/results.hpp>

namespace unikv {

/// The host-side work of an executed action list (`backup`, `write_through`, `free_host`), and the device actions that wait for
/// the backups. Move-only; `complete` it, or it is reported as dropped when destroyed.
class [[nodiscard]] HostActions {
public:
    /// Nothing to do.
    HostActions() noexcept = default;
    HostActions(const HostActions&) = delete;
    HostActions& operator=(const HostActions&) = delete;
    /// Takes over `other`'s work; `other` becomes empty.
    HostActions(HostActions&& other) noexcept
        : list_(std::move(other.list_)), host_(std::exchange(other.host_, {})), resume_(std::exchange(other.resume_, 0)) {}
    /// Takes over `other`'s work; work held before is reported as dropped (its list is unexecuted).
    HostActions& operator=(HostActions&& other) noexcept {
        if (this != &other) {
            list_ = std::move(other.list_);
            host_ = std::exchange(other.host_, {});
            resume_ = std::exchange(other.resume_, 0);
        }
        return *this;
    }
    /// An unexecuted list is reported by the list itself (`Dropped::actions`).
    ~HostActions() = default;

    /// The `backup`, `write_through` and `free_host` actions, in list order. Read their ids with `pages`,
    /// `states`, `host_pages`.
    [[nodiscard]] std::span<const TreeAction> actions() const noexcept { return host_; }
    /// True when there is no host work and no waiting device action (`complete` is still allowed).
    [[nodiscard]] bool empty() const noexcept { return host_.empty() && resume_ == list_.size(); }
    /// The virtual pages of a FULL or SWA `backup` or `write_through`.
    [[nodiscard]] std::span<const VirtualPage> pages(const TreeAction& a) const noexcept { return list_.pages(a); }
    /// The state of a Mamba `backup` or `write_through`.
    [[nodiscard]] std::span<const StateId> states(const TreeAction& a) const noexcept { return list_.states(a); }
    /// The host pages of a `free_host`.
    [[nodiscard]] std::span<const HostPage> host_pages(const TreeAction& a) const noexcept { return list_.host_pages(a); }
    /// `TreeActions::copy_pages`.
    [[nodiscard]] std::size_t copy_pages(const TreeAction& a) const noexcept { return list_.copy_pages(a); }

private:
    friend class ActionExecutor;
    TreeActions list_;
    std::vector<TreeAction> host_;  // copies of the host actions of `list_` (allocated only when there are some)
    std::size_t resume_ = 0;        // the first device action of `list_` not executed yet
};

/// Executes tree action lists against a `UnifiedAllocator` (see the file comment). Stateless apart from
/// counters, so it can live beside the allocator and the tree and move with them.
class ActionExecutor {
public:
    /// Actions executed so far, by `ActionKind` (host actions count when they are handed back).
    [[nodiscard]] std::uint64_t executed(ActionKind kind) const noexcept { return executed_[static_cast<std::size_t>(kind)]; }

    /// Executes `actions` against `alloc` front to back until the first `backup`; hands back the host actions
    /// and the device actions after that first backup. An allocator without the SWA (Mamba) pool an action
    /// needs is a compile-time error only when such an action can occur: at run time it throws
    /// `logic_error`. O(ids) plus the allocator calls' own costs; allocates only for host work.
    template <class Alloc>
    HostActions execute(Alloc& alloc, TreeActions&& actions) {
        HostActions out;
        out.list_ = std::move(actions);
        bool waiting = false;  // a backup came first: device actions wait for `complete`
        const std::span<const TreeAction> list = out.list_.list();
        for (std::size_t i = 0; i < list.size(); ++i) {
            const TreeAction& a = list[i];
            if (handed_back(a.kind)) {
                if (out.host_.empty()) out.host_.reserve(list.size() - i);
                out.host_.push_back(a);
                ++executed_[static_cast<std::size_t>(a.kind)];
                if (a.kind == ActionKind::backup && !waiting) {
                    waiting = true;
                    out.resume_ = i;
                }
                continue;
            }
            if (!waiting) run(alloc, out.list_, a);
        }
        if (!waiting) out.resume_ = list.size();
        if (out.empty()) out.list_.mark_executed();
        return out;
    }

    /// `execute(alloc, std::move(result.actions))` for an `InsertResult` or `EvictResult`.
    template <class Alloc, class Result>
        requires requires(Result& r) { r.actions; }
    HostActions execute(Alloc& alloc, Result& result) {
        return execute(alloc, std::move(result.actions));
    }

    /// Finishes `work` once the caller made every backup's copy (and recorded it with `finish_backup`, whose
    /// own result goes through `execute`) and freed the host pages: runs the device actions that waited for
    /// the backups and marks the list executed. Throws `logic_error` (from the allocator call) as `execute`.
    template <class Alloc>
    void complete(Alloc& alloc, HostActions&& work) {
        HostActions done = std::move(work);
        const std::span<const TreeAction> list = done.list_.list();
        for (std::size_t i = done.resume_; i < list.size(); ++i) {
            if (!handed_back(list[i].kind)) run(alloc, done.list_, list[i]);
        }
        done.resume_ = list.size();
        done.list_.mark_executed();
    }

private:
    static bool handed_back(ActionKind k) noexcept {
        return k == ActionKind::backup || k == ActionKind::write_through || k == ActionKind::free_host;
    }

    template <class Alloc>
    void run(Alloc& alloc, const TreeActions& list, const TreeAction& a) {
        switch (a.kind) {
            case ActionKind::free_pages: alloc.free(list.pages(a), Holder::tree); break;
            case ActionKind::free_swa:
                if constexpr (Alloc::has_swa) alloc.free_swa(list.pages(a), Holder::tree);
                else detail::misuse("ActionExecutor::execute", "a free_swa action for an allocator without a Swa pool");
                break;
            case ActionKind::free_states:
                if constexpr (Alloc::has_mamba) alloc.free_state(list.states(a), Holder::tree);
                else detail::misuse("ActionExecutor::execute", "a free_states action for an allocator without a Mamba pool");
                break;
            case ActionKind::recover_swa_locked_full:
                if constexpr (Alloc::has_swa) alloc.transfer_swa(list.pages(a), list.incoming_pages(a));
                else detail::misuse("ActionExecutor::execute", "a recover_swa_locked_full action without a Swa pool");
                break;
            case ActionKind::backup:
            case ActionKind::write_through:
            case ActionKind::free_host: return;  // handed back, never run here
        }
        ++executed_[static_cast<std::size_t>(a.kind)];
    }

    static constexpr std::size_t kind_count = static_cast<std::size_t>(ActionKind::write_through) + 1;  // the last kind
    std::array<std::uint64_t, kind_count> executed_{};
};

}  // namespace unikv

#pragma once
/// \file
/// What a tree asks its cache to do. "The tree decides, the cache executes": insert and eviction change the
/// tree at once and return the pool and host operations that make memory agree with it, as an ordered list the
/// caller executes front to back and then marks executed. A list destroyed unexecuted is reported
/// (`Dropped::actions`, see `dropped.hpp`).

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include <unikv/dropped.hpp>
#include <unikv/ids.hpp>
#include <unikv/tree/components.hpp>
#include <unikv/tree/handles.hpp>

namespace unikv {

/// One kind of tree action. FULL and SWA rows are both addressed by FULL virtual pages (SWA binds the ids FULL
/// mints); Mamba by state ids; host data by host pages of the action's component.
enum class ActionKind : std::uint8_t {
    /// Write-back: copy `component`'s device data of `node` to host (`pages()`: FULL rows for Full, the SWA
    /// rows bound to those pages for Swa; `states()` for Mamba) and wait for the copy. It comes before the free
    /// of the same rows in the same list. Once the list is executed, call `finish_backup(node, component,
    /// host_pages)` for each backup (host pages empty when the copy could not be made) and execute what it
    /// returns.
    backup,
    /// SWA tombstone recovered under a locked FULL segment: move the SWA binding of each `incoming_pages()[i]`
    /// to `pages()[i]` (the tree keeps `pages()`), leaving the incoming pages' SWA unbound. The incoming pages are
    /// freed by a later `free_pages`.
    recover_swa_locked_full,
    /// Free `pages()`: FULL rows and any SWA rows bound to them (the allocator's `free`).
    free_pages,
    /// Drop the SWA rows bound to `pages()` and keep their FULL rows (the allocator's `free_swa`).
    free_swa,
    /// Free the Mamba states `states()` (the allocator's `free_state`).
    free_states,
    /// Free `host_pages()` of `component`'s host pool.
    free_host,
    /// Write-through: copy `component`'s device data of `node` to host (`pages()` / `states()`, as for
    /// `backup`) while the device data stays. Emitted by `insert` for nodes that reached the tree's
    /// `write_through_threshold`; the node is marked write-through pending until the caller commits the copy
    /// with `set_host(node, component, host_pages)` when it queues it, or gives up with `skip_write_through`
    /// (no host room). Unlike `backup`, no action of the same list frees these rows and other tree calls stay
    /// allowed meanwhile; the caller keeps the rows device-locked from the commit until the copy's ack, and a
    /// copy that failed after its commit is undone with `drop_host(node, component)`.
    write_through,
};

/// One action. Its ids live in the owning `TreeActions`; read them with its accessors.
struct TreeAction {
    /// What to do.
    ActionKind kind = ActionKind::free_pages;
    /// The component the ids belong to (`full` for `free_pages` and `recover_swa_locked_full`, `swa` for
    /// `free_swa`, `mamba` for `free_states`).
    Component component = Component::full;
    /// The node concerned (`backup` and `write_through` only; the root otherwise).
    NodeRef node{};
    /// Offset and count of the ids in the owner's id storage (kind-specific).
    std::uint32_t first = 0;
    /// Number of ids.
    std::uint32_t count = 0;
    /// Offset of the second id run (`recover_swa_locked_full`: the incoming pages).
    std::uint32_t second = 0;
};

template <class... Components>
class RadixTree;
template <class... Components>
class ReferenceTree;

namespace detail {
class ActionsBuilder;
}  // namespace detail

/// An ordered, move-only list of actions. Execute front to back, then call `mark_executed()`. A non-empty list
/// destroyed unexecuted is reported as `Dropped::actions`.
class TreeActions {
public:
    /// An empty (executed) list.
    TreeActions() noexcept = default;
    TreeActions(const TreeActions&) = delete;
    TreeActions& operator=(const TreeActions&) = delete;
    /// Takes over `other`'s actions; `other` becomes empty and executed.
    TreeActions(TreeActions&& other) noexcept { take(other); }
    /// Takes over `other`'s actions; an unexecuted list held before is reported.
    TreeActions& operator=(TreeActions&& other) noexcept {
        if (this != &other) {
            report_if_unexecuted();
            take(other);
        }
        return *this;
    }
    /// Reports `Dropped::actions` when the list is non-empty and was never marked executed.
    ~TreeActions() { report_if_unexecuted(); }

    /// The actions in execution order.
    [[nodiscard]] std::span<const TreeAction> list() const noexcept { return actions_; }
    /// True when there is nothing to do.
    [[nodiscard]] bool empty() const noexcept { return actions_.empty(); }
    /// Number of actions.
    [[nodiscard]] std::size_t size() const noexcept { return actions_.size(); }

    /// The virtual pages of `free_pages`, `free_swa`, Full and Swa `backup` and `write_through`, and the kept
    /// pages of `recover_swa_locked_full`.
    [[nodiscard]] std::span<const VirtualPage> pages(const TreeAction& a) const noexcept {
        return uses_pages(a) ? std::span<const VirtualPage>(pages_).subspan(a.first, a.count)
                             : std::span<const VirtualPage>{};
    }
    /// The incoming pages of `recover_swa_locked_full` (empty for other kinds).
    [[nodiscard]] std::span<const VirtualPage> incoming_pages(const TreeAction& a) const noexcept {
        return a.kind == ActionKind::recover_swa_locked_full
                   ? std::span<const VirtualPage>(pages_).subspan(a.second, a.count)
                   : std::span<const VirtualPage>{};
    }
    /// The states of `free_states` and Mamba `backup` and `write_through`.
    [[nodiscard]] std::span<const StateId> states(const TreeAction& a) const noexcept {
        return uses_states(a) ? std::span<const StateId>(states_).subspan(a.first, a.count)
                              : std::span<const StateId>{};
    }
    /// Host pages the copy of a `backup` or `write_through` needs: one per page (Full, Swa), one per state
    /// (Mamba); 0 for other kinds.
    [[nodiscard]] std::size_t copy_pages(const TreeAction& a) const noexcept { return copies(a) ? a.count : 0; }
    /// The host pages of `free_host`.
    [[nodiscard]] std::span<const HostPage> host_pages(const TreeAction& a) const noexcept {
        return a.kind == ActionKind::free_host ? std::span<const HostPage>(hosts_).subspan(a.first, a.count)
                                               : std::span<const HostPage>{};
    }

    /// Records that the caller executed every action. Idempotent.
    void mark_executed() noexcept { executed_ = true; }
    /// True once `mark_executed()` was called, or when the list is empty.
    [[nodiscard]] bool executed() const noexcept { return executed_ || actions_.empty(); }

private:
    friend class detail::ActionsBuilder;

    static bool copies(const TreeAction& a) noexcept {
        return a.kind == ActionKind::backup || a.kind == ActionKind::write_through;
    }
    static bool uses_pages(const TreeAction& a) noexcept {
        return a.kind == ActionKind::free_pages || a.kind == ActionKind::free_swa ||
               a.kind == ActionKind::recover_swa_locked_full || (copies(a) && a.component != Component::mamba);
    }
    static bool uses_states(const TreeAction& a) noexcept {
        return a.kind == ActionKind::free_states || (copies(a) && a.component == Component::mamba);
    }
    void take(TreeActions& other) noexcept {
        actions_ = std::move(other.actions_);
        pages_ = std::move(other.pages_);
        states_ = std::move(other.states_);
        hosts_ = std::move(other.hosts_);
        executed_ = std::exchange(other.executed_, true);
        other.actions_.clear();
    }
    void report_if_unexecuted() noexcept {
        if (!executed()) detail::DropReport::report(Dropped::actions);
        executed_ = true;
    }

    std::vector<TreeAction> actions_;
    std::vector<VirtualPage> pages_;
    std::vector<StateId> states_;
    std::vector<HostPage> hosts_;
    bool executed_ = false;
};

namespace detail {

/// Appends actions to a `TreeActions`. Consecutive frees of the same kind and component merge into one action,
/// so both tree cores produce identical lists for identical decisions. Only the tree cores construct one, so
/// user code cannot append to a list a tree returned.
class ActionsBuilder {
    template <class...>
    friend class ::unikv::RadixTree;
    template <class...>
    friend class ::unikv::ReferenceTree;

    explicit ActionsBuilder(TreeActions& list) noexcept : out(list) {}

    TreeActions& out;

public:

    void free_pages(std::span<const VirtualPage> pages) { append_pages(ActionKind::free_pages, pages); }
    void free_swa(std::span<const VirtualPage> pages) { append_pages(ActionKind::free_swa, pages); }
    void free_state(StateId s) {
        if (!mergeable(ActionKind::free_states, Component::mamba)) {
            open(ActionKind::free_states, Component::mamba, static_cast<std::uint32_t>(out.states_.size()));
        }
        out.states_.push_back(s);
        ++out.actions_.back().count;
    }
    void free_host(Component c, std::span<const HostPage> hosts) {
        if (hosts.empty()) return;
        if (!mergeable(ActionKind::free_host, c)) {
            open(ActionKind::free_host, c, static_cast<std::uint32_t>(out.hosts_.size()));
        }
        out.hosts_.insert(out.hosts_.end(), hosts.begin(), hosts.end());
        out.actions_.back().count += static_cast<std::uint32_t>(hosts.size());
    }
    // A `backup` or `write_through` (`kind`) of `node`'s pages or state.
    void copy_pages(ActionKind kind, Component c, NodeRef node, std::span<const VirtualPage> pages) {
        open(kind, c, static_cast<std::uint32_t>(out.pages_.size()));
        out.actions_.back().node = node;
        out.pages_.insert(out.pages_.end(), pages.begin(), pages.end());
        out.actions_.back().count = static_cast<std::uint32_t>(pages.size());
    }
    void copy_state(ActionKind kind, NodeRef node, StateId s) {
        open(kind, Component::mamba, static_cast<std::uint32_t>(out.states_.size()));
        out.actions_.back().node = node;
        out.states_.push_back(s);
        out.actions_.back().count = 1;
    }
    void recover_swa_locked_full(std::span<const VirtualPage> kept, std::span<const VirtualPage> incoming) {
        open(ActionKind::recover_swa_locked_full, Component::full, static_cast<std::uint32_t>(out.pages_.size()));
        out.pages_.insert(out.pages_.end(), kept.begin(), kept.end());
        out.actions_.back().count = static_cast<std::uint32_t>(kept.size());
        out.actions_.back().second = static_cast<std::uint32_t>(out.pages_.size());
        out.pages_.insert(out.pages_.end(), incoming.begin(), incoming.end());
    }

private:
    Component pages_component(ActionKind k) const noexcept {
        return k == ActionKind::free_swa ? Component::swa : Component::full;
    }
    bool mergeable(ActionKind k, Component c) const noexcept {
        return !out.actions_.empty() && out.actions_.back().kind == k && out.actions_.back().component == c;
    }
    void open(ActionKind k, Component c, std::uint32_t first) {
        TreeAction a;
        a.kind = k;
        a.component = c;
        a.first = first;
        out.actions_.push_back(a);
        out.executed_ = false;
    }
    void append_pages(ActionKind k, std::span<const VirtualPage> pages) {
        if (pages.empty()) return;
        if (!mergeable(k, pages_component(k))) {
            open(k, pages_component(k), static_cast<std::uint32_t>(out.pages_.size()));
        }
        out.pages_.insert(out.pages_.end(), pages.begin(), pages.end());
        out.actions_.back().count += static_cast<std::uint32_t>(pages.size());
    }
};

}  // namespace detail
}  // namespace unikv

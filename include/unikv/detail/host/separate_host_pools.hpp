#pragma once
/// \file
/// The body of `SeparateHostPools`: one pinned buffer per component of the layout, a free stack per buffer.
/// Pages never move, so a logical host page is its physical page; the lease protocol still holds (leases
/// translate, and the destructor waits for released leases' copies before freeing the buffers).

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include <unikv/arena/model.hpp>
#include <unikv/backend/backend_concept.hpp>
#include <unikv/component.hpp>
#include <unikv/error.hpp>
#include <unikv/host/host_capacity.hpp>
#include <unikv/host/host_lease.hpp>
#include <unikv/host/host_pool_concept.hpp>
#include <unikv/ids.hpp>
#include <unikv/pools/layout.hpp>

namespace unikv::detail::host {

template <class B, class L>
class separate_host_pools_impl {
    static_assert(check_layout<L, B>());

public:
    using stream_ref = typename B::stream_ref;
    /// The components with a host pool: the layout's.
    static constexpr ComponentMask components = layout_components_v<L>;

    /// Allocates one zero-filled pinned buffer per component, sized by `host_pages_for(device, components,
    /// config)` pages of `device[c].page_bytes` bytes. Throws `logic_error` for a device spec that lacks one
    /// of the layout's pools or a bad `config`, `out_of_memory` when pinned memory runs out. `stream` is
    /// unused (nothing ever moves) but kept for the protocol.
    separate_host_pools_impl(B& backend, const ArenaSpec& device, const HostConfig& config, stream_ref /*stream*/) {
        for (Component c : all_components) {
            UNIKV_EXPECTS(!components.has(c) || (device[c].present && device[c].page_bytes > 0),
                          "the device spec has no ", to_string(c), " pool but the layout does; build the spec "
                          "for the same layout");
        }
        const per_component<std::int32_t> pages = host_pages_for(device, components, config);
        for (Component c : all_components) {
            if (!components.has(c)) continue;
            const auto n = static_cast<std::size_t>(pages[c]);
            pool& p = pools_[c];
            p.buffer = backend.allocate_pinned(n * device[c].page_bytes);
            lease_side& s = leases_.sides()[c];
            s.region = p.buffer.region();
            s.page_bytes = device[c].page_bytes;
            s.to_physical.assign(n, -1);
            p.free.reserve(n);
            for (std::size_t i = n; i-- > 0;) p.free.push_back(static_cast<std::int32_t>(i));  // hands out 0, 1, ...
        }
    }

    separate_host_pools_impl(separate_host_pools_impl&&) noexcept = default;
    /// Waits for the released leases' copies of the replaced pools before freeing their buffers.
    separate_host_pools_impl& operator=(separate_host_pools_impl&& o) noexcept {
        if (this != &o) {
            leases_.synchronize_released();
            pools_ = std::move(o.pools_);
            leases_ = std::move(o.leases_);
        }
        return *this;
    }

    /// Bytes of a host page of `c` (its device envelope); 0 for a component without a host pool.
    [[nodiscard]] std::size_t page_bytes(Component c) const noexcept { return leases_.sides()[c].page_bytes; }
    /// Pages of `c` in all.
    [[nodiscard]] std::int32_t capacity(Component c) const noexcept {
        return static_cast<std::int32_t>(leases_.sides()[c].to_physical.size());
    }
    /// Pages of `c` allocated.
    [[nodiscard]] std::int32_t used(Component c) const noexcept { return capacity(c) - available(c); }
    /// Pages of `c` free.
    [[nodiscard]] std::int32_t available(Component c) const noexcept {
        return static_cast<std::int32_t>(pools_[c].free.size());
    }

    /// All of `batch` or nothing; on failure names the first component (FULL, SWA, Mamba order) that fell short
    /// and by how many pages (`HostShortfall::capacity`). O(pages), no allocation.
    HostAllocResult alloc(std::span<const HostRequest> batch) {
        per_component<std::int32_t> need{};
        for (const HostRequest& r : batch) need[r.component] += static_cast<std::int32_t>(r.out.size());
        for (Component c : all_components) {
            if (need[c] > available(c)) {
                return {.missing = {c, need[c] - available(c)}, .shortfall = HostShortfall::capacity};
            }
        }
        for (const HostRequest& r : batch) {
            pool& p = pools_[r.component];
            std::vector<std::int32_t>& table = leases_.sides()[r.component].to_physical;
            for (HostPage& out : r.out) {
                const std::int32_t page = p.free.back();
                p.free.pop_back();
                table[static_cast<std::size_t>(page)] = page;
                out = HostPage{page};
            }
        }
        return {};
    }

    /// Returns `pages` of `c` to its pool. Throws `logic_error` (nothing freed) for a page not allocated to
    /// `c` or listed twice. O(n), no allocation.
    void free(Component c, std::span<const HostPage> pages) {
        std::vector<std::int32_t>& table = leases_.sides()[c].to_physical;
        expect_allocated_once("SeparateHostPools::free", c, table, pages);
        for (HostPage h : pages) {
            table[static_cast<std::size_t>(h.value())] = -1;
            pools_[c].free.push_back(h.value());
        }
    }

    /// A lease over every component's pages. O(1).
    [[nodiscard]] HostLease<B> lease() noexcept { return leases_.acquire(); }
    /// True while a lease is held.
    [[nodiscard]] bool leased() const noexcept { return leases_.held(); }

    /// Every broken invariant, one line each (empty: healthy): each free page unallocated and listed once,
    /// each allocated page mapped to itself, and the counts adding up. O(capacity).
    [[nodiscard]] std::vector<std::string> verify() const {
        std::vector<std::string> out;
        for (Component c : all_components) {
            const std::vector<std::int32_t>& table = leases_.sides()[c].to_physical;
            std::vector<bool> seen(table.size(), false);
            for (std::int32_t p : pools_[c].free) {
                if (p < 0 || static_cast<std::size_t>(p) >= table.size() || seen[static_cast<std::size_t>(p)] ||
                    table[static_cast<std::size_t>(p)] != -1) {
                    out.push_back(concat(to_string(c), ": free page ", p, " is out of range, listed twice or mapped"));
                    continue;
                }
                seen[static_cast<std::size_t>(p)] = true;
            }
            for (std::size_t p = 0; p < table.size(); ++p) {
                if (!seen[p] && table[p] != static_cast<std::int32_t>(p)) {
                    out.push_back(concat(to_string(c), ": page ", p, " is neither free nor mapped to itself (", table[p], ")"));
                }
            }
        }
        return out;
    }

private:
    struct pool {
        pinned_buffer_t<B> buffer{};
        std::vector<std::int32_t> free;  // free pages, handed out from the back; capacity reserved up front
    };
    // Declared last, so destroyed first: the registry waits for released leases' copies while the buffers
    // they touch still exist (the move assignment keeps the same order).
    per_component<pool> pools_{};
    lease_registry<B> leases_;
};

}  // namespace unikv::detail::host

#pragma once
// Bodies of `retract` and `restore` (transfer/retraction.hpp).

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

namespace unikv {

namespace detail {

struct retraction_access {
    static per_component<std::vector<HostPage>>& host(RetractionBackup& b) noexcept { return b.host_; }
    static void make_live(RetractionBackup& b, std::int32_t window_first) noexcept {
        b.window_first_ = window_first;
        b.live_ = true;
    }
    static RetractionBackup failed(RetractionFailure why, Pages missing = {}) {
        RetractionBackup b;
        b.failure_ = why;
        b.missing_ = missing;
        return b;
    }
};

// The request's own pages whose SWA rows are in the window, as a suffix of `own` from `first`.
struct retraction_window {
    std::int32_t first = 0;
    std::int32_t pages = 0;
};

// Checks `r`'s geometry against the allocator's page size and returns its window; every SWA row of the
// window must be mapped. Throws `logic_error` naming `call` otherwise.
template <class Alloc>
retraction_window retraction_window_of(const Alloc& alloc, const RetractionRequest& r, const char* call) {
    const std::int32_t page = alloc.spec()[Component::full].page_size;
    UNIKV_EXPECTS(r.prefix_tokens >= 0 && r.prefix_tokens % page == 0, call, ": prefix_tokens ", r.prefix_tokens,
                  " is not a whole number of pages of ", page, " tokens");
    UNIKV_EXPECTS(r.seq_len >= r.prefix_tokens, call, ": seq_len ", r.seq_len, " is shorter than the prefix (",
                  r.prefix_tokens, " tokens)");
    const auto own_pages = static_cast<std::int32_t>(ceil_div(static_cast<std::size_t>(r.seq_len),
                                                              static_cast<std::size_t>(page))) -
                           r.prefix_tokens / page;
    UNIKV_EXPECTS(static_cast<std::int32_t>(r.own.size()) == own_pages, call, ": ", r.own.size(),
                  " own pages given, but tokens [", r.prefix_tokens, ", ", r.seq_len, ") take ", own_pages);
    retraction_window w;
    if constexpr (Alloc::has_swa) {
        UNIKV_EXPECTS(r.window_tokens > 0, call, ": window_tokens is ", r.window_tokens,
                      "; give the SWA window W of the model");
        const std::int32_t first_page = std::max(0, r.seq_len - r.window_tokens) / page;
        w.first = std::clamp(first_page - r.prefix_tokens / page, 0, own_pages);
        w.pages = own_pages - w.first;
        std::vector<PhysicalPage> physical(static_cast<std::size_t>(w.pages));
        const std::span<const VirtualPage> window = r.own.subspan(static_cast<std::size_t>(w.first));
        alloc.translate_swa(window, physical);
        for (std::size_t i = 0; i < physical.size(); ++i) {
            UNIKV_EXPECTS(physical[i].value() != 0, call, ": the SWA rows of window page ", window[i].value(),
                          " are not mapped (a tombstone or unallocated); every page of the window must be");
        }
    }
    return w;
}

// The transfer of `r`'s own pages against the backup's host pages.
inline TransferRequest retraction_transfer(const RetractionRequest& r, retraction_window w,
                                           const per_component<std::vector<HostPage>>& host) {
    return TransferRequest{.full = r.own,
                           .full_host = host[Component::full],
                           .swa = r.own.subspan(static_cast<std::size_t>(w.first), static_cast<std::size_t>(w.pages)),
                           .swa_host = host[Component::swa]};
}

}  // namespace detail

template <class L, class B, class HostPools, class Tag, class Relieve>
RetractionBackup retract(UnifiedAllocator<L, B>& alloc, HostPools& host, TransferController<B, HostPools, Tag>& ctl,
                         const RetractionRequest& request, Relieve&& relieve_host, Tag tag) {
    static_assert(check_retraction<L>());
    using access = detail::retraction_access;
    if constexpr (!retraction_supports_layout_v<L>) {
        return RetractionBackup{};
    } else {
        UNIKV_EXPECTS(ctl.queued(TransferDirection::write) == 0 && ctl.in_flight(TransferDirection::write) == 0,
                      "retract: the controller has ", ctl.queued(TransferDirection::write), " writes queued and ",
                      ctl.in_flight(TransferDirection::write),
                      " unacknowledged; drain them first (retraction drains its own write)");
        const detail::retraction_window w = detail::retraction_window_of(alloc, request, "retract");
        RetractionBackup backup;
        if (request.own.empty()) {  // the prefix covers the sequence: nothing of its own to copy
            access::make_live(backup, 0);
            return backup;
        }
        per_component<std::vector<HostPage>>& pages = access::host(backup);
        pages[Component::full].resize(request.own.size());
        pages[Component::swa].resize(static_cast<std::size_t>(w.pages));
        const HostRequest batch[] = {{Component::full, pages[Component::full]},
                                     {Component::swa, pages[Component::swa]}};
        const std::span<const HostRequest> asked(batch, UnifiedAllocator<L, B>::has_swa ? 2 : 1);
        const HostAllocResult got = detail::with_relief([&] { return host.alloc(asked); }, relieve_host);
        if (!got) return access::failed(RetractionFailure::host_full, got.missing);
        access::make_live(backup, w.first);
        try {
            ctl.queue_write(alloc, detail::retraction_transfer(request, w, pages), std::move(tag));
            static_cast<void>(ctl.start_writing(alloc, host));
        } catch (...) {
            backup.discard(host);  // nothing was submitted: the host pages are unused
            throw;
        }
        const std::span<const TransferAck<Tag>> acks = ctl.drain_writes();
        if (acks.size() != 1 || !acks[0].succeeded) {
            backup.discard(host);  // the copy finished (failed): nothing reads the host pages any more
            return access::failed(RetractionFailure::copy_failed);
        }
        return backup;
    }
}

template <class L, class B, class HostPools, class Tag>
bool restore(UnifiedAllocator<L, B>& alloc, HostPools& host, TransferController<B, HostPools, Tag>& ctl,
             RetractionBackup& backup, const RetractionRequest& fresh, Tag tag) {
    static_assert(check_retraction<L>());
    if constexpr (!retraction_supports_layout_v<L>) {
        return false;
    } else {
        UNIKV_EXPECTS(static_cast<bool>(backup), "restore: the backup is not live (failed, restored, discarded or "
                                                 "moved from)");
        UNIKV_EXPECTS(ctl.queued(TransferDirection::load) == 0 && ctl.in_flight(TransferDirection::load) == 0,
                      "restore: the controller has ", ctl.queued(TransferDirection::load), " loads queued and ",
                      ctl.in_flight(TransferDirection::load), " unacknowledged; acknowledge them first");
        const detail::retraction_window w = detail::retraction_window_of(alloc, fresh, "restore");
        UNIKV_EXPECTS(static_cast<std::int32_t>(fresh.own.size()) == backup.full_pages() &&
                          w.first == backup.window_first() && w.pages == backup.window_pages(),
                      "restore: the fresh request has ", fresh.own.size(), " own pages and window [", w.first, ", +",
                      w.pages, "), the backup ", backup.full_pages(), " and [", backup.window_first(), ", +",
                      backup.window_pages(), ")");
        if (fresh.own.empty()) {
            backup.discard(host);
            return true;
        }
        ctl.queue_load(alloc, detail::retraction_transfer(fresh, w, detail::retraction_access::host(backup)),
                       std::move(tag));
        static_cast<void>(ctl.start_loading(alloc, host));
        ctl.stream().synchronize();
        const std::span<const TransferAck<Tag>> acks = ctl.loading_check();
        UNIKV_EXPECTS(acks.size() == 1, "restore: ", acks.size(), " loads acknowledged after the synchronization");
        if (!acks[0].succeeded) return false;
        backup.discard(host);
        return true;
    }
}

}  // namespace unikv

#pragma once
/// \file
/// `TransferController` definitions. Included at the bottom of `transfer/transfer_controller.hpp`.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

namespace unikv {

namespace detail {
/// A fresh owner id for a controller's transfer keys (never 0, so 0 can mean "pick one").
inline std::uint64_t next_transfer_owner() noexcept {
    static std::atomic<std::uint64_t> next{1};
    return next.fetch_add(1, std::memory_order_relaxed);
}
}  // namespace detail

template <class B, class H, class T>
TransferController<B, H, T>::TransferController(B& backend, TransferOptions options)
    : backend_(backend),
      options_(options),
      owner_(options.owner != 0 ? options.owner : detail::next_transfer_owner()),
      stream_(backend.make_stream()) {}

// ---- queueing -------------------------------------------------------------------------------------------------

template <class B, class H, class T>
template <class L>
void TransferController<B, H, T>::queue_write(UnifiedAllocator<L, B>& alloc, const TransferRequest& request, T tag) {
    UNIKV_EXPECTS(request.swa_reserved.empty(), "queue_write: swa_reserved names load destinations; a write reads "
                  "SWA rows through request.swa");
    enqueue(alloc, request, std::move(tag), TransferDirection::write, "queue_write");
}

template <class B, class H, class T>
template <class L>
void TransferController<B, H, T>::queue_load(UnifiedAllocator<L, B>& alloc, const TransferRequest& request, T tag) {
    UNIKV_EXPECTS(request.swa.empty() || request.swa_reserved.empty(), "queue_load: give the SWA destination as "
                  "virtual pages (swa) or as reserved physical pages (swa_reserved), not both");
    enqueue(alloc, request, std::move(tag), TransferDirection::load, "queue_load");
}

template <class B, class H, class T>
template <class L>
void TransferController<B, H, T>::enqueue(UnifiedAllocator<L, B>& alloc, const TransferRequest& request, T&& tag,
                                          TransferDirection d, const char* call) {
    const std::size_t swa_device = request.swa.size() + request.swa_reserved.size();
    const per_component<std::size_t> device{{request.full.size(), swa_device, request.mamba.size()}};
    const per_component<std::span<const HostPage>> host{{request.full_host, request.swa_host, request.mamba_host}};
    ComponentMask components;
    for (Component c : all_components) {
        if (device[c] != host[c].size()) {
            detail::misuse(call, to_string(c), ": ", device[c], " device ids but ", host[c].size(), " host pages");
        }
        if (device[c] == 0) continue;
        if (!alloc.spec()[c].present) detail::misuse(call, "the layout has no ", to_string(c), " pool");
        components = components.with(c);
    }
    if (components.empty()) detail::misuse(call, "the transfer names no pages");

    std::uint32_t index = 0;
    if (free_records_.empty()) {
        index = static_cast<std::uint32_t>(records_.size());
        records_.emplace_back();
    } else {
        index = free_records_.back();
        free_records_.pop_back();
    }
    try {
        record& r = records_[index];
        r.components = components;
        for (Component c : all_components) {
            r.device[c].clear();
            r.host[c].assign(host[c].begin(), host[c].end());
            if (components.has(c)) translate(alloc, request, r, c, call);
        }
        lane(d).queued.push_back(index);
        r.tag = std::move(tag);
    } catch (...) {
        free_records_.push_back(index);
        throw;
    }
    // (void): nvcc reads the assignment's `MoveGateHold&` as a discarded [[nodiscard]] value.
    if (!hold_.holding()) (void)(hold_ = alloc.install_move_gate(MoveGateSlot::host_transfer));
}

template <class B, class H, class T>
template <class L>
void TransferController<B, H, T>::translate(const UnifiedAllocator<L, B>& alloc, const TransferRequest& request,
                                            record& r, Component c, const char* call) {
    const SubPoolSpec& spec = alloc.spec()[c];
    std::vector<std::int32_t>& out = r.device[c];
    const auto check = [&](std::size_t i, std::int32_t id, std::int32_t page) {
        if (page < spec.min_page || page >= spec.num_pages) {
            detail::misuse(call, to_string(c), " id ", id, " (entry ", i, ") maps to physical page ", page,
                           c == Component::swa ? ": not allocated, or an SWA tombstone" : ": not allocated");
        }
        out.push_back(page);
    };
    if (c == Component::swa && !request.swa_reserved.empty()) {
        for (std::size_t i = 0; i < request.swa_reserved.size(); ++i) {
            check(i, request.swa_reserved[i].value(), request.swa_reserved[i].value());
        }
        return;
    }
    const auto gather = [&]<class Id>(std::span<const Id> ids, auto&& translate_ids) {
        scratch_.resize(ids.size());
        translate_ids(ids, std::span<PhysicalPage>(scratch_));
        for (std::size_t i = 0; i < ids.size(); ++i) check(i, ids[i].value(), scratch_[i].value());
    };
    switch (c) {
        case Component::full:
            gather(request.full, [&](auto in, auto o) { alloc.translate_full(in, o); });
            break;
        case Component::swa:
            if constexpr (UnifiedAllocator<L, B>::has_swa) {
                gather(request.swa, [&](auto in, auto o) { alloc.translate_swa(in, o); });
            }
            break;
        case Component::mamba:
            if constexpr (UnifiedAllocator<L, B>::has_mamba) {
                gather(request.mamba, [&](auto in, auto o) { alloc.translate_state(in, o); });
            }
            break;
    }
}

// ---- submission -----------------------------------------------------------------------------------------------

template <class B, class H, class T>
bool TransferController<B, H, T>::distinct(std::span<const std::int32_t> pages) {
    bool ok = true;
    std::size_t marked = 0;
    for (; marked < pages.size(); ++marked) {
        const auto p = static_cast<std::size_t>(pages[marked]);
        if (p >= marks_.size()) marks_.resize(p + 1, 0);
        if (marks_[p] != 0) {
            ok = false;
            break;
        }
        marks_[p] = 1;
    }
    for (std::size_t i = 0; i < marked; ++i) marks_[static_cast<std::size_t>(pages[i])] = 0;
    return ok;
}

template <class B, class H, class T>
template <class L, class Lease>
void TransferController<B, H, T>::prepare_submission(UnifiedAllocator<L, B>& alloc, Lease& lease, lane_state& l,
                                                     TransferDirection d) {
    // Everything a copy call could refuse is checked before anything is queued, so a caller bug throws with
    // nothing submitted; the queue is dropped then: the controller stays usable, and the caller still owns
    // all it allocated. A load batch goes out as one copy per (layer, component), so its pages are gathered.
    const char* call = d == TransferDirection::write ? "start_writing" : "start_loading";
    try {
        for (Component c : all_components) {
            batch_device_[c].clear();
            batch_host_[c].clear();
        }
        for (const std::uint32_t index : l.queued) {
            record& r = records_[index];
            for (Component c : all_components) {
                if (!r.components.has(c)) continue;
                r.host_physical[c].resize(r.host[c].size());
                lease.physical(c, std::span<const HostPage>(r.host[c]), std::span<std::int32_t>(r.host_physical[c]));
                if (d == TransferDirection::write) {
                    if (!distinct(r.host_physical[c])) {
                        detail::misuse(call, "a write lists one ", to_string(c), " host page twice");
                    }
                } else {
                    batch_device_[c].insert(batch_device_[c].end(), r.device[c].begin(), r.device[c].end());
                    batch_host_[c].insert(batch_host_[c].end(), r.host_physical[c].begin(), r.host_physical[c].end());
                }
            }
        }
        for (Component c : all_components) {
            if (!distinct(batch_device_[c])) {
                detail::misuse(call, "the queued loads write one ", to_string(c), " device page twice");
            }
        }
    } catch (...) {
        free_records_.insert(free_records_.end(), l.queued.begin(), l.queued.end());
        l.queued.clear();
        release_gate_if_idle();
        throw;
    }
    // Moves queued on the allocator's stream before the ids were translated must run before the copies.
    if (!order_) order_.emplace(backend_.make_event());
    order_->ref().record(alloc.stream());
    stream().wait(order_->ref());
}

template <class B, class H, class T>
template <class L, class Lease>
void TransferController<B, H, T>::finish_submission(UnifiedAllocator<L, B>& alloc, Lease&& lease, lane_state& l,
                                                    TransferDirection d, event_ref last) {
    l.running.insert(l.running.end(), l.queued.begin(), l.queued.end());
    l.queued.clear();
    alloc.set_transfer_done_event(TransferKey{.owner = owner_, .direction = d}, last);
    std::move(lease).release_after(last);
}

template <class B, class H, class T>
auto TransferController<B, H, T>::done_event(record& r) -> event_ref {
    if (!r.done) r.done.emplace(backend_.make_event());
    return r.done->ref();
}

template <class B, class H, class T>
template <class L>
std::size_t TransferController<B, H, T>::start_writing(UnifiedAllocator<L, B>& alloc, H& host) {
    lane_state& l = writes_;
    if (l.queued.empty()) return 0;
    auto lease = host.lease();
    prepare_submission(alloc, lease, l, TransferDirection::write);
    event_ref last;
    for (const std::uint32_t index : l.queued) {
        record& r = records_[index];
        for (Component c : all_components) {
            if (!r.components.has(c)) continue;
            backend_.copy_pages_async(alloc.region(), std::span<const std::int32_t>(r.device[c]), lease.region(c),
                                      std::span<const std::int32_t>(r.host_physical[c]), alloc.spec()[c].page_bytes,
                                      stream());
            l.bytes += r.device[c].size() * alloc.spec()[c].page_bytes;
        }
        last = done_event(r);
        last.record(stream());
    }
    const std::size_t submitted = l.queued.size();
    finish_submission(alloc, std::move(lease), l, TransferDirection::write, last);
    return submitted;
}

template <class B, class H, class T>
template <class L>
std::size_t TransferController<B, H, T>::start_loading(UnifiedAllocator<L, B>& alloc, H& host) {
    lane_state& l = loads_;
    if (l.queued.empty()) return 0;
    auto lease = host.lease();
    prepare_submission(alloc, lease, l, TransferDirection::load);
    const ArenaSpec& spec = alloc.spec();
    for (Component c : all_components) l.bytes += batch_device_[c].size() * spec[c].page_bytes;
    const auto copy = [&](Component c, EnvelopeSlice slice) {
        if (batch_device_[c].empty()) return;
        backend_.copy_page_slices_async(lease.region(c), std::span<const std::int32_t>(batch_host_[c]), alloc.region(),
                                        std::span<const std::int32_t>(batch_device_[c]), spec[c].page_bytes, slice,
                                        stream());
    };
    const std::int32_t layers = spec.load_layers();
    const bool per_layer = options_.load_events == LoadEvents::per_layer;
    const std::size_t events = per_layer ? static_cast<std::size_t>(layers) : 1;
    while (layer_events_.size() < events) layer_events_.push_back(backend_.make_event());
    layers_ = layers;
    // Mamba state slots are whole envelopes, loaded before the first layer (its event covers them).
    if (!batch_device_[Component::mamba].empty()) {
        copy(Component::mamba, EnvelopeSlice::whole(spec[Component::mamba].page_bytes));
    }
    if (per_layer) {
        for (std::int32_t layer = 0; layer < layers; ++layer) {
            for (Component c : {Component::full, Component::swa}) {
                if (spec[c].present && layer < spec[c].layers) copy(c, spec[c].layer_slice(layer));
            }
            layer_events_[static_cast<std::size_t>(layer)].ref().record(stream());
        }
    } else {
        for (Component c : {Component::full, Component::swa}) {
            if (spec[c].present) copy(c, EnvelopeSlice::whole(spec[c].page_bytes));
        }
        layer_events_[0].ref().record(stream());
    }
    event_ref last;
    for (const std::uint32_t index : l.queued) {
        last = done_event(records_[index]);
        last.record(stream());
    }
    const std::size_t submitted = l.queued.size();
    finish_submission(alloc, std::move(lease), l, TransferDirection::load, last);
    return submitted;
}

// ---- acknowledgement ------------------------------------------------------------------------------------------

template <class B, class H, class T>
void TransferController<B, H, T>::recycle(lane_state& l) noexcept {
    free_records_.insert(free_records_.end(), l.retired.begin(), l.retired.end());
    l.retired.clear();
    l.acks.clear();
}

template <class B, class H, class T>
auto TransferController<B, H, T>::acknowledge(lane_state& l, TransferDirection d) -> std::span<const ack_type> {
    recycle(l);
    for (; l.head < l.running.size(); ++l.head) {
        const std::uint32_t index = l.running[l.head];
        record& r = records_[index];
        const event_ref e = r.done->ref();
        if (!e.query()) break;
        ack_type& ack = l.acks.emplace_back();
        ack.tag = r.tag;
        ack.direction = d;
        ack.components = r.components;
        for (Component c : all_components) ack.host[c] = std::span<const HostPage>(r.host[c]);
        ack.succeeded = !e.failed();
        l.retired.push_back(index);
    }
    // Drop the acked prefix once it is half the FIFO, so a lane that is never empty does not grow.
    if (l.head == l.running.size() || 2 * l.head >= l.running.size() + 64) {
        l.running.erase(l.running.begin(), l.running.begin() + static_cast<std::ptrdiff_t>(l.head));
        l.head = 0;
    }
    release_gate_if_idle();
    return l.acks;
}

template <class B, class H, class T>
auto TransferController<B, H, T>::writing_check() -> std::span<const ack_type> {
    return acknowledge(writes_, TransferDirection::write);
}

template <class B, class H, class T>
auto TransferController<B, H, T>::loading_check() -> std::span<const ack_type> {
    return acknowledge(loads_, TransferDirection::load);
}

template <class B, class H, class T>
auto TransferController<B, H, T>::drain_writes() -> std::span<const ack_type> {
    UNIKV_EXPECTS(writes_.queued.empty(), "drain_writes: ", writes_.queued.size(),
                  " writes are queued but not submitted; call start_writing first");
    // One FIFO stream: the last write's event completes after every earlier one.
    if (writes_.head < writes_.running.size()) records_[writes_.running.back()].done->ref().synchronize();
    return acknowledge(writes_, TransferDirection::write);
}

template <class B, class H, class T>
void TransferController<B, H, T>::release_gate_if_idle() noexcept {
    if (!has_inflight()) hold_.release();
}

// ---- per-layer load events ------------------------------------------------------------------------------------

template <class B, class H, class T>
void TransferController<B, H, T>::wait_layer(stream_ref compute, std::int32_t layer) const {
    if (layers_ == 0) return;
    UNIKV_EXPECTS(layer >= 0 && layer < layers_, "wait_layer: layer ", layer, " is outside [0, ", layers_, ")");
    const std::size_t slot = options_.load_events == LoadEvents::per_layer ? static_cast<std::size_t>(layer) : 0;
    compute.wait(layer_events_[slot].ref());
}

}  // namespace unikv

#pragma once
// Definitions of `SharedStorage` and its shares (storage/shared_storage.hpp).

#include <utility>

#include <unikv/error.hpp>

namespace unikv {

namespace detail::storage {

inline std::uint32_t share_board::open() {
    std::uint32_t i = 0;
    if (!free_.empty()) {
        i = free_.back();
        free_.pop_back();
    } else {
        UNIKV_EXPECTS(inboxes_.size() < dropped, "SharedStorage: ", inboxes_.size(), " shares exist already");
        free_.reserve(inboxes_.size() + 1);  // room for every inbox, so `close` never allocates
        inboxes_.emplace_back();
        i = static_cast<std::uint32_t>(inboxes_.size() - 1);
    }
    inboxes_[i].live = true;
    ++live_;
    return i;
}

inline void share_board::close(std::uint32_t inbox) noexcept {
    for (auto& [ticket, owner] : owners_) {
        if (owner == inbox) owner = dropped;
    }
    share_inbox& b = inboxes_[inbox];
    UNIKV_ASSERT(b.live);
    b.live = false;
    b.in_flight = 0;
    b.filed.clear();
    b.filed_results.clear();
    b.out.clear();
    b.out_results.clear();
    free_.push_back(inbox);  // within the capacity `open` reserved
    --live_;
}

inline void share_board::prepare() {
    if (spare_.empty()) {
        // A new node, made by inserting ticket 0 (no batch: never a store's) and taking it out again.
        spare_.reserve(owners_.size() + 1);  // every node in existence, this one included
        owners_.emplace(0, dropped);
        spare_.push_back(owners_.extract(0));
    }
    owners_.reserve(owners_.size() + 1);  // the insert in `own` does not rehash
}

inline void share_board::own(StorageTicket ticket, std::uint32_t inbox) noexcept {
    if (!ticket) return;  // no batch: nothing will be answered
    UNIKV_ASSERT(!spare_.empty());
    owner_map::node_type node = std::move(spare_.back());
    spare_.pop_back();
    node.key() = ticket.value;
    node.mapped() = inbox;
    auto placed = owners_.insert(std::move(node));
    UNIKV_ASSERT(placed.inserted);  // the store's tickets are unique
    if (!placed.inserted) spare_.push_back(std::move(placed.node));
    ++inboxes_[inbox].in_flight;
}

inline void share_board::file(std::span<const StorageDone> answers) {
    for (const StorageDone& d : answers) {
        const auto it = owners_.find(d.ticket.value);
        UNIKV_ASSERT(it != owners_.end());  // every batch in the store came through a share
        if (it == owners_.end()) continue;
        const std::uint32_t owner = it->second;
        spare_.push_back(owners_.extract(it));  // within the capacity kept for every node
        if (owner == dropped) continue;         // its share is gone
        share_inbox& b = inboxes_[owner];
        b.filed.push_back({.ticket = d.ticket, .op = d.op, .first = b.filed_results.size(), .count = d.results.size()});
        b.filed_results.insert(b.filed_results.end(), d.results.begin(), d.results.end());
    }
}

inline std::span<const StorageDone> share_board::take(std::uint32_t inbox) {
    share_inbox& b = inboxes_[inbox];
    b.out.clear();
    b.out_results.clear();
    b.out_results.swap(b.filed_results);
    const std::span<const PageResult> results(b.out_results);
    for (const filed_answer& a : b.filed)
        b.out.push_back({.ticket = a.ticket, .op = a.op, .results = results.subspan(a.first, a.count)});
    b.in_flight -= b.filed.size();
    b.filed.clear();
    return b.out;
}

}  // namespace detail::storage

// ---- SharedStorage ------------------------------------------------------------------------------------------

template <class S>
SharedStorage<S>::SharedStorage(S store) : state_(std::make_unique<state>(std::move(store))) {
    static_assert(check_storage_backend<Share>());
}

template <class S>
SharedStorage<S>& SharedStorage<S>::operator=(SharedStorage&& other) noexcept {
    if (this != &other) {
        UNIKV_ASSERT(shares() == 0);  // its shares would point at a store destroyed here
        state_ = std::move(other.state_);
    }
    return *this;
}

template <class S>
SharedStorage<S>::~SharedStorage() {
    UNIKV_ASSERT(shares() == 0);  // a share outliving its SharedStorage would point at a destroyed store
}

template <class S>
auto SharedStorage<S>::share() -> Share {
    if (state_ == nullptr) detail::misuse("SharedStorage::share", "the SharedStorage was moved from");
    return Share(state_.get(), state_->board.open());
}

template <class S>
const S& SharedStorage<S>::store() const {
    if (state_ == nullptr) detail::misuse("SharedStorage::store", "the SharedStorage was moved from");
    return state_->store;
}

// ---- SharedStorage::Share -----------------------------------------------------------------------------------

template <class S>
SharedStorage<S>::Share::Share(Share&& other) noexcept
    : state_(std::exchange(other.state_, nullptr)), inbox_(other.inbox_) {}

template <class S>
auto SharedStorage<S>::Share::operator=(Share&& other) noexcept -> Share& {
    if (this != &other) {
        release();
        state_ = std::exchange(other.state_, nullptr);
        inbox_ = other.inbox_;
    }
    return *this;
}

template <class S>
SharedStorage<S>::Share::~Share() {
    release();
}

template <class S>
void SharedStorage<S>::Share::release() noexcept {
    if (state_ != nullptr) state_->board.close(inbox_);
    state_ = nullptr;
}

template <class S>
auto SharedStorage<S>::Share::held(const char* call) const -> state& {
    if (state_ == nullptr)
        detail::misuse(call,
                       "the share is empty (default-constructed or moved from); take one from SharedStorage::share()");
    return *state_;
}

template <class S>
StorageTicket SharedStorage<S>::Share::exists(std::span<const ObjectKey> keys) {
    state& st = held("SharedStorage::Share::exists");
    st.board.prepare();
    const StorageTicket t = st.store.exists(keys);
    st.board.own(t, inbox_);
    return t;
}

template <class S>
StorageTicket SharedStorage<S>::Share::get(std::span<const ObjectRead> items) {
    state& st = held("SharedStorage::Share::get");
    st.board.prepare();
    const StorageTicket t = st.store.get(items);
    st.board.own(t, inbox_);
    return t;
}

template <class S>
StorageTicket SharedStorage<S>::Share::put(std::span<const ObjectWrite> items) {
    state& st = held("SharedStorage::Share::put");
    st.board.prepare();
    const StorageTicket t = st.store.put(items);
    st.board.own(t, inbox_);
    return t;
}

template <class S>
std::span<const StorageDone> SharedStorage<S>::Share::poll(std::chrono::nanoseconds wait) {
    using clock = std::chrono::steady_clock;
    state& st = held("SharedStorage::Share::poll");
    const detail::storage::share_inbox& me = st.board.inbox(inbox_);
    if (me.filed.empty() && me.in_flight > 0) {
        if (wait < std::chrono::nanoseconds::zero()) wait = std::chrono::nanoseconds::zero();
        const clock::time_point start = clock::now();
        const clock::time_point deadline =
            wait >= clock::time_point::max() - start ? clock::time_point::max()
                                                      : start + std::chrono::duration_cast<clock::duration>(wait);
        std::chrono::nanoseconds left = wait;
        for (;;) {
            st.board.file(st.store.poll(left));  // other shares' answers go to their inboxes
            if (!me.filed.empty() || left <= std::chrono::nanoseconds::zero()) break;
            const clock::time_point now = clock::now();
            if (now >= deadline) break;
            left = deadline - now;
        }
    }
    return st.board.take(inbox_);
}

template <class S>
std::size_t SharedStorage<S>::Share::in_flight() const noexcept {
    return state_ != nullptr ? state_->board.inbox(inbox_).in_flight : 0;
}

template <class S>
StorageStats SharedStorage<S>::Share::stats() const noexcept {
    return state_ != nullptr ? state_->store.stats() : StorageStats{};
}

}  // namespace unikv

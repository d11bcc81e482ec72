#pragma once
/// \file
/// `AnyStorage`: any storage backend behind one type, chosen at run time (an engine's `--storage` flag, the
/// simulator's). A cache bundle names `storage = AnyStorage` once and attaches a `FileStorage`, a
/// `RedisClusterStorage` or a store of its own; the price is one virtual call per batch, nothing per object.
/// It needs separate host pools, as every shipped backend does.

#include <chrono>
#include <cstddef>
#include <memory>
#include <span>
#include <type_traits>
#include <utility>

#include <unikv/error.hpp>
#include <unikv/storage/storage_concept.hpp>

namespace unikv {

/// A storage backend chosen at run time (see the file comment). Move-only; an empty one (default-constructed or
/// moved from) throws `logic_error` from every call.
class AnyStorage {
public:
    static constexpr bool needs_separate_pools = true;

    AnyStorage() = default;
    /// Takes `store` (moved in).
    template <class S>
        requires(is_storage_backend_v<std::remove_cvref_t<S>> && !std::is_same_v<std::remove_cvref_t<S>, AnyStorage>)
    explicit AnyStorage(S&& store) : impl_(std::make_unique<model<std::remove_cvref_t<S>>>(std::forward<S>(store))) {}

    /// True when it holds a store.
    [[nodiscard]] explicit operator bool() const noexcept { return impl_ != nullptr; }
    /// The store held, when it is an `S`; null otherwise.
    template <class S>
    [[nodiscard]] S* get_if() noexcept {
        auto* m = dynamic_cast<model<S>*>(impl_.get());
        return m != nullptr ? &m->store : nullptr;
    }

    StorageTicket exists(std::span<const ObjectKey> keys) { return held("exists").exists(keys); }
    StorageTicket get(std::span<const ObjectRead> items) { return held("get").get(items); }
    StorageTicket put(std::span<const ObjectWrite> items) { return held("put").put(items); }
    std::span<const StorageDone> poll(std::chrono::nanoseconds wait = {}) { return held("poll").poll(wait); }
    [[nodiscard]] std::size_t in_flight() const noexcept { return impl_ != nullptr ? impl_->in_flight() : 0; }
    [[nodiscard]] StorageStats stats() const noexcept { return impl_ != nullptr ? impl_->stats() : StorageStats{}; }

private:
    struct interface {
        virtual ~interface() = default;
        virtual StorageTicket exists(std::span<const ObjectKey> keys) = 0;
        virtual StorageTicket get(std::span<const ObjectRead> items) = 0;
        virtual StorageTicket put(std::span<const ObjectWrite> items) = 0;
        virtual std::span<const StorageDone> poll(std::chrono::nanoseconds wait) = 0;
        [[nodiscard]] virtual std::size_t in_flight() const noexcept = 0;
        [[nodiscard]] virtual StorageStats stats() const noexcept = 0;
    };
    template <class S>
    struct model final : interface {
        template <class T>
        explicit model(T&& s) : store(std::forward<T>(s)) {}
        StorageTicket exists(std::span<const ObjectKey> keys) override { return store.exists(keys); }
        StorageTicket get(std::span<const ObjectRead> items) override { return store.get(items); }
        StorageTicket put(std::span<const ObjectWrite> items) override { return store.put(items); }
        std::span<const StorageDone> poll(std::chrono::nanoseconds wait) override { return store.poll(wait); }
        [[nodiscard]] std::size_t in_flight() const noexcept override { return store.in_flight(); }
        [[nodiscard]] StorageStats stats() const noexcept override { return store.stats(); }
        S store;
    };

    interface& held(const char* call) const {
        if (impl_ == nullptr) detail::misuse(call, "the AnyStorage holds no store; construct it from one");
        return *impl_;
    }

    std::unique_ptr<interface> impl_;
};

static_assert(check_storage_backend<AnyStorage>());

}  // namespace unikv

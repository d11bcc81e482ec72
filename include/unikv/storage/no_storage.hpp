#pragma once
/// \file
/// `NoStorage`: no storage tier below the host tier (the default of a cache bundle).

#include <unikv/storage/storage_concept.hpp>

namespace unikv {

/// No storage tier: host copies are the last tier. Works with either host-pool policy.
struct NoStorage {
    /// Nothing is stored, so nothing constrains the host pools.
    static constexpr bool needs_separate_pools = false;
};

static_assert(check_storage_policy<NoStorage>());

}  // namespace unikv

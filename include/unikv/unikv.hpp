#pragma once
/// \file
/// Umbrella header: everything an engine needs on a host-only build (with nvcc, the CUDA backend too): the
/// composed `Cache<Policies>` with its bundle rules, the backend of the build, the component vocabulary, arena
/// geometry, the shipped layouts and the unified allocator, the model presets, both tree cores, the action
/// executor, the host pools, the transfer controller with the load-back ticket and retraction, and the admission
/// budgets.

#include <unikv/arena/model.hpp>
#include <unikv/backend/default_backend.hpp>
#include <unikv/cache/admission.hpp>
#include <unikv/budget/base_budget.hpp>
#include <unikv/budget/partitioned_mamba_budget.hpp>
#include <unikv/budget/partitioned_swa_budget.hpp>
#include <unikv/budget/shared_hybrid_budget.hpp>
#include <unikv/budget/shared_swa_budget.hpp>
#include <unikv/cache.hpp>
#include <unikv/cache/action_executor.hpp>
#include <unikv/cache/compatibility.hpp>
#include <unikv/component.hpp>
#include <unikv/config.hpp>
#include <unikv/error.hpp>
#include <unikv/host/no_host_tier.hpp>
#include <unikv/host/page_envelope_host.hpp>
#include <unikv/host/separate_host_pools.hpp>
#include <unikv/ids.hpp>
#include <unikv/pools/layouts.hpp>
#include <unikv/pools/unified_allocator.hpp>
#include <unikv/presets.hpp>
#include <unikv/storage/no_storage.hpp>
#include <unikv/storage/storage_concept.hpp>
#include <unikv/transfer/host_mode.hpp>
#include <unikv/transfer/load_back.hpp>
#include <unikv/transfer/retraction.hpp>
#include <unikv/transfer/transfer_controller.hpp>
#include <unikv/transfer/write_policies.hpp>
#include <unikv/tree/radix_tree.hpp>
#include <unikv/tree/reference_tree.hpp>

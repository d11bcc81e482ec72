#pragma once
/// \file
/// Umbrella header: everything an engine needs on a host-only build (with nvcc, the CUDA backend too).

#include <unikv/backend/default_backend.hpp>
#include <unikv/config.hpp>
#include <unikv/error.hpp>
#include <unikv/ids.hpp>

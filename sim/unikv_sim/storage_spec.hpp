#pragma once
/// \file
/// The simulator's storage tier (`--storage`): the spec's two forms, checked (`parse_storage`), and the store a run
/// opens (`open_store`). Each run starts from an empty store of its own: a file store in a subdirectory named
/// after the run (emptied first), a Redis store under a key prefix of its own, so the unified run and the static
/// splits of one invocation do not serve each other's pages.

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <system_error>
#include <unistd.h>

#include <unikv/storage/any_storage.hpp>
#include <unikv/storage/file_storage.hpp>
#include <unikv/storage/redis_cluster_storage.hpp>

#include <unikv_sim/cost_model.hpp>
#include <unikv_sim/input_error.hpp>

namespace unikv::sim {

/// A checked `--storage` value.
struct StorageSpec {
    StorageKind kind = StorageKind::file;
    std::string directory{};  ///< `file:DIR`
    std::string node{};       ///< `redis://HOST:PORT`: `HOST:PORT`
};

/// Parses `file:DIR` or `redis://HOST:PORT`. Throws `InputError` naming `--storage` for anything else.
[[nodiscard]] inline StorageSpec parse_storage(std::string_view spec) {
    constexpr std::string_view file = "file:";
    constexpr std::string_view redis = "redis://";
    if (spec.starts_with(file) && spec.size() > file.size()) {
        return {.kind = StorageKind::file, .directory = std::string(spec.substr(file.size())), .node = {}};
    }
    if (spec.starts_with(redis)) {
        const std::string_view node = spec.substr(redis.size());
        const auto colon = node.rfind(':');
        const bool port_ok = colon != std::string_view::npos && colon > 0 && colon + 1 < node.size() &&
                             node.substr(colon + 1).find_first_not_of("0123456789") == std::string_view::npos;
        if (port_ok) return {.kind = StorageKind::network, .directory = {}, .node = std::string(node)};
    }
    throw InputError(message("--storage: '", spec, "' is neither file:DIR nor redis://HOST:PORT"));
}

/// The store of one run: `spec`'s, empty, `capacity_bytes` at the run's scale (a file store's bound), set apart by
/// `run` (a short name: the budget and its ratio). Throws `InputError` when a file store cannot be emptied.
[[nodiscard]] inline AnyStorage open_store(const StorageSpec& spec, std::uint64_t capacity_bytes, const std::string& run) {
    if (spec.kind == StorageKind::file) {
        const std::string dir = spec.directory + "/" + run;
        std::error_code ec;
        std::filesystem::remove_all(dir, ec);
        if (ec) throw InputError(message("--storage: cannot empty ", dir, ": ", ec.message()));
        return AnyStorage(FileStorage({.directory = dir, .capacity_bytes = capacity_bytes}));
    }
    return AnyStorage(RedisClusterStorage(
        {.seeds = {spec.node}, .key_prefix = message("unikv-sim:", ::getpid(), ":", run, ":")}));
}

}  // namespace unikv::sim

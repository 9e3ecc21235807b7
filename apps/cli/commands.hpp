#pragma once

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/actor/role_registry.hpp"
#include "runtime/app/app_plan.hpp"
#include "runtime/plugin/plugin_loader.hpp"

namespace troupe::cli {

/// troupe's exit codes.
enum exit_code : int {
  exit_ok = 0,
  exit_runtime_failure = 1,
  exit_usage_error = 2,  // bad arguments or a bad config
  exit_interrupted = 130,
};

/// Arguments shared by the commands that read a config.
struct config_args {
  std::string config;
  std::vector<std::string> overrides;
  std::vector<std::string> plugin_dirs;
};

struct launch_args : config_args {
  std::optional<std::string> run_dir;
};

/// `troupe launch`: validate, run the app, print one JSON summary line on stdout.
[[nodiscard]] int launch_command(const launch_args& args);

/// `troupe check`: validate only.
[[nodiscard]] int check_command(const config_args& args);

/// `troupe plugins list`: every role, built-in or from the plugins found.
[[nodiscard]] int plugins_list_command(const std::vector<std::string>& plugin_dirs, bool json);

/// `troupe version`.
[[nodiscard]] int version_command(bool json);

/// The role registry with troupe's built-ins and a plugin loader searching the default
/// directories (`plugins/` next to the binary, then TROUPE_PLUGIN_PATH), then `extra_dirs`.
struct roles_and_plugins {
  explicit roles_and_plugins(const std::vector<std::string>& extra_dirs);

  /// Loads and validates `args.config` with its overrides; errors are config errors (exit 2).
  [[nodiscard]] absl::StatusOr<app::app_plan> load(const config_args& args);

  actor::role_registry registry;
  plugin::plugin_loader plugins;
};

}  // namespace troupe::cli

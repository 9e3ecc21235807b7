#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "runtime/actor/role_registry.hpp"
#include "runtime/config/app_spec.hpp"
#include "runtime/plugin/plugin_loader.hpp"

namespace troupe::app {

/// A role whose implementation was found and whose options were validated.
struct resolved_role {
  config::role_spec spec;
  const actor::role_entry* entry = nullptr;
  /// The policy in force: the config's, or the default (restart for restartable roles).
  config::failure_policy on_failure;
  /// Parsed options, in the type the factory's schema produces.
  std::shared_ptr<const void> options;
  /// Whether the app's own actors spawn this role in place (role_factory::embedded_roles), so
  /// that the supervisor starts none of its actors.
  bool embedded = false;
};

/// Everything needed to launch an app: the typed config, its app driver and its roles, each
/// resolved against the registry (plugins loaded) and validated.
struct app_plan {
  config::app_spec spec;
  const actor::role_entry* app_entry = nullptr;
  std::shared_ptr<const void> app_options;
  std::vector<resolved_role> roles;

  /// The role named `name`, or nullptr.
  [[nodiscard]] const resolved_role* find_role(absl::string_view name) const;

  /// The number of actors the supervisor starts for the roles (an elastic role: its min, grown
  /// as workers join; an embedded one: none).
  [[nodiscard]] int actor_count() const;

  /// The resolved config as YAML: every default explicit, as written to the run directory.
  [[nodiscard]] std::string resolved_yaml() const;
};

/// What to load: a config file (or, when `config_text` is set, that text under the name
/// `config_path`) and `--set` overrides.
struct load_request {
  std::string config_path;
  std::vector<std::string> overrides;
  std::string config_text;
};

/// Reads and validates a config completely: YAML syntax, overrides, the top-level schema, the
/// plugins it names, the app driver and every role's options. All errors found are returned
/// together, one per line, each with file:line:col (or the `--set` it came from) and key path.
[[nodiscard]] absl::StatusOr<app_plan> load_app_plan(const load_request& request,
                                                     actor::role_registry& registry,
                                                     plugin::plugin_loader& plugins);

}  // namespace troupe::app

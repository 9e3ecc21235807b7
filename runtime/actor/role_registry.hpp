#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "caf/actor.hpp"
#include "runtime/config/options_schema.hpp"

namespace troupe::app {
struct app_plan;
}

namespace troupe::actor {

struct role_context;

/// How to make the actors of one role implementation.
struct role_factory {
  /// One line for `troupe plugins list`.
  std::string description;
  /// The schema of the role's `options:` map.
  std::shared_ptr<const config::options_schema> options;
  /// Whether a failed actor may be restarted. A role whose state cannot be rebuilt (a sink that
  /// accumulates the run's output) says no, and its failures always fail the job.
  bool restartable = true;
  /// For a role whose app driver watches its actors (and says how to resume): once the job
  /// runs, a lost actor is neither restarted nor the job's failure here; its app decides.
  bool app_decides_loss = false;
  /// Spawns actor `ctx.index` of the role with parsed `options` (from `options->parse`).
  std::function<absl::StatusOr<caf::actor>(role_context& ctx, const void* options)> spawn;
  /// For app drivers: checks that the plan's roles fit the app, reporting through `ctx`
  /// (located at the app's section, `section`). May be empty.
  std::function<void(const app::app_plan& plan, const void* options,
                     const config::parse_context& ctx, const YAML::Node& section)>
      check_plan;
  /// For app drivers: what `troupe check` prints about a valid plan beyond its roles (derived
  /// sizes a user should see). May be empty.
  std::function<std::vector<std::string>(const app::app_plan& plan, const void* options)>
      describe_plan;
  /// For app drivers: groups of roles whose actors of the same index run in one process (the
  /// supervisor places each on the node of the first one placed). May be empty.
  std::function<std::vector<std::vector<std::string>>(const void* options)> colocation;
  /// For app drivers: roles whose actors the app's own actors spawn in their processes and read
  /// in place (pretraining's data.source: an instance in each trainer rank's process). The
  /// supervisor starts none of them. May be empty.
  std::function<std::vector<std::string>(const void* options)> embedded_roles;
  /// For app drivers: whether the app sizes its roles by load (`roles.NAME.autoscale`), through
  /// role_context::scaler. Other apps refuse autoscale at load.
  bool autoscales = false;
};

/// Builds a factory from a typed options schema and a typed spawn function.
template <class Options>
role_factory make_role_factory(
    std::string description, config::object_schema<Options> schema,
    std::function<absl::StatusOr<caf::actor>(role_context&, const Options&)> spawn) {
  role_factory f;
  f.description = std::move(description);
  f.options = config::make_options_schema(std::move(schema));
  f.spawn = [spawn = std::move(spawn)](role_context& ctx, const void* options) {
    return spawn(ctx, *static_cast<const Options*>(options));
  };
  return f;
}

/// Where an implementation came from: built in (empty), or a plugin and its file.
struct role_origin {
  std::string plugin;
  std::string path;

  [[nodiscard]] bool built_in() const { return plugin.empty(); }
  /// "built-in" or "plugin NAME (PATH)".
  [[nodiscard]] std::string to_string() const;
};

/// A registered implementation.
struct role_entry {
  std::string kind;
  std::string name;
  role_origin origin;
  role_factory factory;
};

/// Role implementations by (kind, name). Built-in roles, app drivers (kind "app") and plugin
/// roles all register here the same way.
class role_registry {
 public:
  /// Adds an implementation; fails if (kind, name) is taken, naming both origins.
  [[nodiscard]] absl::Status add(std::string kind, std::string name, role_factory factory,
                                 role_origin origin = {});

  /// The implementation (kind, name); the error lists the available ones.
  [[nodiscard]] absl::StatusOr<const role_entry*> find(absl::string_view kind,
                                                       absl::string_view name) const;

  /// Every implementation, ordered by kind and name.
  [[nodiscard]] std::vector<const role_entry*> entries() const;

  /// Every kind with at least one implementation.
  [[nodiscard]] std::vector<std::string> kinds() const;

 private:
  std::map<std::pair<std::string, std::string>, std::unique_ptr<role_entry>> entries_;
};

}  // namespace troupe::actor

#include "apps/builtin_apps.hpp"
#include "apps/cli/commands.hpp"
#include "apps/cli/install_layout.hpp"
#include "runtime/base/status.hpp"
#include "runtime/config/environment.hpp"

namespace troupe::cli {

roles_and_plugins::roles_and_plugins(const std::vector<std::string>& extra_dirs) {
  // Built-ins cannot clash unless troupe itself is broken.
  TROUPE_CHECK(apps::register_builtins(registry).ok());
  plugins.add_search_dir((executable_dir() / "plugins").string());  // a build tree
  if (auto installed = installed_plugin_dir())  // an installed troupe (cmake --install)
    plugins.add_search_dir(installed->string());
  for (const auto& dir : config::plugin_path_from_environment())
    plugins.add_search_dir(dir);
  for (const auto& dir : extra_dirs)
    plugins.add_search_dir(dir);
}

absl::StatusOr<app::app_plan> roles_and_plugins::load(const config_args& args) {
  return app::load_app_plan({args.config, args.overrides, args.config_text}, registry, plugins);
}

}  // namespace troupe::cli

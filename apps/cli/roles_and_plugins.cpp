#include <filesystem>

#include <unistd.h>

#include "apps/builtin_apps.hpp"
#include "apps/cli/commands.hpp"
#include "runtime/base/status.hpp"
#include "runtime/config/environment.hpp"

namespace troupe::cli {
namespace {

std::filesystem::path executable_dir() {
  char buf[4096];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return std::filesystem::current_path();
  return std::filesystem::path(std::string(buf, n)).parent_path();
}

}  // namespace

roles_and_plugins::roles_and_plugins(const std::vector<std::string>& extra_dirs) {
  // Built-ins cannot clash unless troupe itself is broken.
  TROUPE_CHECK(apps::register_builtins(registry).ok());
  plugins.add_search_dir((executable_dir() / "plugins").string());
  for (const auto& dir : config::plugin_path_from_environment())
    plugins.add_search_dir(dir);
  for (const auto& dir : extra_dirs)
    plugins.add_search_dir(dir);
}

absl::StatusOr<app::app_plan> roles_and_plugins::load(const config_args& args) {
  return app::load_app_plan({args.config, args.overrides}, registry, plugins);
}

}  // namespace troupe::cli

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

absl::Status prepare(roles_and_plugins& out, const std::vector<std::string>& extra_dirs) {
  TROUPE_RETURN_IF_ERROR(apps::register_builtins(out.registry));
  out.plugins.add_search_dir((executable_dir() / "plugins").string());
  for (const auto& dir : config::plugin_path_from_environment())
    out.plugins.add_search_dir(dir);
  for (const auto& dir : extra_dirs)
    out.plugins.add_search_dir(dir);
  return absl::OkStatus();
}

}  // namespace troupe::cli

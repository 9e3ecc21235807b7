#include "apps/cli/install_layout.hpp"

#include "apps/worker_processes.hpp"

namespace troupe::cli {

std::filesystem::path executable_dir() {
  return std::filesystem::absolute(apps::self_executable()).parent_path();
}

// TROUPE_PLUGINS_FROM_BINARY and TROUPE_CMAKE_PACKAGE_FROM_BINARY: the installed layout,
// relative to the binary's directory (CMakeLists.txt).
std::optional<std::filesystem::path> installed_plugin_dir() {
  auto dir = (executable_dir() / TROUPE_PLUGINS_FROM_BINARY).lexically_normal();
  if (!std::filesystem::is_directory(dir)) return std::nullopt;
  return dir;
}

std::optional<std::filesystem::path> installed_prefix() {
  const auto package = (executable_dir() / TROUPE_CMAKE_PACKAGE_FROM_BINARY).lexically_normal();
  if (!std::filesystem::exists(package / "troupeConfig.cmake")) return std::nullopt;
  return executable_dir().parent_path();
}

}  // namespace troupe::cli

#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "runtime/actor/role_registry.hpp"

namespace troupe::plugin {

/// A plugin that was loaded and registered its roles.
struct loaded_plugin {
  std::string name;
  std::string description;
  std::string path;
  uint32_t abi_version = 0;
  /// "kind/name" of each role it registered.
  std::vector<std::string> roles;
};

/// Finds plugins in configured directories, checks their ABI and registers their roles.
///
/// A plugin named `foo` is the file `troupe_plugin_foo.so` in one of the search directories
/// (the first match wins). Plugins are never unloaded.
class plugin_loader {
 public:
  explicit plugin_loader(std::vector<std::string> search_dirs = {})
      : search_dirs_(std::move(search_dirs)) {}

  /// Appends a directory to search (duplicates are ignored).
  void add_search_dir(const std::string& dir);

  /// Loads the plugin `name` into `registry`, unless it is loaded already. The error for an
  /// unknown name lists the plugins that are available.
  [[nodiscard]] absl::StatusOr<const loaded_plugin*> load(absl::string_view name,
                                                          actor::role_registry& registry);

  /// Loads the shared library at `path`: checks `abi_version` and `struct_size` first, then the
  /// name, then registers the roles.
  [[nodiscard]] absl::StatusOr<const loaded_plugin*> load_file(const std::string& path,
                                                               actor::role_registry& registry);

  /// Names of the plugins present in the search directories.
  [[nodiscard]] std::vector<std::string> available() const;

  [[nodiscard]] const std::deque<loaded_plugin>& loaded() const { return loaded_; }
  [[nodiscard]] const std::vector<std::string>& search_dirs() const { return search_dirs_; }

  /// The file name of plugin `name`: "troupe_plugin_<name>.so".
  [[nodiscard]] static std::string file_name(absl::string_view name);

 private:
  std::vector<std::string> search_dirs_;
  std::deque<loaded_plugin> loaded_;  // deque: pointers handed out stay valid
};

}  // namespace troupe::plugin

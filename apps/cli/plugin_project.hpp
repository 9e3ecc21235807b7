#pragma once

// The project `troupe plugins new` writes: a plugin of one kind, built against the installed
// SDK, with its own test and an example config (templates in apps/cli/plugin_templates/).

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace troupe::cli {

struct plugin_project_spec {
  /// The plugin's name, which is also its role's: lowercase letters, digits and '_', starting
  /// with a letter.
  std::string name;
  /// stage, reward or source.
  std::string kind;
  /// The project's directory, absolute (its example config names files in it).
  std::string dir;
  /// The prefix troupe is installed under, for CMAKE_PREFIX_PATH.
  std::string prefix;
};

/// One file of the project: its path inside the project, and its text.
struct project_file {
  std::string path;
  std::string text;
};

/// The project's files; INVALID_ARGUMENT for a bad name or kind, saying what is allowed.
[[nodiscard]] absl::StatusOr<std::vector<project_file>> plugin_project_files(
    const plugin_project_spec& spec);

}  // namespace troupe::cli

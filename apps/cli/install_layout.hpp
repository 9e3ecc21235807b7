#pragma once

// Where the running troupe's files are: next to the binary in a build tree, or under an
// installed prefix (`cmake --install`, cmake/TroupeInstall.cmake).

#include <filesystem>
#include <optional>

namespace troupe::cli {

/// The directory of the running troupe binary.
[[nodiscard]] std::filesystem::path executable_dir();

/// The installed plugins' directory (PREFIX/lib/troupe/plugins), when this binary is installed.
[[nodiscard]] std::optional<std::filesystem::path> installed_plugin_dir();

/// The prefix this binary is installed under, when it holds troupe's CMake package (the plugin
/// SDK); nullopt in a build tree.
[[nodiscard]] std::optional<std::filesystem::path> installed_prefix();

}  // namespace troupe::cli

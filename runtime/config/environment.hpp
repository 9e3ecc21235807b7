#pragma once

#include <string>
#include <vector>

namespace troupe::config {

/// Directories in TROUPE_PLUGIN_PATH (colon-separated), searched after the config's own.
/// The only place troupe reads its environment.
[[nodiscard]] std::vector<std::string> plugin_path_from_environment();

}  // namespace troupe::config

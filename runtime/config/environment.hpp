#pragma once

#include <string>
#include <vector>

namespace troupe::config {

/// TROUPE_CLUSTER_TOKEN, the secret workers need to join; empty when unset.
[[nodiscard]] std::string cluster_token_from_environment();

/// Directories in TROUPE_PLUGIN_PATH (colon-separated), searched after the config's own.
/// The only place troupe reads its environment.
[[nodiscard]] std::vector<std::string> plugin_path_from_environment();

}  // namespace troupe::config

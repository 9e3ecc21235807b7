#include "runtime/config/environment.hpp"

#include <cstdlib>

#include "absl/strings/str_split.h"

namespace troupe::config {

std::string cluster_token_from_environment() {
  const char* value = std::getenv("TROUPE_CLUSTER_TOKEN");
  return value == nullptr ? std::string() : std::string(value);
}

std::vector<std::string> plugin_path_from_environment() {
  const char* value = std::getenv("TROUPE_PLUGIN_PATH");
  if (value == nullptr) return {};
  return absl::StrSplit(value, ':', absl::SkipEmpty());
}

}  // namespace troupe::config

#include "runtime/config/environment.hpp"

#include <cstdlib>

#include "absl/strings/str_split.h"

namespace troupe::config {

std::vector<std::string> plugin_path_from_environment() {
  const char* value = std::getenv("TROUPE_PLUGIN_PATH");
  if (value == nullptr) return {};
  return absl::StrSplit(value, ':', absl::SkipEmpty());
}

}  // namespace troupe::config

#include "runtime/config/environment.hpp"

#include <cstdlib>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
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

absl::StatusOr<test_hooks> test_hooks_from_environment() {
  test_hooks hooks;
  if (const char* hold = std::getenv("TROUPE_TEST_HOLD")) hooks.hold_file = hold;
  if (const char* slowdown = std::getenv("TROUPE_TEST_SLOWDOWN"); slowdown && *slowdown) {
    if (!absl::SimpleAtod(slowdown, &hooks.slowdown) || !(hooks.slowdown >= 1) ||
        hooks.slowdown > 100) {
      return absl::InvalidArgumentError(
          absl::StrCat("TROUPE_TEST_SLOWDOWN is '", slowdown,
                       "': it must be a number from 1 to 100 (how many times slower engines and "
                       "trainers run); unset it to run at full speed"));
    }
  }
  return hooks;
}

}  // namespace troupe::config

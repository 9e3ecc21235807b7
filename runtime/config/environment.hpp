#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace troupe::config {

/// TROUPE_CLUSTER_TOKEN, the secret workers need to join; empty when unset.
[[nodiscard]] std::string cluster_token_from_environment();

/// Directories in TROUPE_PLUGIN_PATH (colon-separated), searched after the config's own.
/// The only place troupe reads its environment.
[[nodiscard]] std::vector<std::string> plugin_path_from_environment();

/// Hooks through which tests pace troupe's work loops (docs/testing.md): they hold work in
/// flight by construction and simulate slower machines. Unset, they change nothing.
struct test_hooks {
  /// TROUPE_TEST_HOLD: while this file exists, a paced loop starts no more units of work than
  /// the file's content says (none when it is empty).
  std::string hold_file;
  /// TROUPE_TEST_SLOWDOWN: each unit of work takes this many times as long (at least 1).
  double slowdown = 1;
};

/// The test hooks set in this process's environment (children inherit them). INVALID_ARGUMENT,
/// naming the variable, when TROUPE_TEST_SLOWDOWN is not a number from 1 to 100.
[[nodiscard]] absl::StatusOr<test_hooks> test_hooks_from_environment();

}  // namespace troupe::config

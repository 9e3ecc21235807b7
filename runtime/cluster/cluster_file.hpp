#pragma once

#include <string>

#include "absl/status/statusor.h"

namespace troupe::cluster {

/// A head started by `troupe head` leaves its endpoint and token in a file only its user can
/// read (/tmp/troupe-<uid>/head-<port>.json), so that `troupe worker --join` and
/// `troupe status` on the same machine need no --token.

/// Writes the file for `endpoint`.
[[nodiscard]] absl::Status write_cluster_file(const std::string& endpoint,
                                              const std::string& token);

/// The token recorded for `endpoint`, if a head on this machine wrote one.
[[nodiscard]] absl::StatusOr<std::string> read_cluster_token(const std::string& endpoint);

/// Removes the file for `endpoint`.
void remove_cluster_file(const std::string& endpoint);

}  // namespace troupe::cluster

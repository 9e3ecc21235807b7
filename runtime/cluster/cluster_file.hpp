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

/// The cluster file of a head this process runs: written by listening() once the head has its
/// endpoint, removed when this object goes, however the job ended.
class head_cluster_file {
 public:
  explicit head_cluster_file(std::string token) : token_(std::move(token)) {}
  ~head_cluster_file() {
    if (!endpoint_.empty()) remove_cluster_file(endpoint_);
  }
  head_cluster_file(const head_cluster_file&) = delete;
  head_cluster_file& operator=(const head_cluster_file&) = delete;

  void listening(const std::string& endpoint) {
    endpoint_ = endpoint;
    (void)write_cluster_file(endpoint, token_);
  }

 private:
  std::string token_;
  std::string endpoint_;
};

}  // namespace troupe::cluster

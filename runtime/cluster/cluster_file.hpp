#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace troupe::cluster {

/// Where a head listens and the token that joins it, as a head leaves them in a file only its
/// user can read: per machine (/tmp/troupe-<uid>/head-<port>.json), so that `troupe worker
/// --join` and `troupe status` on the same machine need no --token, and for a Slurm job in its
/// submit directory (docs/launch.md), so that the job's other tasks find the head.
struct head_address {
  std::string endpoint;
  std::string token;
};

/// Writes `address` to `path` (mode 0600, atomically), creating its directory.
[[nodiscard]] absl::Status write_head_file(const std::string& path, const head_address& address);

/// Reads the file at `path`, waiting up to `wait` for it to appear: DEADLINE_EXCEEDED when it
/// does not, INVALID_ARGUMENT naming it when it is not a head file.
[[nodiscard]] absl::StatusOr<head_address> read_head_file(const std::string& path,
                                                          std::chrono::milliseconds wait = {});

/// The per-machine file of the head listening on `endpoint`.
[[nodiscard]] std::string cluster_file_path(const std::string& endpoint);

/// The token recorded for `endpoint`, if a head on this machine wrote one.
[[nodiscard]] absl::StatusOr<std::string> read_cluster_token(const std::string& endpoint);

/// The files of a head this process runs, written by listening() once the head has its endpoint
/// and removed when this object goes, however the job ended: the per-machine one, and `extra`
/// when given (a Slurm job's rendezvous file).
class head_cluster_file {
 public:
  explicit head_cluster_file(std::string token, std::string extra = "")
      : token_(std::move(token)), extra_(std::move(extra)) {}
  ~head_cluster_file();
  head_cluster_file(const head_cluster_file&) = delete;
  head_cluster_file& operator=(const head_cluster_file&) = delete;

  /// Writes the files; the per-machine one is a convenience, so only `extra`'s failure is
  /// returned.
  absl::Status listening(const std::string& endpoint);

 private:
  std::string token_;
  std::string extra_;
  std::vector<std::string> written_;
};

}  // namespace troupe::cluster

#pragma once

#include <chrono>
#include <string>
#include <vector>

#include <sys/types.h>

#include "absl/status/status.h"
#include "runtime/cluster/curve_keys.hpp"

namespace troupe::apps {

/// The worker processes `troupe launch` starts on this machine for `cluster.local_workers`.
/// Each runs `troupe worker --join HEAD` with the token (and, under CURVE, the keys directory)
/// in its environment and its output in
/// `<run dir>/worker-<i>.log`, and dies with its parent (PR_SET_PDEATHSIG). The destructor makes
/// sure none outlives the launch: SIGTERM, then SIGKILL after a grace period.
class worker_processes {
 public:
  worker_processes() = default;
  ~worker_processes();
  worker_processes(const worker_processes&) = delete;
  worker_processes& operator=(const worker_processes&) = delete;

  /// Starts `count` workers joining `head`.
  [[nodiscard]] absl::Status start(int count, const std::string& head,
                                   const cluster::cluster_credentials& credentials,
                                   const std::string& log_dir,
                                   const std::vector<std::string>& plugin_dirs);

  /// Waits up to `grace` for every worker to exit (they do once the head shuts them down), then
  /// kills the rest.
  void reap(std::chrono::milliseconds grace);

  [[nodiscard]] const std::vector<pid_t>& pids() const { return pids_; }

 private:
  std::vector<pid_t> pids_;
};

/// The path of the running troupe binary.
[[nodiscard]] std::string self_executable();

}  // namespace troupe::apps

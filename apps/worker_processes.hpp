#pragma once

#include <chrono>
#include <string>
#include <vector>

#include <sys/types.h>

#include "absl/status/statusor.h"
#include "runtime/cluster/curve_keys.hpp"

namespace troupe::apps {

/// The worker processes `troupe launch` starts on this machine for `cluster.local_workers` (and
/// for autoscaling). Each runs `troupe worker --join HEAD` with the token (and, under CURVE, the
/// keys directory) in its environment and its output in `<run dir>/worker-<i>.log` (i counts
/// from 1 over the launch), and dies with its parent (PR_SET_PDEATHSIG). The destructor makes
/// sure none outlives the launch: SIGTERM, then SIGKILL after a grace period. Not thread-safe.
class worker_processes {
 public:
  worker_processes() = default;
  ~worker_processes();
  worker_processes(const worker_processes&) = delete;
  worker_processes& operator=(const worker_processes&) = delete;

  /// Starts `count` more workers joining `head`.
  [[nodiscard]] absl::Status start(int count, const std::string& head,
                                   const cluster::cluster_credentials& credentials,
                                   const std::string& log_dir,
                                   const std::vector<std::string>& plugin_dirs);

  /// Waits up to `grace` for every worker to exit (they do once the head shuts them down), then
  /// kills the rest.
  void reap(std::chrono::milliseconds grace);

  /// Collects the workers that exited (a retired one, a crashed one); returns how many.
  int reap_exited();

  [[nodiscard]] const std::vector<pid_t>& pids() const { return pids_; }

 private:
  std::vector<pid_t> pids_;
  int started_ = 0;
};

/// This process's environment with `set` ("NAME=value" each) replacing or adding variables.
[[nodiscard]] std::vector<std::string> environment_with(const std::vector<std::string>& set);

/// Starts `args` (args[0] the program's path) with `env`, its output in `log` (appended or
/// truncated), in its own process group, dying with this process.
[[nodiscard]] absl::StatusOr<pid_t> start_child(std::vector<std::string> args,
                                                std::vector<std::string> env,
                                                const std::string& log, bool append);

/// The path of the running troupe binary.
[[nodiscard]] std::string self_executable();

}  // namespace troupe::apps

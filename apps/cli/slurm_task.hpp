#pragma once

// `troupe launch CONFIG --slurm` (docs/launch.md#slurm): which part of the job this task is,
// from Slurm's environment alone, and the file through which the head's task tells the others
// where it listens. Nothing here assumes a hostname or a port per node: fake nodes that share one
// host (scripts/slurm/local_cluster.sh) look like real ones.

#include <chrono>
#include <functional>
#include <optional>
#include <string>

#include "absl/status/statusor.h"

namespace troupe::cli {

/// One task of a Slurm job step, as srun describes it.
struct slurm_task {
  int procid = 0;      ///< SLURM_PROCID: 0 runs the head and the app, the others join as workers
  int ntasks = 1;      ///< SLURM_NTASKS
  std::string job_id;  ///< SLURM_JOB_ID
  std::string node;    ///< SLURMD_NODENAME (the Slurm node, not the hostname)
  std::string submit_dir;  ///< SLURM_SUBMIT_DIR: where the rendezvous file goes
  int cpus_per_task = 0;   ///< SLURM_CPUS_PER_TASK; 0 when not given

  [[nodiscard]] bool head() const { return procid == 0; }
};

/// Reads a task from `getenv`; INVALID_ARGUMENT naming the variable that is missing or malformed
/// (not under srun, for instance).
[[nodiscard]] absl::StatusOr<slurm_task> slurm_task_from(
    const std::function<const char*(const char*)>& getenv);

/// Where job `job_id`'s head writes its endpoint and token: SUBMIT_DIR/.troupe/slurm-JOB.json.
/// A later job (`troupe worker --slurm-job JOB`) finds a running one there.
[[nodiscard]] std::string slurm_rendezvous_path(const std::string& submit_dir,
                                                const std::string& job_id);

/// What the head's task tells the others.
struct slurm_rendezvous {
  std::string endpoint;
  std::string token;
};

/// Writes `r` to `path` (mode 0600: it holds the cluster's secret), atomically.
[[nodiscard]] absl::Status write_slurm_rendezvous(const std::string& path,
                                                  const slurm_rendezvous& r);

/// Reads `path`, waiting up to `wait` for it to appear. DEADLINE_EXCEEDED says which file and
/// for how long; a file that is not a rendezvous is INVALID_ARGUMENT.
[[nodiscard]] absl::StatusOr<slurm_rendezvous> read_slurm_rendezvous(
    const std::string& path, std::chrono::milliseconds wait);

/// The address of this machine that packets to `endpoint` ("tcp://HOST:PORT") leave from: what
/// a worker binds and advertises so that its peers on the head's side reach it (127.0.0.1 for a
/// head on loopback). No packet is sent.
[[nodiscard]] absl::StatusOr<std::string> local_address_towards(const std::string& endpoint);

}  // namespace troupe::cli

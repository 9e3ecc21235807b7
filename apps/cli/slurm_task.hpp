#pragma once

// `troupe launch CONFIG --slurm` (docs/launch.md#slurm): which part of the job this task is,
// from Slurm's environment alone, and where the head's task tells the others where it listens.
// Nothing here assumes a hostname or a port per node: fake nodes that share one host
// (scripts/slurm/local_cluster.sh) look like real ones.

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

/// Where job `job_id`'s head writes its endpoint and token (cluster::head_cluster_file):
/// SUBMIT_DIR/.troupe/slurm-JOB.json. A later job (`troupe worker --slurm-job JOB`) finds a
/// running one there.
[[nodiscard]] std::string slurm_rendezvous_path(const std::string& submit_dir,
                                                const std::string& job_id);

}  // namespace troupe::cli

#include "apps/cli/slurm_task.hpp"

#include <filesystem>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace troupe::cli {
namespace fs = std::filesystem;

absl::StatusOr<slurm_task> slurm_task_from(const std::function<const char*(const char*)>& getenv) {
  const auto text = [&](const char* name) -> absl::StatusOr<std::string> {
    const char* v = getenv(name);
    if (v == nullptr || *v == '\0') {
      return absl::InvalidArgumentError(
          absl::StrCat("--slurm: ", name,
                       " is not set; run this under srun, e.g. `srun troupe launch CONFIG "
                       "--slurm` in an sbatch script (scripts/slurm/troupe.sbatch)"));
    }
    return std::string(v);
  };
  const auto number = [&](const char* name, int min) -> absl::StatusOr<int> {
    absl::StatusOr<std::string> v = text(name);
    if (!v.ok()) return v.status();
    int n = 0;
    if (!absl::SimpleAtoi(*v, &n) || n < min) {
      return absl::InvalidArgumentError(
          absl::StrCat("--slurm: ", name, " is '", *v, "', not a whole number of at least ", min));
    }
    return n;
  };
  slurm_task t;
  absl::StatusOr<int> procid = number("SLURM_PROCID", 0);
  if (!procid.ok()) return procid.status();
  absl::StatusOr<int> ntasks = number("SLURM_NTASKS", 1);
  if (!ntasks.ok()) return ntasks.status();
  if (*procid >= *ntasks) {
    return absl::InvalidArgumentError(
        absl::StrCat("--slurm: SLURM_PROCID ", *procid, " is not below SLURM_NTASKS ", *ntasks));
  }
  t.procid = *procid;
  t.ntasks = *ntasks;
  for (auto [name, out] : {std::pair{"SLURM_JOB_ID", &t.job_id},
                           {"SLURMD_NODENAME", &t.node},
                           {"SLURM_SUBMIT_DIR", &t.submit_dir}}) {
    absl::StatusOr<std::string> v = text(name);
    if (!v.ok()) return v.status();
    *out = *v;
  }
  if (getenv("SLURM_CPUS_PER_TASK") != nullptr) {
    absl::StatusOr<int> cpus = number("SLURM_CPUS_PER_TASK", 1);
    if (!cpus.ok()) return cpus.status();
    t.cpus_per_task = *cpus;
  }
  return t;
}

std::string slurm_rendezvous_path(const std::string& submit_dir, const std::string& job_id) {
  return (fs::path(submit_dir) / ".troupe" / absl::StrCat("slurm-", job_id, ".json")).string();
}

}  // namespace troupe::cli

#include "apps/cli/slurm_task.hpp"

#include <map>

#include <gtest/gtest.h>

#include "absl/strings/match.h"

namespace troupe::cli {
namespace {

// What srun gives task 2 of a 3-task step on node n3.
std::map<std::string, std::string> task_environment() {
  return {{"SLURM_PROCID", "2"},
          {"SLURM_NTASKS", "3"},
          {"SLURM_JOB_ID", "41"},
          {"SLURMD_NODENAME", "n3"},
          {"SLURM_SUBMIT_DIR", "/home/me/runs"}};
}

// Sets `name` (through a std::string: assigning a literal in place trips a false -Wrestrict of
// GCC 12).
void with(std::map<std::string, std::string>& env, const std::string& name, std::string value) {
  env[name] = std::move(value);
}

absl::StatusOr<slurm_task> task_of(const std::map<std::string, std::string>& env) {
  return slurm_task_from([&env](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  });
}

TEST(SlurmTask, ReadsSrunsEnvironment) {
  auto env = task_environment();
  auto task = task_of(env);
  ASSERT_TRUE(task.ok()) << task.status();
  EXPECT_EQ(task->procid, 2);
  EXPECT_EQ(task->ntasks, 3);
  EXPECT_FALSE(task->head());
  EXPECT_EQ(task->job_id, "41");
  EXPECT_EQ(task->node, "n3");
  EXPECT_EQ(task->cpus_per_task, 0);
  with(env, "SLURM_PROCID", "0");
  with(env, "SLURM_CPUS_PER_TASK", "4");
  task = task_of(env);
  ASSERT_TRUE(task.ok()) << task.status();
  EXPECT_TRUE(task->head());
  EXPECT_EQ(task->cpus_per_task, 4);
  EXPECT_EQ(slurm_rendezvous_path(task->submit_dir, task->job_id),
            "/home/me/runs/.troupe/slurm-41.json");
}

TEST(SlurmTask, OutsideSrunOrWithBadValuesSaysWhichVariable) {
  auto missing = task_environment();
  missing.erase("SLURM_PROCID");
  EXPECT_EQ(task_of(missing).status().message(),
            "--slurm: SLURM_PROCID is not set; run this under srun, e.g. `srun troupe launch "
            "CONFIG --slurm` in an sbatch script (scripts/slurm/troupe.sbatch)");
  auto bad = task_environment();
  with(bad, "SLURM_NTASKS", "three");
  EXPECT_EQ(task_of(bad).status().message(),
            "--slurm: SLURM_NTASKS is 'three', not a whole number of at least 1");
  auto beyond = task_environment();
  with(beyond, "SLURM_PROCID", "3");
  EXPECT_EQ(task_of(beyond).status().message(),
            "--slurm: SLURM_PROCID 3 is not below SLURM_NTASKS 3");
  auto no_node = task_environment();
  no_node.erase("SLURMD_NODENAME");
  EXPECT_TRUE(
      absl::StartsWith(task_of(no_node).status().message(), "--slurm: SLURMD_NODENAME is not set"));
}

}  // namespace
}  // namespace troupe::cli

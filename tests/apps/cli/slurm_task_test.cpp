#include "apps/cli/slurm_task.hpp"

#include <filesystem>
#include <map>

#include <gtest/gtest.h>
#include <sys/stat.h>

#include "absl/strings/match.h"
#include "tests/support/temp_dir.hpp"

namespace troupe::cli {
namespace {

using namespace std::chrono_literals;

// What srun gives task 2 of a 3-task step on node n3.
std::map<std::string, std::string> task_environment() {
  return {{"SLURM_PROCID", "2"},
          {"SLURM_NTASKS", "3"},
          {"SLURM_JOB_ID", "41"},
          {"SLURMD_NODENAME", "n3"},
          {"SLURM_SUBMIT_DIR", "/home/me/runs"}};
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
  env["SLURM_PROCID"] = "0";
  env["SLURM_CPUS_PER_TASK"] = "4";
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
  bad["SLURM_NTASKS"] = "three";
  EXPECT_EQ(task_of(bad).status().message(),
            "--slurm: SLURM_NTASKS is 'three', not a whole number of at least 1");
  auto beyond = task_environment();
  beyond["SLURM_PROCID"] = "3";
  EXPECT_EQ(task_of(beyond).status().message(),
            "--slurm: SLURM_PROCID 3 is not below SLURM_NTASKS 3");
  auto no_node = task_environment();
  no_node.erase("SLURMD_NODENAME");
  EXPECT_TRUE(
      absl::StartsWith(task_of(no_node).status().message(), "--slurm: SLURMD_NODENAME is not set"));
}

TEST(SlurmRendezvous, WritesThePrivateFileAndReadsItBack) {
  testing::temp_dir dir;
  const std::string path = slurm_rendezvous_path(dir.path().string(), "7");
  ASSERT_TRUE(write_slurm_rendezvous(path, {"tcp://10.0.0.1:5555", "s3cret"}).ok());
  struct stat st {};
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);  // it holds the cluster's token
  auto read = read_slurm_rendezvous(path, 1s);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->endpoint, "tcp://10.0.0.1:5555");
  EXPECT_EQ(read->token, "s3cret");
}

TEST(SlurmRendezvous, AMissingOrForeignFileIsAClearError) {
  testing::temp_dir dir;
  const std::string path = dir.file("slurm-8.json");
  auto late = read_slurm_rendezvous(path, 100ms);
  EXPECT_EQ(late.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_TRUE(absl::StrContains(late.status().message(),
                                "the head's task (SLURM_PROCID 0) did not write " + path))
      << late.status();
  dir.write("slurm-8.json", "{\"endpoint\": 5}\n");
  auto foreign = read_slurm_rendezvous(path, 1s);
  EXPECT_EQ(foreign.status().message(),
            path + " is not a troupe rendezvous file ({\"endpoint\", \"token\"}); remove it");
}

TEST(LocalAddressTowards, LoopbackForAHeadOnLoopback) {
  auto address = local_address_towards("tcp://127.0.0.1:7070");
  ASSERT_TRUE(address.ok()) << address.status();
  EXPECT_EQ(*address, "127.0.0.1");
  EXPECT_EQ(local_address_towards("udp://x").status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace troupe::cli

// `app: rlhf` on a real cluster when rollout workers come and go: the training roles on the
// head (placement: head), one rollout worker per `troupe worker --join` process (an elastic
// rollout role). The test hold keeps the rollout engines at their second iteration, so a
// generation is in flight by construction while the test kills a worker and starts another.

#include <gtest/gtest.h>
#include <signal.h>

#include "tests/integration/cluster_harness.hpp"
#include "tests/support/wait.hpp"

namespace troupe::testing {
namespace {

const std::string grpo_config = std::string(TROUPE_SOURCE_DIR) + "/configs/rlhf_grpo.yaml";

class RlhfFaultsTest : public cluster_harness {
 protected:
  // GRPO for `steps` steps from scratch (no warm-up, no validation), on `workers` workers.
  void start(int steps, int workers) {
    hold_.hold(2);  // every engine stops after two iterations: mid-generation
    start_head(grpo_config,
               {"--set", "cluster.local_workers=0", "--set",
                "cluster.min_workers=" + std::to_string(workers), "--set",
                "roles.policy.placement=head", "--set", "roles.reference.placement=head", "--set",
                "roles.reward.placement=head", "--set", "roles.rollout.elastic={min: 1, max: 3}",
                "--set", "rlhf.warmup.steps=0", "--set", "rlhf.trainer.test_freq=0", "--set",
                "rlhf.trainer.total_training_steps=" + std::to_string(steps)});
    for (int i = 0; i < workers; ++i)
      start_worker();
  }
};

// Two rollout workers generate step 1; one is SIGKILLed with its sequences unfinished. They are
// regenerated on the other with the same seeds and the step completes with every sequence once
// (the controller refuses a missing or repeated one). A worker started meanwhile joins the
// weight-sync group at the next step's sync and gets prompts from then on; the run ends.
TEST_F(RlhfFaultsTest, AKilledRolloutWorkersSequencesAreRegeneratedAndAJoinerGetsTheWeightsFirst) {
  ASSERT_NO_FATAL_FAILURE(start(3, 2));
  const nlohmann::json generating = wait_for_event(run_dir(), "generating", 120s);
  ASSERT_FALSE(generating.is_null()) << head_->stderr_so_far();
  ASSERT_EQ(generating["workers"].size(), 2u) << generating.dump();
  workers_[1]->signal(SIGKILL);
  const nlohmann::json lost = wait_for_event(run_dir(), "rollout_lost", 60s);
  ASSERT_FALSE(lost.is_null()) << head_->stderr_so_far();
  EXPECT_GT(lost.value("regenerated", 0), 0) << lost.dump();
  start_worker();
  ASSERT_FALSE(wait_for_event(run_dir(), "rollout_joining", 60s).is_null())
      << head_->stderr_so_far();
  hold_.release();
  const process_result r = head_->wait(300s);
  ASSERT_FALSE(r.timed_out);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(summary_of(r)["steps"], 3);
  // The sync groups: two workers at epoch 1; at step 2's sync, epoch 2, the survivor and the
  // joiner, which generates from step 2 on.
  std::vector<nlohmann::json> groups;
  for (const auto& e : events_of(run_dir(), "rollout_group"))
    groups.push_back(e["workers"]);
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_EQ(groups[1].size(), 2u);
  EXPECT_NE(groups[1], groups[0]) << "the joiner replaced the lost worker";
  const auto generations = events_of(run_dir(), "generating");
  ASSERT_EQ(generations.size(), 3u);
  EXPECT_EQ(generations[1]["workers"].size(), 2u) << "the joiner generates in step 2";
  // Every step generated with the version just synced.
  for (const auto& row : read_jsonl(run_dir() + "/metrics.jsonl")) {
    if (row.contains("staleness/max")) EXPECT_EQ(row["staleness/max"], 0) << row.dump();
  }
}

}  // namespace
}  // namespace troupe::testing

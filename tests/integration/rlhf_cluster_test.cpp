// `app: rlhf` on a real cluster: rollout workers that come and go (the training roles on the
// head, placement: head; one rollout worker per `troupe worker --join` process, an elastic
// rollout role; the test hold keeps the engines at their second iteration, so a generation is
// in flight by construction while the test kills a worker and starts another, or keeps a
// weight sync in flight), and colocated roles (rlhf.placement.colocate) sharing a worker
// process. A rollout worker's weight transfer is a held unit too, ahead of its iterations.

#include <algorithm>
#include <array>
#include <fstream>
#include <map>

#include <gtest/gtest.h>
#include <signal.h>

#include "tests/integration/cluster_harness.hpp"
#include "tests/support/wait.hpp"

namespace troupe::testing {
namespace {

class RlhfClusterTest : public cluster_harness {
 protected:
  // GRPO for `steps` steps from scratch (no warm-up, no validation) with `sets`, on `workers`
  // workers, every paced loop held after `held` units (a rollout worker's first is the first
  // weight sync's transfer).
  void start(int steps, int workers, int held, std::vector<std::string> sets,
             const std::string& config = grpo_config) {
    hold_.hold(held);
    const std::vector<std::string> run = short_rl_run(
        steps, {"cluster.local_workers=0", "cluster.min_workers=" + std::to_string(workers)});
    sets.insert(sets.end(), run.begin(), run.end());
    start_head(config, sets);
    for (int i = 0; i < workers; ++i)
      start_worker();
  }

  // The training roles on the head and one rollout worker per worker (an elastic role), each
  // held after `held` units: 0, in the first weight sync, its group formed; 3, at the second
  // iteration of the first generation.
  void start_elastic_rollout(int steps, int workers, int held, std::vector<std::string> sets = {}) {
    sets.insert(
        sets.end(),
        {"--set", "roles.policy.placement=head", "--set", "roles.reference.placement=head", "--set",
         "roles.reward.placement=head", "--set", "roles.rollout.elastic={min: 1, max: 3}"});
    start(steps, workers, held, std::move(sets));
  }

  // The policy elastic within [1, 2], one rank per worker, every other role on the head (with
  // `sets`, of `config`); the rollout held at the second iteration of the first generation.
  void start_elastic_policy(int steps, int workers, std::vector<std::string> sets = {},
                            const std::string& config = grpo_config) {
    sets.insert(sets.end(),
                {"--set", "roles.policy.elastic={min: 1, max: 2}", "--set",
                 "roles.reference.placement=head", "--set", "roles.reward.placement=head", "--set",
                 "roles.rollout.placement=head"});
    start(steps, workers, 3, std::move(sets), config);
    ASSERT_FALSE(wait_for_event(run_dir(), "weights_synced", 120s).is_null())
        << head_->stderr_so_far();
  }

  // Lets the held run go on (a release again is harmless) and waits for it to succeed after
  // `steps` RL steps.
  void run_to_the_end(int steps) {
    hold_.release();
    const process_result r = head_->wait(300s);
    ASSERT_FALSE(r.timed_out);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(summary_of(r)["steps"], steps);
  }

  // Every RL step 1..steps once in metrics.jsonl.
  void expect_every_step_once(int steps) const {
    std::vector<int> done;
    for (const auto& row : read_jsonl(run_dir() + "/metrics.jsonl")) {
      if (row.contains("critic/score/mean")) done.push_back(row["step"]);
    }
    ASSERT_EQ(done.size(), static_cast<size_t>(steps)) << "a step is missing or repeated";
    for (int s = 1; s <= steps; ++s)
      EXPECT_EQ(done[s - 1], s);
  }
};

// Two rollout workers generate step 1; one is SIGKILLed with its sequences unfinished. They are
// regenerated on the other with the same seeds and the step completes with every sequence once
// (the controller refuses a missing or repeated one). A worker started meanwhile joins the
// weight-sync group at the next step's sync and gets prompts from then on; the run ends.
TEST_F(RlhfClusterTest, AKilledRolloutWorkersSequencesAreRegeneratedAndAJoinerGetsTheWeightsFirst) {
  ASSERT_NO_FATAL_FAILURE(start_elastic_rollout(3, 2, 3));
  // The requests go out with the first sync; once it is done they run (and are held).
  ASSERT_FALSE(wait_for_event(run_dir(), "weights_synced", 120s).is_null())
      << head_->stderr_so_far();
  const nlohmann::json generating = wait_for_event(run_dir(), "generating");
  ASSERT_EQ(generating["workers"].size(), 2u) << generating.dump();
  workers_[1]->signal(SIGKILL);
  const nlohmann::json lost = wait_for_event(run_dir(), "rollout_lost", 60s);
  ASSERT_FALSE(lost.is_null()) << head_->stderr_so_far();
  EXPECT_GT(lost.value("regenerated", 0), 0) << lost.dump();
  start_worker();
  ASSERT_FALSE(wait_for_event(run_dir(), "rollout_joining", 60s).is_null())
      << head_->stderr_so_far();
  ASSERT_NO_FATAL_FAILURE(run_to_the_end(3));
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
    if (row.contains("staleness/max")) {
      EXPECT_EQ(row["staleness/max"], 0) << row.dump();
    }
  }
}

// A rollout worker lost in the middle of a weight sync: both workers hold the first sync's
// transfer with its group formed (or still forming: then the others' wait ends at
// sync.timeout_ms), and one is SIGKILLed. The round fails on every member, the worker leaves
// the pool, and the sync is redone with the survivor in a group of the next epoch, which then
// generates every step alone; the run ends.
TEST_F(RlhfClusterTest, ARolloutWorkerLostDuringAWeightSyncLeavesAndTheSyncIsRedone) {
  ASSERT_NO_FATAL_FAILURE(start_elastic_rollout(2, 2, 0, {"--set", "rlhf.sync.timeout_ms=10000"}));
  const nlohmann::json group = wait_for_event(run_dir(), "rollout_group", 120s);
  ASSERT_FALSE(group.is_null()) << head_->stderr_so_far();
  ASSERT_EQ(group["workers"].size(), 2u) << group.dump();
  workers_[1]->signal(SIGKILL);
  const nlohmann::json lost = wait_for_event(run_dir(), "rollout_lost", 60s);
  ASSERT_FALSE(lost.is_null()) << head_->stderr_so_far();
  ASSERT_NO_FATAL_FAILURE(run_to_the_end(2));
  const auto redone = events_of(run_dir(), "sync_redone");
  ASSERT_EQ(redone.size(), 1u);
  EXPECT_EQ(redone[0]["version"], 1);
  std::vector<nlohmann::json> groups;
  for (const auto& e : events_of(run_dir(), "rollout_group"))
    groups.push_back(e["workers"]);
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_EQ(groups[1].size(), 1u) << "the survivor alone, in the next epoch's group";
  EXPECT_NE(std::find(groups[0].begin(), groups[0].end(), groups[1][0]), groups[0].end());
  EXPECT_EQ(std::find(groups[1].begin(), groups[1].end(), lost["name"]), groups[1].end());
  // Step 1's requests went out with the first sync, to both workers: the lost one's share is
  // regenerated on the survivor, which generates step 2 alone.
  EXPECT_GT(lost.value("regenerated", 0), 0) << lost.dump();
  const auto generations = events_of(run_dir(), "generating");
  ASSERT_EQ(generations.size(), 2u);
  EXPECT_EQ(generations[0]["workers"].size(), 2u) << generations[0].dump();
  EXPECT_EQ(generations[1]["workers"].size(), 1u) << generations[1].dump();
}

// A lost training role ends the run, naming it and the way back. A first launch (one process)
// checkpoints step 1; the relaunch resumes it on the cluster with the policy alone on the
// worker, held mid-generation; the worker is killed: the run fails naming policy/0 and the
// resume command for checkpoint 1.
TEST_F(RlhfClusterTest, ALostPolicyFailsTheRunNamingItAndTheResumeCommand) {
  const std::string first = dir_.file("first");
  const process_result one =
      troupe(launch_args(grpo_config, first,
                         short_rl_run(1, {"cluster.local_workers=0", "rlhf.trainer.save_freq=1"})),
             std::chrono::minutes(3));
  ASSERT_EQ(one.exit_code, 0) << one.err;
  ASSERT_NO_FATAL_FAILURE(
      start(3, 1, 1,  // the rollout's first sync, then held at its first iteration
            {"--set", "roles.reference.placement=head", "--set", "roles.reward.placement=head",
             "--set", "roles.rollout.placement=head", "--set", "rlhf.resume=" + first}));
  ASSERT_FALSE(wait_for_event(run_dir(), "weights_synced", 120s).is_null())
      << head_->stderr_so_far();
  workers_[0]->signal(SIGKILL);
  const process_result r = head_->wait(60s);
  ASSERT_FALSE(r.timed_out);
  EXPECT_NE(r.exit_code, 0);
  const std::string error = summary_of(r).value("error", "");
  EXPECT_NE(error.find("policy/0 was lost"), std::string::npos) << r.err;
  EXPECT_NE(error.find("--resume " + first + " continues from checkpoint 1"), std::string::npos)
      << error;
}

// An elastic policy (roles.policy.elastic) of two ranks on two workers. One worker is stopped
// during the first step's generation (so the step's update cannot complete on it), the run goes
// on, and the worker is SIGKILLed: the survivor's gradient sum fails, the heartbeats declare the
// rank lost, and the survivor regroups alone and redoes what was not committed, the weight sync
// included when the lost rank was its sender. Every step is done once, and the run ends.
TEST_F(RlhfClusterTest, AKilledPolicyRankIsRegroupedAndTheRunGoesOn) {
  ASSERT_NO_FATAL_FAILURE(start_elastic_policy(3, 2));
  const nlohmann::json formed = wait_for_event(run_dir(), "group_formed", 60s);
  ASSERT_FALSE(formed.is_null()) << head_->stderr_so_far();
  EXPECT_EQ(formed["world_size"], 2) << formed.dump();
  workers_[1]->signal(SIGSTOP);
  hold_.release();
  workers_[1]->signal(SIGKILL);
  ASSERT_NO_FATAL_FAILURE(run_to_the_end(3));
  const auto lost = events_of(run_dir(), "rank_lost");
  ASSERT_EQ(lost.size(), 1u);
  EXPECT_EQ(lost[0]["role"], "policy");
  const auto rebuilt = events_of(run_dir(), "group_rebuilt");
  ASSERT_FALSE(rebuilt.empty());
  EXPECT_EQ(rebuilt.back()["world_size"], 1);
  EXPECT_EQ(rebuilt.back()["members"].size(), 1u);
  EXPECT_NE(rebuilt.back()["members"][0], lost[0]["name"]);
  expect_every_step_once(3);
  std::ifstream file(run_dir() + "/metrics.json");
  const auto metrics = nlohmann::json::parse(file, nullptr, false);
  ASSERT_TRUE(metrics.is_object());
  EXPECT_EQ(metrics["counters"].value("troupe_train_recoveries_total{role=\"policy\"}", 0), 1)
      << metrics.dump();
  // No update completed before the loss (the lost rank was stopped first), so the survivor
  // trained as a run with one policy rank from the start does: the same rows, bit for bit (its
  // worker offers the same cores as the launch's one local worker).
  const std::string alone = dir_.file("alone");
  std::vector<std::string> args = {"launch", grpo_config, "--run-dir", alone};
  for (const auto& set : short_rl_run(3, {"cluster.local_workers=1"}))
    args.push_back(set);
  for (const char* set : {"roles.policy.elastic={min: 1, max: 2}", "roles.reference.placement=head",
                          "roles.reward.placement=head", "roles.rollout.placement=head"}) {
    args.insert(args.end(), {"--set", set});
  }
  const process_result one = troupe(args, std::chrono::minutes(3));
  ASSERT_EQ(one.exit_code, 0) << one.err;
  EXPECT_EQ(rl_step_rows(run_dir()), rl_step_rows(alone));
}

// PPO with the critic elastic too: each of two workers runs a policy rank and a critic rank,
// and killing one loses a rank of each group at once. Both groups regroup on the survivor, the
// values or the updates in flight are redone there, and the run ends.
TEST_F(RlhfClusterTest, AKilledWorkerCostsThePolicyAndTheCriticARankEachAndBothRegroup) {
  ASSERT_NO_FATAL_FAILURE(start_elastic_policy(
      2, 2,
      {"--set", "roles.critic.elastic={min: 1, max: 2}", "--set", "rlhf.data.train_batch_size=16",
       "--set", "rlhf.actor.ppo_mini_batch_size=8", "--set", "rlhf.actor.ppo_epochs=1"},
      std::string(TROUPE_SOURCE_DIR) + "/configs/rlhf_ppo.yaml"));
  workers_[1]->signal(SIGSTOP);
  hold_.release();
  workers_[1]->signal(SIGKILL);
  ASSERT_NO_FATAL_FAILURE(run_to_the_end(2));
  std::map<std::string, int> lost, rebuilt;
  for (const auto& e : events_of(run_dir(), "rank_lost"))
    ++lost[e["role"]];
  for (const auto& e : events_of(run_dir(), "group_rebuilt")) {
    ++rebuilt[e["role"]];
    EXPECT_EQ(e["world_size"], 1) << e.dump();
  }
  EXPECT_EQ(lost, (std::map<std::string, int>{{"critic", 1}, {"policy", 1}}));
  EXPECT_EQ(rebuilt, (std::map<std::string, int>{{"critic", 1}, {"policy", 1}}));
  expect_every_step_once(2);
}

// A frozen policy rank (SIGSTOP: no socket error ever comes) is declared dead by the heartbeats
// while the first step generates (held), and the group is formed anew without it before the
// update needs it. Continued later, the frozen worker is refused (fenced) and exits; the run
// goes on and ends.
TEST_F(RlhfClusterTest, AFrozenPolicyRankIsFencedAndTheRunGoesOn) {
  ASSERT_NO_FATAL_FAILURE(start_elastic_policy(3, 2));
  subprocess& frozen = *workers_[1];
  frozen.signal(SIGSTOP);
  const nlohmann::json rebuilt = wait_for_event(run_dir(), "group_rebuilt", 60s);
  ASSERT_FALSE(rebuilt.is_null()) << head_->stderr_so_far();
  EXPECT_EQ(rebuilt["world_size"], 1);
  // troupe status shows the generation the policy group runs in.
  const auto group = nlohmann::json::parse(
      status()["job"].value("policy_group", std::string("null")), nullptr, false);
  EXPECT_EQ(group.value("generation", 0), 2) << status().dump();
  EXPECT_EQ(group.value("world_size", 0), 1);
  frozen.signal(SIGCONT);
  const process_result woke = frozen.wait(30s);
  ASSERT_FALSE(woke.timed_out) << "the frozen worker did not exit when continued";
  EXPECT_EQ(woke.exit_code, 1) << woke.err;
  EXPECT_NE(woke.err.find("declared"), std::string::npos) << woke.err;
  ASSERT_NO_FATAL_FAILURE(run_to_the_end(3));
  expect_every_step_once(3);
  EXPECT_TRUE(events_of(run_dir(), "step_redone").empty()) << "no update was in flight";
}

// A worker started while the first step generates (held) gets a policy rank, which the group
// admits at the next RL step: it takes the parameters and optimizer state from the member over
// the data plane, and the rest of the run trains on two ranks.
TEST_F(RlhfClusterTest, APolicyRankOnAJoinedWorkerIsAdmittedAtTheNextStep) {
  ASSERT_NO_FATAL_FAILURE(start_elastic_policy(3, 1));
  start_worker();
  const nlohmann::json joining = wait_for_event(run_dir(), "rank_joining", 60s);
  ASSERT_FALSE(joining.is_null()) << head_->stderr_so_far();
  ASSERT_NO_FATAL_FAILURE(run_to_the_end(3));
  const auto joined = events_of(run_dir(), "rank_joined");
  ASSERT_EQ(joined.size(), 1u);
  EXPECT_EQ(joined[0]["name"], joining["name"]);
  EXPECT_EQ(joined[0]["step"], 2) << "at the step boundary after the held generation";
  const auto rebuilt = events_of(run_dir(), "group_rebuilt");
  ASSERT_EQ(rebuilt.size(), 1u);
  EXPECT_EQ(rebuilt[0]["world_size"], 2);
  expect_every_step_once(3);
}

// rlhf.placement.colocate: each group's actors share a worker process. With two workers and
// the least-loaded placement, policy and rollout would land on one worker and reference and
// reward on the other; colocated, policy goes with reference and rollout with reward.
TEST_F(RlhfClusterTest, ColocatedRolesShareAWorkerProcess) {
  ASSERT_NO_FATAL_FAILURE(start(
      1, 2, 0, {"--set", "rlhf.placement.colocate=[[policy, reference], [rollout, reward]]"}));
  // actor -> node, once all four roles are placed (members list other actors too: hosts, the
  // supervisor)
  std::map<std::string, std::string> node_of;
  ASSERT_TRUE(wait_until(
      [&] {
        node_of.clear();
        for (const auto& m : status().value("members", nlohmann::json::array())) {
          for (const auto& a : m.value("actors", nlohmann::json::array()))
            node_of[a.get<std::string>()] = m["node"];
        }
        return std::ranges::all_of(std::array{"policy/0", "reference/0", "rollout/0", "reward/0"},
                                   [&](const char* actor) { return node_of.contains(actor); });
      },
      60s))
      << head_->stderr_so_far();
  EXPECT_EQ(node_of["policy/0"], node_of["reference/0"]);
  EXPECT_EQ(node_of["rollout/0"], node_of["reward/0"]);
  EXPECT_NE(node_of["policy/0"], node_of["rollout/0"]);
  hold_.release();
  const process_result r = head_->wait(120s);
  ASSERT_EQ(r.exit_code, 0) << r.err;
}

}  // namespace
}  // namespace troupe::testing

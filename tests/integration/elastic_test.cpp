// Elastic pretraining on a real cluster: a head and `troupe worker --join` processes, one
// trainer each, a worker killed, frozen or added mid-run. Every wait is bounded; the test hold
// keeps the job at a step while a test sets up what it needs.

#include <fstream>

#include <gtest/gtest.h>
#include <signal.h>

#include "tests/integration/cluster_harness.hpp"
#include "tests/support/wait.hpp"

namespace troupe::testing {
namespace {

constexpr int batch = 6;

class ElasticTest : public cluster_harness {
 protected:
  // A tiny model trained for `steps` steps by one trainer per worker, within [min, max].
  std::string config(int steps, int min, int max, const std::string& cluster = "",
                     const std::string& pretrain = "") {
    std::string text;
    for (int i = 0; i < 3000; ++i)
      text += "the quick brown fox " + std::to_string(i % 89) + " jumps over the lazy dog\n";
    return dir_.write("elastic.yaml",
                      "app: pretrain\n"
                      "model: {vocab: 256, ctx: 32, layers: 2, dim: 32, heads: 2}\n"
                      "roles: {trainer: {kind: trainer, impl: gpt, elastic: {min: " +
                          std::to_string(min) + ", max: " + std::to_string(max) + "}}}\n" +
                          "cluster: {" + cluster +
                          "}\n"
                          "pretrain:\n"
                          "  train: {steps: " +
                          std::to_string(steps) + ", batch: " + std::to_string(batch) +
                          ", lr: 3.0e-3, warmup: 2, seed: 7, threads: 1}\n"
                          "  data: {path: " +
                          dir_.write("corpus.txt", text) + ", eval_every: 0, eval_windows: 16}\n" +
                          pretrain);
  }

  // metrics.jsonl's step rows.
  std::vector<nlohmann::json> step_rows() const {
    std::vector<nlohmann::json> rows;
    for (const auto& row : read_jsonl(run_dir() + "/metrics.jsonl")) {
      if (row.contains("loss")) rows.push_back(row);
    }
    return rows;
  }

  // Waits (bounded) until `n` steps are done.
  bool wait_for_steps(size_t n) const {
    return wait_until([&] { return step_rows().size() >= n; }, 60s);
  }

  // The 10-step job on `workers` workers (one trainer each, within [min, max]), held after
  // `held` steps until the test releases it.
  void start_held(int held, int workers, int min, int max, const std::string& cluster = "",
                  const std::string& pretrain = "") {
    hold_.hold(held);
    start_head(config(10, min, max, cluster, pretrain),
               {"--set", "cluster.min_workers=" + std::to_string(workers)});
    for (int i = 0; i < workers; ++i)
      start_worker();
    ASSERT_TRUE(wait_for_steps(held)) << head_->stderr_so_far();
  }

  // Stops `victim` before the next step (so that step cannot complete anywhere), lets the job
  // go on, and SIGKILLs it while the others are in that step; the head's result at the end.
  process_result kill_mid_step(subprocess& victim) {
    victim.signal(SIGSTOP);
    hold_.release();
    victim.signal(SIGKILL);
    return head_->wait(120s);
  }

  // Every step 1..steps once, on its own samples, on `world(step)` ranks: the rows after a
  // rollback's `redone` steps replace theirs.
  void expect_exactly_once(int steps, const std::function<int(int)>& world, int redone = 0) const {
    auto rows = step_rows();
    if (redone > 0) {
      std::vector<nlohmann::json> standing;
      for (const auto& row : rows) {
        while (!standing.empty() && standing.back()["step"] >= row["step"])
          standing.pop_back();
        standing.push_back(row);
      }
      EXPECT_EQ(rows.size() - standing.size(), static_cast<size_t>(redone));
      rows = standing;
    }
    ASSERT_EQ(rows.size(), static_cast<size_t>(steps)) << "a step is missing or repeated";
    for (int s = 1; s <= steps; ++s) {
      const auto& row = rows[s - 1];
      EXPECT_EQ(row["step"], s);
      EXPECT_EQ(row["first_sample"], (s - 1) * batch) << "step " << s;
      EXPECT_EQ(row["world_size"], world(s)) << "step " << s;
    }
  }
};

// Three trainers; one worker is stopped before step 4 (so step 4 cannot complete anywhere)
// and then SIGKILLed while the other two are in that step. Its peers' exchange fails at once,
// the heartbeats declare it dead, and the two survivors regroup and redo step 4 with its
// samples: no committed step is lost and none is repeated.
TEST_F(ElasticTest, AKilledTrainerCostsNoCommittedStepAndTheJobGoesOn) {
  ASSERT_NO_FATAL_FAILURE(start_held(3, 3, 2, 3));
  const process_result r = kill_mid_step(*workers_[1]);
  ASSERT_FALSE(r.timed_out);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json summary = summary_of(r);
  EXPECT_EQ(summary["steps"], 10);
  EXPECT_EQ(summary["world_size"], 2);
  expect_exactly_once(10, [](int s) { return s <= 3 ? 3 : 2; });
  EXPECT_EQ(events_of(run_dir(), "rank_lost").size(), 1u);
  const auto redone = events_of(run_dir(), "step_redone");
  ASSERT_EQ(redone.size(), 1u);
  EXPECT_EQ(redone[0]["step"], 4);
  const auto rebuilt = events_of(run_dir(), "group_rebuilt");
  ASSERT_FALSE(rebuilt.empty());
  EXPECT_EQ(rebuilt.back()["world_size"], 2);
  // The recovery is counted and timed in the job's metrics.
  std::ifstream file(run_dir() + "/metrics.json");
  const auto metrics = nlohmann::json::parse(file, nullptr, false);
  ASSERT_TRUE(metrics.is_object());
  EXPECT_EQ(metrics["counters"].value("troupe_train_recoveries_total", 0), 1) << metrics.dump();
  EXPECT_EQ(metrics["histograms"]["troupe_train_recovery_seconds"].value("count", 0), 1);
}

// The same kill with ZeRO-1: each rank holds a third of the optimizer state, and the lost rank's
// comes back from the replica its neighbour kept (parallel.shard_replicas), re-partitioned
// over the two survivors. The replica's refresh is timed in every step's row.
TEST_F(ElasticTest, AKilledZeroOneTrainerComesBackFromItsShardReplica) {
  ASSERT_NO_FATAL_FAILURE(start_held(3, 3, 2, 3, "", "  parallel: {zero: 1, shard_replicas: 1}\n"));
  const process_result r = kill_mid_step(*workers_[0]);
  ASSERT_FALSE(r.timed_out);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  expect_exactly_once(10, [](int s) { return s <= 3 ? 3 : 2; });
  EXPECT_TRUE(events_of(run_dir(), "rolled_back").empty());
  const auto redone = events_of(run_dir(), "step_redone");
  ASSERT_EQ(redone.size(), 1u);
  EXPECT_EQ(redone[0]["step"], 4);
  for (const auto& row : step_rows())
    EXPECT_GT(row["time_s"].value("replica", 0.0), 0.0) << row.dump();
}

// Without a replica the lost rank's shard is gone: the two survivors go back to checkpoint 2
// in place (their processes keep running) and redo steps 3 and 4.
TEST_F(ElasticTest, AKilledZeroOneTrainerWithoutReplicasRollsBackToTheCheckpointInPlace) {
  ASSERT_NO_FATAL_FAILURE(start_held(3, 3, 2, 3, "",
                                     "  parallel: {zero: 1}\n"
                                     "  checkpoint: {every_steps: 2}\n"));
  ASSERT_FALSE(wait_for_event(run_dir(), "checkpoint_committed", 60s).is_null());
  const process_result r = kill_mid_step(*workers_[1]);
  ASSERT_FALSE(r.timed_out);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto rolled = events_of(run_dir(), "rolled_back");
  ASSERT_EQ(rolled.size(), 1u);
  EXPECT_EQ(rolled[0]["step"], 2);
  EXPECT_EQ(rolled[0]["redone"], 1);  // step 3, and the aborted step 4 after it
  expect_exactly_once(
      10, [](int s) { return s <= 2 ? 3 : 2; }, 1);
  // In place: the survivors' trainers went back, none was replaced and nobody joined.
  EXPECT_EQ(events_of(run_dir(), "rank_lost").size(), 1u);
  EXPECT_TRUE(events_of(run_dir(), "rank_joined").empty());
  EXPECT_EQ(summary_of(r)["world_size"], 2);
}

// An elastic group started from init_from (a run's weights, as from model.path a Hugging Face
// model's): every rank's initial state holds them, so a loss before any checkpoint (ZeRO-1 with
// no replica) goes back to them, not to the seed's weights, and step 1 is redone alike.
TEST_F(ElasticTest, ALossBeforeAnyCheckpointGoesBackToTheInitFromWeights) {
  // The weights to start from: the same model trained 30 steps by a fixed group of one.
  std::string base = read_file(config(10, 2, 3));
  // Each rank reads init_from as it starts: a path without weights is refused before any does.
  const process_result early = troupe(
      {"check", dir_.file("elastic.yaml"), "--set", "pretrain.init_from=" + dir_.file("base")});
  EXPECT_EQ(early.exit_code, 2);
  EXPECT_NE(early.err.find("pretrain.init_from: init_from " + dir_.file("base")), std::string::npos)
      << early.err;
  const std::string elastic = "elastic: {min: 2, max: 3}";
  base.replace(base.find(elastic), elastic.size(), "count: 1");
  const process_result trained =
      troupe({"launch", dir_.write("base.yaml", base), "--run-dir", dir_.file("base"), "--set",
              "pretrain.train.steps=30", "--set", "pretrain.checkpoint.every_steps=30"},
             120s);
  ASSERT_EQ(trained.exit_code, 0) << trained.err;
  ASSERT_NO_FATAL_FAILURE(start_held(
      1, 3, 2, 3, "", "  init_from: " + dir_.file("base") + "\n  parallel: {zero: 1}\n"));
  const process_result r = kill_mid_step(*workers_[1]);
  ASSERT_FALSE(r.timed_out);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto rolled = events_of(run_dir(), "rolled_back");
  ASSERT_EQ(rolled.size(), 1u);
  EXPECT_EQ(rolled[0]["step"], 0);
  const auto rows = step_rows();
  ASSERT_GE(rows.size(), 2u);
  ASSERT_EQ(rows[0]["step"], 1);
  ASSERT_EQ(rows[1]["step"], 1) << "step 1 redone from the initial state";
  const double first = rows[0]["loss"], redone = rows[1]["loss"];
  EXPECT_NEAR(redone, first, 1e-4 * first) << "the same weights and samples on 2 ranks as on 3";
  double seed_first = 0;
  for (const auto& row : read_jsonl(dir_.file("base") + "/metrics.jsonl")) {
    if (row.contains("loss")) {
      seed_first = row["loss"];
      break;
    }
  }
  EXPECT_LT(first, seed_first - 0.5) << "the trained weights, not the seed's";
  expect_exactly_once(
      10, [](int) { return 2; }, 1);  // step 1's first try replaced by its redo
}

// A frozen worker (SIGSTOP: no socket error ever comes) is declared dead by the heartbeats; the
// survivors' step, blocked on it, is aborted and redone by the two of them. Continued later,
// the frozen worker is refused (fenced) and exits, while the job goes on without it.
TEST_F(ElasticTest, AFrozenTrainerIsFencedAndTheJobGoesOn) {
  ASSERT_NO_FATAL_FAILURE(start_held(3, 3, 2, 3));
  subprocess& frozen = *workers_[2];
  frozen.signal(SIGSTOP);
  hold_.hold(6);  // step 4, its redo and step 5 may start: the job is still running below
  ASSERT_FALSE(wait_for_event(run_dir(), "group_rebuilt", 60s).is_null()) << head_->stderr_so_far();
  ASSERT_TRUE(wait_for_steps(4));
  // troupe status shows the generation the job runs in.
  const auto group = nlohmann::json::parse(
      status()["job"].value("trainer_group", std::string("null")), nullptr, false);
  EXPECT_EQ(group.value("generation", 0), 2) << status().dump();
  EXPECT_EQ(group.value("world_size", 0), 2);
  frozen.signal(SIGCONT);
  const process_result woke = frozen.wait(30s);
  ASSERT_FALSE(woke.timed_out) << "the frozen worker did not exit when continued";
  EXPECT_EQ(woke.exit_code, 1) << woke.err;
  EXPECT_NE(woke.err.find("declared"), std::string::npos) << woke.err;
  hold_.release();
  const process_result r = head_->wait(120s);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  expect_exactly_once(10, [](int s) { return s <= 3 ? 3 : 2; });
  const auto redone = events_of(run_dir(), "step_redone");
  ASSERT_EQ(redone.size(), 1u);
  EXPECT_EQ(redone[0]["step"], 4);
}

// A worker started mid-run joins at the next step boundary: the group grows from two ranks to
// three, the new rank receives the state from rank 0, and the global batch stays the same.
TEST_F(ElasticTest, AWorkerThatJoinsMidRunAddsARankAtAStepBoundary) {
  ASSERT_NO_FATAL_FAILURE(start_held(2, 2, 2, 3));
  start_worker();
  // The driver knows of the new trainer before the job goes on, however slow the machine.
  ASSERT_FALSE(wait_for_event(run_dir(), "rank_joining", 60s).is_null()) << head_->stderr_so_far();
  hold_.release();
  const process_result r = head_->wait(120s);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(summary_of(r)["world_size"], 3);
  expect_exactly_once(10, [](int s) { return s <= 3 ? 2 : 3; });
  const auto joined = events_of(run_dir(), "rank_joined");
  ASSERT_EQ(joined.size(), 1u);
  EXPECT_EQ(joined[0]["rank"], 2);
  EXPECT_EQ(joined[0]["step"], 4);
}

// Below roles.trainer.elastic.min the job waits cluster.worker_wait_s for a worker, then fails
// saying so and what to do. (The workers' first joining has a wait of its own,
// cluster.join_wait_s, so a short one here does not race a busy machine's start.)
TEST_F(ElasticTest, BelowMinTheJobFailsClearlyAfterTheWorkerWait) {
  ASSERT_NO_FATAL_FAILURE(start_held(2, 2, 2, 2, "worker_wait_s: 1"));
  workers_[0]->signal(SIGKILL);
  hold_.release();
  const process_result r = head_->wait(120s);
  ASSERT_FALSE(r.timed_out);
  EXPECT_EQ(r.exit_code, 1) << r.err;
  const std::string error = summary_of(r).value("error", "");
  EXPECT_NE(error.find("below roles.trainer.elastic.min 2"), std::string::npos) << r.err;
  EXPECT_NE(error.find("troupe worker --join"), std::string::npos) << error;
}

}  // namespace
}  // namespace troupe::testing

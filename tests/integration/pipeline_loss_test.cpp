// A fixed pipeline grid on a real cluster loses a stage: a head and two `troupe worker --join`
// processes, a stage on each, one worker killed mid-step. Every wait is bounded; the test hold
// keeps the job at a step while the test sets up the kill.

#include <gtest/gtest.h>
#include <signal.h>

#include "tests/integration/cluster_harness.hpp"

namespace troupe::testing {
namespace {

class PipelineLossTest : public cluster_harness {};

// dp 1 x pp 2, checkpointed every 2 steps, held (at step 3 at the latest) until checkpoint 2 is
// committed; then one worker is stopped (so the step in flight cannot complete) and SIGKILLed
// while the other stage waits for it. The job fails at once, naming the rank's place in the grid,
// the checkpoint and the command that resumes from it; that command, at another layout (one rank),
// trains from step 3 to 10.
TEST_F(PipelineLossTest, ALostStageFailsTheJobSayingHowToResume) {
  std::string text;
  for (int i = 0; i < 2000; ++i)
    text += "the quick brown fox " + std::to_string(i % 89) + " jumps over the lazy dog\n";
  const std::string config =
      dir_.write("pipeline.yaml",
                 "app: pretrain\n"
                 "model: {vocab: 256, ctx: 32, layers: 2, dim: 32, heads: 2}\n"
                 "roles: {trainer: {kind: trainer, impl: gpt, count: 2}}\n"
                 "pretrain:\n"
                 "  train: {steps: 10, batch: 4, lr: 3.0e-3, warmup: 2, seed: 7, threads: 1}\n"
                 "  data: {path: " +
                     dir_.write("corpus.txt", text) +
                     ", eval_every: 0, eval_windows: 16}\n"
                     "  checkpoint: {every_steps: 2}\n"
                     "  parallel: {pp: 2, micro_batches: 2}\n");
  hold_.hold(3);
  ASSERT_NO_FATAL_FAILURE(start_head(config, {"--set", "cluster.min_workers=2"}));
  start_worker();
  start_worker();
  ASSERT_FALSE(wait_for_event(run_dir(), "checkpoint_committed", 60s).is_null())
      << head_->stderr_so_far();
  workers_[1]->signal(SIGSTOP);
  hold_.release();
  workers_[1]->signal(SIGKILL);
  const process_result r = head_->wait(120s);
  ASSERT_FALSE(r.timed_out);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("(replica 0, stage "), std::string::npos) << r.err;
  const std::string resume =
      "checkpoint 2 is committed: troupe launch CONFIG --resume " + run_dir() + " continues";
  EXPECT_NE(r.err.find(resume), std::string::npos) << r.err;

  const process_result again =
      run({TROUPE_BINARY, "launch", config, "--resume", run_dir(), "--run-dir",
           dir_.file("resumed"), "--set", "pretrain.parallel.pp=1", "--set",
           "pretrain.parallel.micro_batches=1", "--set", "roles.trainer.count=1"},
          120s);
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_EQ(summary_of(again)["steps"], 10);
  EXPECT_NE(again.err.find("continuing at step 3"), std::string::npos) << again.err;
  EXPECT_NE(again.err.find("(saved at dp 1 x pp 2, parameters and optimizer state resharded to "
                           "dp 1)"),
            std::string::npos)
      << again.err;
}

}  // namespace
}  // namespace troupe::testing

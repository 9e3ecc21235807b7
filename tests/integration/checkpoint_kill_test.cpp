// Crash-safe checkpoints under fire: a pretraining process that checkpoints every step is
// SIGKILLed 50 times in the middle of its checkpoint writes, each launch resuming the last.
// After every kill each committed checkpoint reads cleanly (every file against its manifest's
// size and sha256): a torn write is never visible. Each relaunch resumes from the newest one.
// Each launch is killed once it has committed 1 to 4 checkpoints of its own (a count drawn per
// launch, waited for, bounded): with a checkpoint every step its writer is always staging or
// committing the next one then, so the kill cuts a write in flight by construction, and the
// count only varies which one; no sleep decides the verdict.

#include <csignal>
#include <random>

#include <gtest/gtest.h>

#include "runtime/checkpoint/checkpoint_store.hpp"
#include "tests/integration/troupe_cli.hpp"
#include "tests/support/subprocess.hpp"
#include "tests/support/wait.hpp"

namespace troupe::testing {
namespace {

TEST(CheckpointKill, AKilledWriterNeverLeavesATornCheckpointAndTheNewestResumes) {
  temp_dir dir;
  std::string text;
  for (int i = 0; i < 4000; ++i)
    text += "line " + std::to_string(i * 7919 % 1000) + " of the text\n";
  const std::string config =
      dir.write("ckpt.yaml",
                "app: pretrain\n"
                "model: {vocab: 256, ctx: 16, layers: 1, dim: 16, heads: 1}\n"
                "roles: {trainer: {kind: trainer, impl: gpt, count: 1}}\n"
                "pretrain:\n"
                "  train: {steps: 100000, batch: 4, lr: 1.0e-3, seed: 3}\n"
                "  data: {path: " +
                    dir.write("text.txt", text) +
                    ", eval_every: 0}\n"
                    "  checkpoint: {every_steps: 1, keep: 3}\n");
  std::mt19937 random(20261202);
  std::uniform_int_distribution<int> commits(1, 4);
  std::string previous;
  int64_t newest = 0;  // the newest step committed so far, over every launch
  for (int kill = 0; kill < 50; ++kill) {
    const std::string run_dir = dir.file("run-" + std::to_string(kill));
    std::vector<std::string> args = {
        TROUPE_BINARY, "launch", config, "--run-dir", run_dir, "--set", "cluster.local_workers=0"};
    if (!previous.empty()) args.insert(args.end(), {"--resume", previous});
    subprocess troupe_run(args);
    const checkpoint::checkpoint_store store(run_dir + "/checkpoints");
    // The newest step it has committed, newest + n once it has committed n (keep 3 prunes).
    const int wanted = commits(random);
    ASSERT_TRUE(wait_until(
        [&] {
          const std::vector<int64_t> done = store.steps();
          return !done.empty() && done.back() >= newest + wanted;
        },
        std::chrono::seconds(60)))
        << "launch " << kill << " committed fewer than " << wanted << " checkpoints\n"
        << troupe_run.stderr_so_far();
    troupe_run.signal(SIGKILL);
    const process_result killed = troupe_run.wait(std::chrono::seconds(30));
    ASSERT_FALSE(killed.timed_out);
    // Every committed checkpoint is whole; the newest is past the one this launch resumed.
    const std::vector<int64_t> steps = store.steps();
    ASSERT_FALSE(steps.empty());
    for (int64_t step : steps) {
      const absl::StatusOr<checkpoint::checkpoint> read =
          checkpoint::checkpoint_store::read(store.step_dir(step));
      EXPECT_TRUE(read.ok()) << "kill " << kill << ": " << read.status();
    }
    EXPECT_GT(steps.back(), newest) << "kill " << kill;
    if (!previous.empty()) {
      // The launch resumed from the newest checkpoint the last one committed.
      const nlohmann::json resumed = wait_for_event(run_dir, "resume", std::chrono::seconds(5));
      ASSERT_FALSE(resumed.is_null()) << "kill " << kill;
      EXPECT_EQ(resumed.value("step", int64_t{-1}), newest) << resumed.dump();
    }
    newest = steps.back();
    previous = run_dir;
  }
}

}  // namespace
}  // namespace troupe::testing

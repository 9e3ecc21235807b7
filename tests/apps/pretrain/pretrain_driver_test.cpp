#include "apps/pretrain/pretrain_driver.hpp"

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"

namespace troupe::apps {
namespace {

using namespace std::chrono_literals;
using driver = pretrain_driver;

// A clock the test moves by hand.
struct fake_clock {
  driver::clock::time_point now{};
  std::function<driver::clock::time_point()> fn() {
    return [this] { return now; };
  }
};

template <class T>
bool has(const std::vector<driver::command>& commands) {
  return std::any_of(commands.begin(), commands.end(),
                     [](const driver::command& c) { return std::holds_alternative<T>(c); });
}

template <class T>
const T& get(const std::vector<driver::command>& commands) {
  for (const auto& c : commands) {
    if (const T* x = std::get_if<T>(&c)) return *x;
  }
  throw std::runtime_error("command missing");
}

actor::step_report report(int64_t step, double loss) {
  return {step, loss, 1.0, 1e-3, 0.01, 0.1, 0.02};
}

actor::checkpoint_shard shard(int64_t step, int rank) {
  return {step,  rank, 32 * step, {{absl::StrCat("optimizer-", rank, ".safetensors"), 10, "00"}},
          0.002, 0.05};
}

TEST(PretrainDriver, StepsInLockstepEvaluatesCheckpointsAndFinishes) {
  fake_clock clock;
  driver d(
      {.steps = 4, .ranks = 2, .eval_every = 2, .checkpoint_every = 2, .tokens_per_step = 2048},
      clock.fn());
  auto c = d.start();
  ASSERT_TRUE(has<driver::step_all>(c));
  for (int64_t s = 1; s <= 4; ++s) {
    clock.now += 100ms;
    EXPECT_TRUE(d.on_step(1, report(s, 3.0 - 0.1 * s)).empty()) << "waits for every rank";
    c = d.on_step(0, report(s, 3.0 - 0.1 * s));
    const auto& row = get<driver::metrics_row>(c).row;
    EXPECT_EQ(row["step"], s);
    EXPECT_NEAR(row["tokens_per_s"].get<double>(), 20480.0, 1e-6);
    EXPECT_EQ(row["time_s"]["compute"], 0.1);
    if (s % 2 == 1) {
      EXPECT_TRUE(has<driver::step_all>(c));
      continue;
    }
    ASSERT_TRUE(has<driver::eval_all>(c)) << s;
    EXPECT_TRUE(d.on_eval(0, 2.5).empty());
    c = d.on_eval(1, 2.5);
    EXPECT_EQ(get<driver::metrics_row>(c).row["val_loss"], 2.5);
    ASSERT_TRUE(has<driver::checkpoint_all>(c));
    EXPECT_EQ(get<driver::checkpoint_all>(c).step, s);
    if (s < 4) {
      // Training goes on while the writers persist the snapshots.
      EXPECT_TRUE(has<driver::step_all>(c));
    } else {
      EXPECT_FALSE(has<driver::finish>(c)) << "the last checkpoint is not committed yet";
    }
    const std::vector<driver::command> saved = d.on_saved(shard(s, 1));
    EXPECT_TRUE(saved.empty()) << "waits for every rank's shard";
    c = d.on_saved(shard(s, 0));
    const auto& commit = get<driver::commit>(c);
    EXPECT_EQ(commit.step, s);
    EXPECT_EQ(commit.cursor, 32 * s);
    ASSERT_EQ(commit.files.size(), 2u);
    EXPECT_EQ(commit.files[0].name, "optimizer-1.safetensors");
    EXPECT_EQ(get<driver::metrics_row>(c).row["checkpoint"]["stall_s"], 0.002);
  }
  ASSERT_TRUE(has<driver::finish>(c));
  EXPECT_EQ(get<driver::finish>(c).summary["checkpoint_step"], 4);
  const auto& summary = get<driver::finish>(c).summary;
  EXPECT_EQ(summary["steps"], 4);
  EXPECT_NEAR(summary["train_loss"].get<double>(), 2.6, 1e-12);
  EXPECT_EQ(summary["val_loss"], 2.5);
  EXPECT_NEAR(summary["tokens_per_s"].get<double>(), 4 * 2048 / 0.4, 1e-6);
  EXPECT_TRUE(d.done());
}

TEST(PretrainDriver, AResumedRunStartsAfterItsStepsAndAlwaysEvaluatesTheLast) {
  fake_clock clock;
  driver d({.steps = 3, .ranks = 1, .tokens_per_step = 10, .first_step = 2}, clock.fn());
  ASSERT_TRUE(has<driver::step_all>(d.start()));
  auto c = d.on_step(0, report(3, 1.0));
  EXPECT_TRUE(has<driver::eval_all>(c));  // the last step is evaluated even without eval_every
  c = d.on_eval(0, 1.5);
  EXPECT_EQ(get<driver::finish>(c).summary["steps"], 3);
}

TEST(PretrainDriver, StopAfterEndsEarlyWithAnEvaluationAndACheckpoint) {
  fake_clock clock;
  driver d({.steps = 10, .ranks = 1, .checkpoint_every = 4, .stop_after = 2}, clock.fn());
  d.start();
  auto c = d.on_step(0, report(1, 2.0));
  EXPECT_TRUE(has<driver::step_all>(c));
  c = d.on_step(0, report(2, 1.9));
  ASSERT_TRUE(has<driver::eval_all>(c));
  c = d.on_eval(0, 1.8);
  EXPECT_EQ(get<driver::checkpoint_all>(c).step, 2);
  c = d.on_saved(shard(2, 0));
  EXPECT_EQ(get<driver::finish>(c).summary["steps"], 2);
}

// Ctrl-C: the step in flight is the last one; it is evaluated and checkpointed (off schedule),
// and the run finishes once that checkpoint is committed.
TEST(PretrainDriver, AStopEndsAfterTheStepInFlightWithACheckpoint) {
  fake_clock clock;
  driver d({.steps = 10, .ranks = 2, .checkpoint_every = 4}, clock.fn());
  d.start();
  d.on_step(0, report(1, 2.0));
  EXPECT_TRUE(has<driver::step_all>(d.on_step(1, report(1, 2.0))));
  EXPECT_TRUE(d.stop().empty()) << "step 2 is in flight";
  EXPECT_TRUE(d.stopped());
  EXPECT_TRUE(d.stop().empty()) << "a second stop changes nothing";
  d.on_step(0, report(2, 1.9));
  auto c = d.on_step(1, report(2, 1.9));
  ASSERT_TRUE(has<driver::eval_all>(c));
  EXPECT_FALSE(has<driver::step_all>(c));
  d.on_eval(0, 1.8);
  c = d.on_eval(1, 1.8);
  EXPECT_EQ(get<driver::checkpoint_all>(c).step, 2);
  EXPECT_FALSE(has<driver::finish>(c)) << "not before the checkpoint is committed";
  d.on_saved(shard(2, 1));
  c = d.on_saved(shard(2, 0));
  EXPECT_EQ(get<driver::commit>(c).step, 2);
  EXPECT_EQ(get<driver::finish>(c).summary["steps"], 2);
  EXPECT_EQ(d.committed(), 2);

  // A stop during the last step changes nothing: the run ends there anyway.
  driver last({.steps = 1, .ranks = 1}, clock.fn());
  last.start();
  EXPECT_TRUE(last.stop().empty());
  EXPECT_FALSE(last.stopped());
}

TEST(PretrainDriver, ARankErrorFailsTheJobOnceNamingRankAndStep) {
  fake_clock clock;
  driver d({.steps = 5, .ranks = 2}, clock.fn());
  d.start();
  auto c = d.on_error(1, absl::DeadlineExceededError("allreduce timed out"));
  const auto& f = get<driver::fail>(c);
  EXPECT_EQ(f.why.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_NE(f.why.message().find("trainer rank 1 failed at step 1"), std::string::npos);
  EXPECT_TRUE(d.on_error(0, absl::InternalError("x")).empty());
  EXPECT_TRUE(d.on_step(0, report(1, 1.0)).empty());
}

TEST(PretrainDriver, CheckpointsAnsweredOutOfOrderCommitEachOnce) {
  fake_clock clock;
  driver d({.steps = 2, .ranks = 1, .checkpoint_every = 1}, clock.fn());
  d.start();
  auto c = d.on_step(0, report(1, 2.0));
  EXPECT_EQ(get<driver::checkpoint_all>(c).step, 1);
  c = d.on_step(0, report(2, 1.9));
  c = d.on_eval(0, 1.8);
  EXPECT_EQ(get<driver::checkpoint_all>(c).step, 2);
  EXPECT_FALSE(has<driver::finish>(c));
  c = d.on_saved(shard(2, 0));
  EXPECT_EQ(get<driver::commit>(c).step, 2);
  EXPECT_FALSE(has<driver::finish>(c)) << "step 1 is still being written";
  EXPECT_TRUE(d.on_saved(shard(2, 0)).empty()) << "a duplicate answer commits nothing";
  c = d.on_saved(shard(1, 0));
  EXPECT_EQ(get<driver::commit>(c).step, 1);
  EXPECT_EQ(get<driver::finish>(c).summary["checkpoint_step"], 2);
}

}  // namespace
}  // namespace troupe::apps

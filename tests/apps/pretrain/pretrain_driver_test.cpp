#include "apps/pretrain/pretrain_driver.hpp"

#include <gtest/gtest.h>

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
    EXPECT_TRUE(d.on_checkpointed(1).empty());
    c = d.on_checkpointed(0);
    EXPECT_EQ(get<driver::commit>(c).step, s);
    if (s < 4) {
      EXPECT_TRUE(has<driver::step_all>(c));
    }
  }
  ASSERT_TRUE(has<driver::finish>(c));
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

}  // namespace
}  // namespace troupe::apps

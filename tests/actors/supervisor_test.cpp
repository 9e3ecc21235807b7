#include "actors/supervisor.hpp"

#include <gtest/gtest.h>

namespace troupe::actors {
namespace {

using action = supervision::decision::action;

config::failure_policy restart(int max, int backoff_ms) {
  return {config::failure_policy::action::restart, {max, backoff_ms}};
}

TEST(Supervision, RestartsWithDoublingBackoffThenFailsTheJob) {
  supervision s;
  s.add("w/0", restart(3, 100));
  const absl::Status boom = absl::InternalError("boom");
  auto d1 = s.on_exit("w/0", boom);
  EXPECT_EQ(d1.what, action::restart);
  EXPECT_EQ(d1.attempt, 1);
  EXPECT_EQ(d1.delay.count(), 100);
  EXPECT_EQ(s.on_exit("w/0", boom).delay.count(), 200);
  EXPECT_EQ(s.on_exit("w/0", boom).delay.count(), 400);
  EXPECT_EQ(s.restarts("w/0"), 3);
  auto last = s.on_exit("w/0", boom);
  EXPECT_EQ(last.what, action::fail_job);
  EXPECT_EQ(last.cause, "w/0 failed: boom (after 3 restarts; on_failure.restart.max is 3)");
}

TEST(Supervision, BackoffIsCapped) {
  supervision s;
  s.add("w/0", restart(100, 20000));
  (void)s.on_exit("w/0", absl::InternalError("x"));
  EXPECT_EQ(s.on_exit("w/0", absl::InternalError("x")).delay, supervision::max_backoff);
  EXPECT_EQ(s.on_exit("w/0", absl::InternalError("x")).delay, supervision::max_backoff);
}

TEST(Supervision, FailJobPolicyFailsAtOnce) {
  supervision s;
  s.add("sink/0", {config::failure_policy::action::fail_job, {}});
  auto d = s.on_exit("sink/0", absl::DataLossError("lost"));
  EXPECT_EQ(d.what, action::fail_job);
  EXPECT_EQ(d.cause, "sink/0 failed: lost (on_failure: fail_job)");
}

TEST(Supervision, StoppingEarlyIsAFailureAndStrangersAreIgnored) {
  supervision s;
  s.add("w/0", restart(1, 0));
  EXPECT_EQ(s.on_exit("nobody/0", absl::InternalError("x")).what, action::ignore);
  EXPECT_EQ(s.on_exit("w/0", absl::OkStatus()).what, action::restart);
  auto d = s.on_exit("w/0", absl::OkStatus());
  EXPECT_EQ(d.what, action::fail_job);  // max 1
  EXPECT_EQ(d.cause,
            "w/0 failed: stopped on its own while the job was running (after 1 restarts; "
            "on_failure.restart.max is 1)");
}

}  // namespace
}  // namespace troupe::actors

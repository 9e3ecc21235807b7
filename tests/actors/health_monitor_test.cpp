#include "actors/health_monitor.hpp"

#include <gtest/gtest.h>

#include "runtime/metrics/cycle_clock.hpp"

namespace troupe::actors {
namespace {

class HealthMonitorTest : public ::testing::Test {
 protected:
  double gauge(const std::string& name, const std::string& actor) {
    return metrics_.get_gauge(name, "", {{"actor", actor}}).value();
  }
  metrics::registry metrics_;
  health_monitor monitor_{config::health_spec{.unresponsive_after = 2}, metrics_};
};

TEST_F(HealthMonitorTest, MissedPingsMakeAnActorUnresponsiveUntilItAnswers) {
  monitor_.track("a/0");
  metrics_.actor("a/0")->record_mailbox_depth(12);
  // The actor entered a handler about 2 s ago and is still in it.
  (void)metrics_.actor("a/0")->begin(metrics::coarse_clock::now() - 2000000000u);
  EXPECT_EQ(monitor_.status("a/0"), liveness::alive);
  EXPECT_EQ(gauge("troupe_actor_up", "a/0"), 1);
  EXPECT_TRUE(monitor_.take_changes().empty());

  monitor_.missed("a/0");
  EXPECT_EQ(monitor_.status("a/0"), liveness::alive);  // one miss is not enough
  monitor_.missed("a/0");
  EXPECT_EQ(monitor_.status("a/0"), liveness::unresponsive);
  EXPECT_EQ(gauge("troupe_actor_up", "a/0"), 0);
  auto changes = monitor_.take_changes();
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_EQ(changes[0].to, liveness::unresponsive);
  EXPECT_EQ(changes[0].missed_in_a_row, 2);
  EXPECT_EQ(changes[0].mailbox_depth, 12u);  // the actor's own statistics explain why
  EXPECT_NEAR(changes[0].in_handler_seconds, 2.0, 0.5);
  EXPECT_EQ(metrics_.get_counter("troupe_actor_missed_pings_total", "", {{"actor", "a/0"}}).value(),
            2u);

  monitor_.pong("a/0", std::chrono::microseconds(250));
  EXPECT_EQ(monitor_.status("a/0"), liveness::alive);
  EXPECT_DOUBLE_EQ(gauge("troupe_actor_ping_seconds", "a/0"), 250e-6);
  changes = monitor_.take_changes();
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_EQ(changes[0].from, liveness::unresponsive);
}

TEST_F(HealthMonitorTest, DeadActorsAreNotPingedUntilRestarted) {
  monitor_.track("a/0");
  monitor_.track("b/0");
  monitor_.down("a/0");
  EXPECT_EQ(monitor_.status("a/0"), liveness::dead);
  EXPECT_EQ(monitor_.pingable(), std::vector<std::string>{"b/0"});
  monitor_.missed("a/0");  // a late timeout for a dead actor changes nothing
  EXPECT_EQ(monitor_.status("a/0"), liveness::dead);
  monitor_.track("a/0");
  EXPECT_EQ(monitor_.status("a/0"), liveness::alive);
  EXPECT_EQ(monitor_.pingable().size(), 2u);
  EXPECT_EQ(monitor_.status("unknown/0"), liveness::dead);
}

}  // namespace
}  // namespace troupe::actors

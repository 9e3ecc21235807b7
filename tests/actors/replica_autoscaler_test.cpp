#include "actors/replica_autoscaler.hpp"

#include <gtest/gtest.h>

namespace troupe::actors {
namespace {

using autoscaler = replica_autoscaler;
using std::chrono::milliseconds;

// A look-back shorter than the ticks: each tick's count decides alone.
config::autoscale_spec spec(int min, int max, double target, double up_s, double down_s,
                            double look_back_s = 0.05) {
  return {.min = min,
          .max = max,
          .target_ongoing_requests = target,
          .upscale_delay_s = up_s,
          .downscale_delay_s = down_s,
          .look_back_period_s = look_back_s};
}

autoscaler::replica worker(std::string name, int64_t ongoing, uint64_t joined,
                           bool draining = false) {
  return {.name = std::move(name), .ongoing = ongoing, .draining = draining, .joined = joined};
}

TEST(ReplicaAutoscaler, WantsOngoingRequestsOverTheTargetWithinMinAndMax) {
  autoscaler a(spec(1, 5, 2, 0, 0), 1);
  EXPECT_EQ(a.wanted(0), 1);   // never below min
  EXPECT_EQ(a.wanted(1), 1);   // ceil(1 / 2)
  EXPECT_EQ(a.wanted(5), 3);   // ceil(5 / 2)
  EXPECT_EQ(a.wanted(40), 5);  // never above max
  autoscaler fractional(spec(1, 10, 0.5, 0, 0), 1);
  EXPECT_EQ(fractional.wanted(3), 6);
}

TEST(ReplicaAutoscaler, AsksForItsInitialTargetAtTheFirstTickOnly) {
  autoscaler a(spec(2, 4, 2, 0, 0), 1);  // clamped to min
  const auto t0 = autoscaler::clock::now();
  auto d = a.step(t0, 4, {});
  ASSERT_TRUE(d.scale_to.has_value());
  EXPECT_EQ(*d.scale_to, 2);
  EXPECT_FALSE(a.step(t0 + milliseconds(100), 4, {}).scale_to.has_value());
}

TEST(ReplicaAutoscaler, ScalesUpOnlyOnceMoreWorkersWereWantedForTheWholeDelay) {
  autoscaler a(spec(1, 3, 2, 1.0, 600), 1);
  const auto t0 = autoscaler::clock::now();
  (void)a.step(t0, 0, {worker("w/0", 0, 1)});
  EXPECT_FALSE(a.step(t0 + milliseconds(100), 6, {worker("w/0", 6, 1)}).scale_to);
  // The wish breaks: the delay starts over.
  EXPECT_FALSE(a.step(t0 + milliseconds(600), 1, {worker("w/0", 1, 1)}).scale_to);
  EXPECT_FALSE(a.step(t0 + milliseconds(700), 6, {worker("w/0", 6, 1)}).scale_to);
  EXPECT_FALSE(a.step(t0 + milliseconds(1600), 6, {worker("w/0", 6, 1)}).scale_to);
  auto d = a.step(t0 + milliseconds(1700), 5, {worker("w/0", 5, 1)});
  ASSERT_TRUE(d.scale_to.has_value());
  EXPECT_EQ(*d.scale_to, 3);  // the wish of that tick: ceil(5 / 2)
  EXPECT_EQ(a.target(), 3);
  EXPECT_TRUE(d.drain.empty());
}

TEST(ReplicaAutoscaler, DrainsTheLeastBusyThenTheNewestAndRetiresThemWhenIdle) {
  autoscaler a(spec(1, 3, 2, 0, 2.0), 3);
  const auto t0 = autoscaler::clock::now();
  const std::vector<autoscaler::replica> three = {worker("w/0", 1, 1), worker("w/1", 1, 2),
                                                  worker("w/2", 2, 3)};
  (void)a.step(t0, 4, three);
  EXPECT_FALSE(a.step(t0 + milliseconds(100), 2, three).scale_to);  // wants 1, not for 2 s yet
  auto d = a.step(t0 + milliseconds(2100), 2, three);
  ASSERT_TRUE(d.scale_to.has_value());
  EXPECT_EQ(*d.scale_to, 1);
  // w/0 and w/1 run one request each, w/2 two: w/1 (newer) and w/0 drain, and none of them is
  // idle yet.
  EXPECT_EQ(d.drain, (std::vector<std::string>{"w/1", "w/0"}));
  EXPECT_TRUE(d.retire.empty());
  // w/1 finishes its request: it is retired; w/0 still runs one.
  d = a.step(t0 + milliseconds(2200), 2,
             {worker("w/0", 1, 1, true), worker("w/1", 0, 2, true), worker("w/2", 1, 3)});
  EXPECT_TRUE(d.drain.empty());
  EXPECT_EQ(d.retire, (std::vector<std::string>{"w/1"}));
}

TEST(ReplicaAutoscaler, ADrainingWorkerServesAgainWhenTheTargetRises) {
  autoscaler a(spec(1, 3, 1, 0, 0), 2);
  const auto t0 = autoscaler::clock::now();
  (void)a.step(t0, 2, {worker("w/0", 1, 1), worker("w/1", 1, 2)});
  auto d = a.step(t0 + milliseconds(100), 1, {worker("w/0", 1, 1), worker("w/1", 1, 2)});
  EXPECT_EQ(d.drain, (std::vector<std::string>{"w/1"}));
  d = a.step(t0 + milliseconds(200), 2, {worker("w/0", 1, 1), worker("w/1", 1, 2, true)});
  ASSERT_TRUE(d.scale_to.has_value());
  EXPECT_EQ(*d.scale_to, 2);
  EXPECT_EQ(d.undrain, (std::vector<std::string>{"w/1"}));
  EXPECT_TRUE(d.retire.empty());
}

TEST(ReplicaAutoscaler, WorkersThatJoinBeyondTheTargetAreDrainedAndRetired) {
  // The target fell while two workers were still starting: when they join they are surplus.
  autoscaler a(spec(1, 3, 2, 0, 0), 1);
  const auto t0 = autoscaler::clock::now();
  (void)a.step(t0, 0, {worker("w/0", 0, 1)});
  auto d = a.step(t0 + milliseconds(100), 0,
                  {worker("w/0", 0, 1), worker("w/1", 0, 2), worker("w/2", 0, 3)});
  EXPECT_EQ(d.drain, (std::vector<std::string>{"w/2", "w/1"}));
  EXPECT_EQ(d.retire, (std::vector<std::string>{"w/2", "w/1"}));
}

TEST(ReplicaAutoscaler, AveragesTheOngoingRequestsOverTheLookBackPeriod) {
  autoscaler a(spec(1, 4, 2, 0, 0, 1.0), 1);
  const auto t0 = autoscaler::clock::now();
  const std::vector<autoscaler::replica> one = {worker("w/0", 0, 1)};
  (void)a.step(t0, 0, one);
  (void)a.step(t0 + milliseconds(500), 0, one);
  // 8 ongoing now, 0 at the two ticks before within the second: a mean of 8/3 wants 2.
  auto d = a.step(t0 + milliseconds(900), 8, one);
  EXPECT_DOUBLE_EQ(d.mean_ongoing, 8.0 / 3);
  ASSERT_TRUE(d.scale_to.has_value());
  EXPECT_EQ(*d.scale_to, 2);
  // The tick at t0 has left the window: (0 + 8 + 8) / 3 wants 3 ...
  d = a.step(t0 + milliseconds(1000), 8, one);
  ASSERT_TRUE(d.scale_to.has_value());
  EXPECT_EQ(*d.scale_to, 3);
  // ... and once only the busy ticks are left, 8 / 2 wants 4.
  d = a.step(t0 + milliseconds(1600), 8, one);
  EXPECT_DOUBLE_EQ(d.mean_ongoing, 8.0);
  ASSERT_TRUE(d.scale_to.has_value());
  EXPECT_EQ(*d.scale_to, 4);
}

TEST(ReplicaAutoscaler, GoesToZeroWorkersOnlyFromOneAfterItsOwnDelay) {
  auto s = spec(0, 3, 2, 0, 1.0);
  s.downscale_to_zero_delay_s = 5.0;
  autoscaler a(s, 3);
  const auto t0 = autoscaler::clock::now();
  const std::vector<autoscaler::replica> three = {worker("w/0", 0, 1), worker("w/1", 0, 2),
                                                  worker("w/2", 0, 3)};
  (void)a.step(t0, 0, three);
  // Idle: after downscale_delay_s the target goes to 1, not to 0.
  auto d = a.step(t0 + milliseconds(1000), 0, three);
  ASSERT_TRUE(d.scale_to.has_value());
  EXPECT_EQ(*d.scale_to, 1);
  EXPECT_EQ(d.drain.size(), 2u);
  const std::vector<autoscaler::replica> one = {worker("w/0", 0, 1)};
  EXPECT_FALSE(a.step(t0 + milliseconds(1100), 0, one).scale_to.has_value());
  EXPECT_FALSE(a.step(t0 + milliseconds(6000), 0, one).scale_to.has_value());
  // From 1 to 0 after downscale_to_zero_delay_s: the last worker drains and, idle, retires.
  d = a.step(t0 + milliseconds(6100), 0, one);
  ASSERT_TRUE(d.scale_to.has_value());
  EXPECT_EQ(*d.scale_to, 0);
  EXPECT_EQ(d.drain, (std::vector<std::string>{"w/0"}));
  EXPECT_EQ(d.retire, (std::vector<std::string>{"w/0"}));
}

TEST(ReplicaAutoscaler, WithoutItsOwnDelayTheLastWorkerStopsAfterDownscaleDelay) {
  autoscaler a(spec(0, 3, 2, 0, 1.0), 1);  // downscale_to_zero_delay_s unset
  const auto t0 = autoscaler::clock::now();
  const std::vector<autoscaler::replica> one = {worker("w/0", 0, 1)};
  (void)a.step(t0, 0, one);
  EXPECT_FALSE(a.step(t0 + milliseconds(900), 0, one).scale_to.has_value());
  auto d = a.step(t0 + milliseconds(1000), 0, one);
  ASSERT_TRUE(d.scale_to.has_value());
  EXPECT_EQ(*d.scale_to, 0);
}

TEST(ReplicaAutoscaler, AtZeroWorkersARequestStartsOneAtOnce) {
  autoscaler a(spec(0, 3, 2, 600, 0), 0);
  const auto t0 = autoscaler::clock::now();
  EXPECT_EQ(*a.step(t0, 0, {}).scale_to, 0);
  EXPECT_FALSE(a.step(t0 + milliseconds(100), 0, {}).scale_to.has_value());
  // Six requests wait: one worker at once, whatever upscale_delay_s says ...
  auto d = a.step(t0 + milliseconds(200), 6, {});
  ASSERT_TRUE(d.scale_to.has_value());
  EXPECT_EQ(*d.scale_to, 1);
  // ... and nothing more until it serves (then more after upscale_delay_s).
  EXPECT_FALSE(a.step(t0 + milliseconds(300), 6, {}).scale_to.has_value());
  EXPECT_EQ(a.target(), 1);
}

TEST(ReplicaAutoscaler, DoesNotGoDownWhileNoWorkerServesYet) {
  autoscaler a(spec(0, 3, 2, 0, 0), 1);
  const auto t0 = autoscaler::clock::now();
  EXPECT_EQ(*a.step(t0, 0, {}).scale_to, 1);
  // The first worker is still starting: no request, but the target stays.
  EXPECT_FALSE(a.step(t0 + milliseconds(100), 0, {}).scale_to.has_value());
  EXPECT_EQ(a.target(), 1);
}

}  // namespace
}  // namespace troupe::actors

#include "runtime/metrics/registry.hpp"

#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace troupe::metrics {
namespace {

TEST(ActorStats, BucketsArePowersOfFourMicroseconds) {
  EXPECT_EQ(actor_stats::bucket_of(0), 0);
  EXPECT_EQ(actor_stats::bucket_of(1000), 0);  // <= 1 us
  EXPECT_EQ(actor_stats::bucket_of(1001), 1);  // <= 4 us
  EXPECT_EQ(actor_stats::bucket_of(4000), 1);
  EXPECT_EQ(actor_stats::bucket_of(4001), 2);     // <= 16 us
  EXPECT_EQ(actor_stats::bucket_of(1000000), 5);  // <= 1.024 ms
  EXPECT_EQ(actor_stats::bucket_of(uint64_t{1} << 62), actor_stats::bucket_count - 1);
  for (int i = 0; i + 1 < actor_stats::bucket_count; ++i) {
    const auto bound = static_cast<uint64_t>(actor_stats::bucket_bound_seconds(i) * 1e9);
    EXPECT_EQ(actor_stats::bucket_of(bound), i) << i;
    EXPECT_EQ(actor_stats::bucket_of(bound + 1), i + 1) << i;
  }
}

// Short handlers: the first message is timed, then one in 16, each standing for 16; every
// message is counted.
TEST(ActorStats, TimesOneShortMessageInSixteenAndCountsThemAll) {
  actor_stats s;
  std::vector<int> timed;
  for (int i = 0; i < 40; ++i) {
    if (s.begin()) {
      timed.push_back(i);
      s.record_timed(500);
    } else {
      s.record_untimed();
    }
  }
  EXPECT_EQ(timed, (std::vector<int>{0, 16, 32}));
  EXPECT_EQ(s.messages(), 40u);
  EXPECT_EQ(s.busy_nanos(), 500u * (1 + 16 + 16));
  EXPECT_EQ(s.bucket(0), 33u);
  EXPECT_EQ(s.handler_start(), 0u);
}

// A timed handler that took 20 us or more has every following message timed, until a short one.
TEST(ActorStats, TimesEveryMessageAfterALongOne) {
  actor_stats s;
  ASSERT_TRUE(s.begin());
  s.record_timed(actor_stats::time_all_above_nanos);
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(s.begin()) << i;
    s.record_timed(2 * actor_stats::time_all_above_nanos);
  }
  ASSERT_TRUE(s.begin());
  s.record_timed(100);  // short again: the next 15 are not timed
  for (int i = 0; i < 15; ++i) {
    ASSERT_FALSE(s.begin()) << i;
    s.record_untimed();
  }
  ASSERT_TRUE(s.begin());
  s.record_timed(100);
  EXPECT_EQ(s.messages(), 21u);
  EXPECT_EQ(s.busy_nanos(), 20000u + 3 * 40000u + 100u + 16 * 100u);
  EXPECT_EQ(s.max_nanos(), 40000u);
}

// The running handler's start is marked on the coarse clock, and cleared when it ends.
TEST(ActorStats, MarksTheRunningHandler) {
  actor_stats s;
  EXPECT_EQ(s.handler_age_seconds(), 0);
  (void)s.begin(coarse_clock::now() - 3000000000u);
  EXPECT_GE(s.handler_age_seconds(), 3.0);
  s.record_timed(10);
  EXPECT_EQ(s.handler_age_seconds(), 0);
}

TEST(ActorStats, RecordsMessagesAndMailboxDepth) {
  actor_stats s;
  s.record(500);
  s.record(3000);
  s.record_mailbox_depth(7);
  s.record_mailbox_depth(2);
  EXPECT_EQ(s.messages(), 2u);
  EXPECT_EQ(s.busy_nanos(), 3500u);
  EXPECT_EQ(s.max_nanos(), 3000u);
  EXPECT_EQ(s.bucket(0), 1u);
  EXPECT_EQ(s.bucket(1), 1u);
  EXPECT_EQ(s.mailbox_depth(), 2u);
  EXPECT_EQ(s.mailbox_depth_max(), 7u);
}

TEST(Registry, CountersAreSharedAndThreadSafe) {
  registry r;
  auto& c = r.get_counter("troupe_things_total", "things", {{"role", "a"}});
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&r] {
      for (int i = 0; i < 1000; ++i)
        r.get_counter("troupe_things_total", "things", {{"role", "a"}}).inc();
    });
  }
  for (auto& t : threads)
    t.join();
  EXPECT_EQ(c.value(), 4000u);
}

TEST(Registry, PrometheusText) {
  registry r;
  r.get_counter("troupe_restarts_total", "Restarts", {{"actor", "a/0"}}).inc(2);
  r.get_gauge("troupe_up", "Up", {{"actor", "quote\"d"}}).set(1);
  r.actor("s/0")->record(2000);
  const std::string text = r.prometheus_text();
  EXPECT_NE(
      text.find("# TYPE troupe_restarts_total counter\ntroupe_restarts_total{actor=\"a/0\"} 2\n"),
      std::string::npos)
      << text;
  EXPECT_NE(text.find("troupe_up{actor=\"quote\\\"d\"} 1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("troupe_actor_messages_total{actor=\"s/0\"} 1\n"), std::string::npos);
  EXPECT_NE(text.find("troupe_actor_handle_seconds_bucket{actor=\"s/0\",le=\"1e-06\"} 0\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("troupe_actor_handle_seconds_bucket{actor=\"s/0\",le=\"4e-06\"} 1\n"),
            std::string::npos);
  EXPECT_NE(text.find("troupe_actor_handle_seconds_bucket{actor=\"s/0\",le=\"+Inf\"} 1\n"),
            std::string::npos);
  EXPECT_NE(text.find("troupe_actor_handle_seconds_count{actor=\"s/0\"} 1\n"), std::string::npos);
}

// The handler an actor runs now: its age, and whether it passed health.stuck_after_s.
TEST(Registry, AHandlerRunningPastTheLimitMakesItsActorStuck) {
  registry r;
  r.set_stuck_after(0.5);
  r.actor("idle/0")->record(1000);
  (void)r.actor("busy/0")->begin(coarse_clock::now() - 2000000000u);
  const std::string text = r.prometheus_text();
  EXPECT_NE(text.find("troupe_actor_handler_age_seconds{actor=\"idle/0\"} 0\n"), std::string::npos)
      << text;
  EXPECT_NE(text.find("troupe_actor_stuck{actor=\"busy/0\"} 1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("troupe_actor_stuck{actor=\"idle/0\"} 0\n"), std::string::npos) << text;
  EXPECT_GE(r.actor("busy/0")->handler_age_seconds(), 2.0);
}

TEST(Registry, HistogramBucketsAreCumulativeInPrometheusText) {
  registry r;
  auto& h = r.get_histogram("troupe_latency_seconds", "Latency", {0.01, 0.1}, {{"route", "a"}});
  for (double v : {0.005, 0.01, 0.05, 3.0})
    h.observe(v);
  EXPECT_EQ(&h, &r.get_histogram("troupe_latency_seconds", "Latency", {1.0}, {{"route", "a"}}));
  EXPECT_EQ(h.bucket(0), 2u);  // <= 0.01, the bound included
  EXPECT_EQ(h.bucket(1), 1u);
  EXPECT_EQ(h.bucket(2), 1u);
  EXPECT_EQ(h.count(), 4u);
  EXPECT_DOUBLE_EQ(h.sum(), 3.065);
  const std::string text = r.prometheus_text();
  EXPECT_NE(text.find("# TYPE troupe_latency_seconds histogram\n"
                      "troupe_latency_seconds_bucket{route=\"a\",le=\"0.01\"} 2\n"
                      "troupe_latency_seconds_bucket{route=\"a\",le=\"0.1\"} 3\n"
                      "troupe_latency_seconds_bucket{route=\"a\",le=\"+Inf\"} 4\n"
                      "troupe_latency_seconds_sum{route=\"a\"} 3.065\n"
                      "troupe_latency_seconds_count{route=\"a\"} 4\n"),
            std::string::npos)
      << text;
  const auto json = r.to_json()["histograms"]["troupe_latency_seconds{route=\"a\"}"];
  EXPECT_EQ(json["count"], 4);
  EXPECT_EQ(json["buckets"][1][1], 3);
}

TEST(Registry, ActorStatsSurviveRestarts) {
  registry r;
  auto first = r.actor("trainer/0");
  first->record(10);
  EXPECT_EQ(r.actor("trainer/0")->messages(), 1u);
  EXPECT_EQ(r.actor_names(), std::vector<std::string>{"trainer/0"});
  EXPECT_EQ(r.to_json()["actors"]["trainer/0"]["messages"], 1);
}

}  // namespace
}  // namespace troupe::metrics

#include "runtime/metrics/registry.hpp"

#include <thread>

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
  const uint64_t two_seconds = static_cast<uint64_t>(2e9 / cycle_clock::nanos_per_tick());
  r.actor("busy/0")->begin(cycle_clock::now() - two_seconds);
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

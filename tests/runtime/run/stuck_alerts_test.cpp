#include "runtime/run/stuck_alerts.hpp"

#include <gtest/gtest.h>

namespace troupe::run {
namespace {

std::vector<metrics::sample> scrape(bool group_stuck, bool actor_stuck) {
  return metrics::parse_samples(absl::StrCat(
      "troupe_actor_handler_age_seconds{node=\"w1\",role=\"worker\",actor=\"trainer/0/dp_group\"} "
      "12.5\n"
      "troupe_actor_stuck{node=\"w1\",role=\"worker\",actor=\"trainer/0/dp_group\"} ",
      group_stuck ? 1 : 0,
      "\n"
      "troupe_actor_stuck{node=\"head\",role=\"head\",actor=\"app/0\"} ",
      actor_stuck ? 1 : 0, "\n"));
}

TEST(StuckAlerts, WarnsOncePerStuckActorAndAgainOnlyAfterItRecovered) {
  stuck_alerts alerts;
  EXPECT_TRUE(alerts.observe(scrape(false, false)).empty());
  const auto first = alerts.observe(scrape(true, false));
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0].kind, "stuck_collective");
  EXPECT_EQ(first[0].message,
            "trainer/0/dp_group on w1 has waited 12.5 s in a collective operation: a rank of its "
            "group stopped (troupe top shows which is not stuck)");
  EXPECT_TRUE(alerts.observe(scrape(true, false)).empty());
  const auto actor = alerts.observe(scrape(true, true));
  ASSERT_EQ(actor.size(), 1u);
  EXPECT_EQ(actor[0].kind, "stuck_actor");
  EXPECT_TRUE(alerts.observe(scrape(false, false)).empty());
  EXPECT_EQ(alerts.observe(scrape(true, false)).size(), 1u);  // stuck again
}

TEST(StuckAlerts, AReportIsAWarningEventWithNodeAndActor) {
  stuck_alerts alerts;
  event_log events;
  std::vector<nlohmann::json> seen;
  events.add_listener([&](const nlohmann::json& e) { seen.push_back(e); });
  alerts.report(scrape(true, false), events);
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0]["event"], "alert");
  EXPECT_EQ(seen[0]["node"], "w1");
  EXPECT_EQ(seen[0]["actor"], "trainer/0/dp_group");
}

}  // namespace
}  // namespace troupe::run

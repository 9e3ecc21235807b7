#include "runtime/run/row_alerts.hpp"

#include <gtest/gtest.h>

namespace troupe::run {
namespace {

TEST(RowAlerts, ALossThatIsNotANumberWarnsOnce) {
  row_alerts alerts;
  EXPECT_TRUE(alerts.observe({{"step", 1}, {"loss", 2.5}}, "step 1").empty());
  const auto first = alerts.observe({{"step", 2}, {"loss", nullptr}}, "step 2");
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0].kind, "not_a_number");
  EXPECT_NE(first[0].message.find("loss is not a number at step 2"), std::string::npos);
  EXPECT_TRUE(alerts.observe({{"loss", nullptr}}, "step 3").empty());
  EXPECT_EQ(alerts.observe({{"actor/pg_loss", NAN}}, "step 4").size(), 1u);
}

TEST(RowAlerts, ThroughputBelowHalfItsMedianWarnsOnce) {
  row_alerts alerts(4);
  for (double v : {100.0, 110.0, 90.0, 105.0, 100.0, 95.0, 20.0, 100.0})
    EXPECT_TRUE(alerts.observe({{"tokens_per_s", v}}, "step").empty());  // one slow row: no drop
  EXPECT_TRUE(alerts.observe({{"tokens_per_s", 40.0}}, "step 9").empty());
  const auto drop = alerts.observe({{"tokens_per_s", 40.0}}, "step 10");  // 3 of the last 5
  ASSERT_EQ(drop.size(), 1u);
  EXPECT_EQ(drop[0].kind, "throughput_drop");
  EXPECT_NE(drop[0].message.find("tokens_per_s fell to 40 (the median of the last 5 rows) at "
                                 "step 10, below half its median before (100)"),
            std::string::npos)
      << drop[0].message;
  EXPECT_TRUE(alerts.observe({{"tokens_per_s", 10.0}}, "step 11").empty());
}

TEST(RowAlerts, EntropyAndResponseLengthCollapseWarn) {
  row_alerts alerts(3);
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(
        alerts.observe({{"actor/entropy", 2.0}, {"response_length/mean", 12.0}}, "step").empty());
  }
  for (int i = 0; i < 4; ++i) {  // lower, and then collapsed in 4 of the last 5: not yet 3 before
    EXPECT_TRUE(
        alerts
            .observe({{"actor/entropy", i == 0 ? 0.5 : 0.01}, {"response_length/mean", 1.0}},
                     "step")
            .empty());
  }
  const auto collapsed =
      alerts.observe({{"actor/entropy", 0.01}, {"response_length/mean", 1.0}}, "step 8");
  ASSERT_EQ(collapsed.size(), 2u);
  EXPECT_EQ(collapsed[0].kind, "collapse");
  EXPECT_EQ(collapsed[0].field, "actor/entropy");
  EXPECT_EQ(collapsed[1].field, "response_length/mean");
}

TEST(RowAlerts, AReportIsAWarningEventNamingTheStep) {
  row_alerts alerts;
  event_log events;
  std::vector<nlohmann::json> seen;
  events.add_listener([&](const nlohmann::json& e) { seen.push_back(e); });
  alerts.report({{"step", 7}, {"loss", NAN}}, events);
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0]["event"], "alert");
  EXPECT_EQ(seen[0]["severity"], "warning");
  EXPECT_EQ(seen[0]["kind"], "not_a_number");
  EXPECT_NE(seen[0]["message"].get<std::string>().find("at step 7"), std::string::npos);
}

}  // namespace
}  // namespace troupe::run

#include "runtime/metrics/row_gauges.hpp"

#include <gtest/gtest.h>

namespace troupe::metrics {
namespace {

TEST(RowGauges, NamesFollowPrometheusRules) {
  EXPECT_EQ(row_gauge_name("troupe_rl_", "critic/score/mean"), "troupe_rl_critic_score_mean");
  EXPECT_EQ(row_gauge_name("troupe_train_", "tokens_per_s"), "troupe_train_tokens_per_second");
  EXPECT_EQ(row_gauge_name("troupe_rl_", "timing_s/gen"), "troupe_rl_timing_seconds_gen");
  EXPECT_EQ(row_gauge_name("troupe_train_", "stepTime_ms"), "troupe_train_steptime_milliseconds");
  EXPECT_EQ(row_gauge_name("troupe_train_", "loss"), "troupe_train_loss");
}

TEST(RowGauges, EveryNumericFieldOfARowIsAGauge) {
  registry r;
  set_row_gauges(r, "troupe_train_",
                 {{"step", 3}, {"loss", 2.5}, {"note", "text"}, {"ok", true}, {"list", {1, 2}}});
  EXPECT_EQ(r.get_gauge("troupe_train_step", "").value(), 3);
  EXPECT_EQ(r.get_gauge("troupe_train_loss", "").value(), 2.5);
  const std::string text = r.prometheus_text();
  EXPECT_EQ(text.find("troupe_train_note"), std::string::npos);
  EXPECT_EQ(text.find("troupe_train_ok"), std::string::npos);
  EXPECT_EQ(text.find("troupe_train_list"), std::string::npos);
}

}  // namespace
}  // namespace troupe::metrics

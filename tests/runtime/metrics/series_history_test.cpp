#include "runtime/metrics/series_history.hpp"

#include <gtest/gtest.h>

#include "runtime/metrics/registry.hpp"

namespace troupe::metrics {
namespace {

TEST(SeriesHistory, KeepsTheLastPointsOfEverySeriesOfAFamily) {
  series_history history(3);
  registry r;
  auto& loss = r.get_gauge("loss", "Loss.", {{"node", "w1"}});
  r.get_histogram("wait_seconds", "Waits.", {1}).observe(0.5);
  for (int t = 0; t < 5; ++t) {
    loss.set(10 - t);
    history.record(t, r.prometheus_text());
  }
  const nlohmann::json h = history.of("loss");
  ASSERT_EQ(h["series"].size(), 1u);
  EXPECT_EQ(h["series"][0]["labels"]["node"], "w1");
  EXPECT_EQ(h["series"][0]["points"], nlohmann::json::parse("[[2, 8], [3, 7], [4, 6]]"));
  EXPECT_EQ(history.of("loss", 2)["series"][0]["points"],
            nlohmann::json::parse("[[3, 7], [4, 6]]"));
  // A histogram's sum and count are kept under its family, its buckets are not.
  const nlohmann::json waits = history.of("wait_seconds");
  ASSERT_EQ(waits["series"].size(), 2u);
  EXPECT_EQ(history.of("wait_seconds_bucket")["series"].size(), 0u);
  EXPECT_EQ(history.of("wait_seconds_count")["series"].size(), 1u);
  EXPECT_EQ(history.families(), (std::vector<std::string>{"loss", "wait_seconds"}));
}

TEST(SeriesHistory, ASeriesGoneForAWholeWindowIsForgotten) {
  series_history history(2);
  history.record(0, "gone 1\nstays 1\n");
  history.record(1, "stays 2\n");
  EXPECT_EQ(history.of("gone")["series"].size(), 1u);
  history.record(2, "stays 3\n");
  EXPECT_EQ(history.of("gone")["series"].size(), 0u);
  EXPECT_EQ(history.of("stays")["series"][0]["points"].size(), 2u);
}

TEST(SeriesHistory, SeriesBeyondTheLimitAreRefusedAndCounted) {
  series_history history(10, 2);
  history.record(0, "a 1\nb 1\nc 1\n");
  history.record(1, "a 2\nb 2\nc 2\n");
  EXPECT_EQ(history.of("a")["series"][0]["points"].size(), 2u);
  EXPECT_EQ(history.of("b")["series"][0]["points"].size(), 2u);
  EXPECT_EQ(history.of("c")["series"].size(), 0u);
  EXPECT_EQ(history.refused(), 2u);
}

TEST(SeriesHistory, NotANumberIsNull) {
  series_history history;
  history.record(0, "x NaN\n");
  EXPECT_TRUE(history.of("x")["series"][0]["points"][0][1].is_null());
}

}  // namespace
}  // namespace troupe::metrics

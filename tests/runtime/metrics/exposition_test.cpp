#include "runtime/metrics/exposition.hpp"

#include <cmath>

#include <gtest/gtest.h>

namespace troupe::metrics {
namespace {

TEST(MergeExpositions, EachFamilyOnceWithEverySourcesSeriesLabelledBySource) {
  registry a;
  registry b;
  a.get_counter("jobs_total", "Jobs run.").inc(3);
  b.get_counter("jobs_total", "Jobs run.").inc(5);
  b.get_gauge("queue_depth", "Queued.", {{"queue", "x"}}).set(2);
  a.get_histogram("wait_seconds", "Waits.", {0.1, 1}).observe(0.5);
  b.get_histogram("wait_seconds", "Waits.", {0.1, 1}).observe(2);
  const merged_exposition merged = merge_expositions({
      {{{"node", "head"}, {"role", "head"}}, a.prometheus_text()},
      {{{"node", "w1"}, {"role", "worker"}}, b.prometheus_text()},
  });
  EXPECT_EQ(merged.dropped_lines, 0u);
  const std::string& t = merged.text;
  EXPECT_NE(t.find("# HELP jobs_total Jobs run.\n# TYPE jobs_total counter\n"
                   "jobs_total{node=\"head\",role=\"head\"} 3\n"
                   "jobs_total{node=\"w1\",role=\"worker\"} 5\n"),
            std::string::npos)
      << t;
  EXPECT_NE(t.find("queue_depth{node=\"w1\",role=\"worker\",queue=\"x\"} 2\n"), std::string::npos);
  EXPECT_NE(t.find("wait_seconds_bucket{node=\"head\",role=\"head\",le=\"1\"} 1\n"),
            std::string::npos);
  EXPECT_NE(t.find("wait_seconds_count{node=\"w1\",role=\"worker\"} 1\n"), std::string::npos);
  for (const char* family : {"jobs_total", "queue_depth", "wait_seconds"}) {
    const std::string type = std::string("# TYPE ") + family + " ";
    const size_t first = t.find(type);
    ASSERT_NE(first, std::string::npos) << family;
    EXPECT_EQ(t.find(type, first + 1), std::string::npos) << family << " typed twice:\n" << t;
  }
  // The histogram's series all follow its one TYPE line, none is a family of its own.
  EXPECT_EQ(t.find("# TYPE wait_seconds_bucket"), std::string::npos);
}

TEST(MergeExpositions, ASeriesWithAnIdentityLabelKeepsItAsExported) {
  const merged_exposition merged = merge_expositions(
      {{{{"node", "head"}}, "# TYPE member_up gauge\nmember_up{node=\"w2\"} 1\n"}});
  EXPECT_EQ(merged.text,
            "# TYPE member_up gauge\nmember_up{node=\"head\",exported_node=\"w2\"} 1\n");
}

TEST(MergeExpositions, MalformedLinesFromAPeerAreDroppedAndCounted) {
  const merged_exposition merged = merge_expositions({{{{"node", "w1"}},
                                                       "# TYPE ok counter\n"
                                                       "ok 1\n"
                                                       "ok{a=\"unterminated} 2\n"
                                                       "{no_name=\"x\"} 3\n"
                                                       "bad value\n"
                                                       "9starts_with_digit 1\n"
                                                       "# TYPE weird nonsense\n"
                                                       "escaped{path=\"a\\\"b\\\\c\"} 4\n"}});
  EXPECT_EQ(merged.dropped_lines, 5u);
  EXPECT_NE(merged.text.find("ok{node=\"w1\"} 1\n"), std::string::npos);
  EXPECT_NE(merged.text.find("escaped{node=\"w1\",path=\"a\\\"b\\\\c\"} 4\n"), std::string::npos);
  EXPECT_EQ(merged.text.find("unterminated"), std::string::npos);
}

TEST(ParseSamples, GivesEachSampleItsFamilySeriesAndValue) {
  registry r;
  r.get_histogram("wait_seconds", "Waits.", {1}).observe(0.5);
  r.get_gauge("g", "A gauge.", {{"k", "v"}}).set(-2.5);
  const auto samples = parse_samples(r.prometheus_text() + "nan_one NaN\ninf_one +Inf 123\n");
  ASSERT_EQ(samples.size(), 7u);
  EXPECT_EQ(samples[0].family, "g");
  EXPECT_EQ(samples[0].series, "g{k=\"v\"}");
  EXPECT_EQ(samples[0].value, -2.5);
  EXPECT_EQ(samples[1].family, "wait_seconds");
  EXPECT_EQ(samples[1].name, "wait_seconds_bucket");
  EXPECT_EQ(samples[3].name, "wait_seconds_sum");
  EXPECT_EQ(samples[3].value, 0.5);
  EXPECT_EQ(samples[4].family, "wait_seconds");
  EXPECT_TRUE(std::isnan(samples[5].value));
  EXPECT_EQ(samples[5].family, "nan_one");
  EXPECT_EQ(samples[6].value, HUGE_VAL);
}

}  // namespace
}  // namespace troupe::metrics

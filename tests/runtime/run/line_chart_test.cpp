#include "runtime/run/line_chart.hpp"

#include <cmath>

#include <gtest/gtest.h>

namespace troupe::run {
namespace {

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1))
    ++n;
  return n;
}

TEST(LineChart, DrawsEverySeriesWithAxesAndLegend) {
  chart_series train{"train", {}}, val{"held-out <val>", {}};
  for (int step = 1; step <= 600; ++step)
    train.points.push_back({step, 5.5 * std::exp(-step / 200.0) + 2});
  val.points = {{100, 3.1}, {300, 2.6}, {600, std::nan("")}};
  auto svg = line_charts_svg({{"tiny GPT on fortunes", "loss (nats per token)", {train, val}}});
  ASSERT_TRUE(svg.ok()) << svg.status();
  EXPECT_EQ(svg->rfind("<svg", 0), 0u);
  EXPECT_NE(svg->find("</svg>"), std::string::npos);
  EXPECT_EQ(count(*svg, "<polyline"), 2u);
  EXPECT_NE(svg->find("held-out &lt;val&gt;"), std::string::npos);  // labels are escaped
  EXPECT_NE(svg->find(">600<"), std::string::npos);                 // an x tick at the end
  EXPECT_EQ(svg->find("nan"), std::string::npos);                   // non-finite left out
  // The train curve has every point; the val curve its two finite ones.
  const size_t first = svg->find("points=\""), second = svg->find("points=\"", first + 1);
  const std::string train_points = svg->substr(first, svg->find('"', first + 8) - first);
  const std::string val_points = svg->substr(second, svg->find('"', second + 8) - second);
  EXPECT_EQ(count(train_points, ","), 600u);
  EXPECT_EQ(count(val_points, ","), 2u);
}

TEST(LineChart, NothingToDrawIsAnError) {
  EXPECT_FALSE(line_charts_svg({}).ok());
  EXPECT_FALSE(line_charts_svg({{"empty", "y", {}}}).ok());
  EXPECT_FALSE(line_charts_svg({{"nan", "y", {{"x", {{1, std::nan("")}}}}}}).ok());
  EXPECT_TRUE(line_charts_svg({{"one point", "y", {{"one", {{5, 2.0}}}}}}).ok());
}

// Charts stack top to bottom in one document, each with its own axis label.
TEST(LineChart, ChartsStackInOneDocument) {
  auto svg = line_charts_svg({{"score", "score", {{"mean", {{1, 0.1}, {2, 0.4}}}}},
                              {"KL", "nats", {{"kl", {{1, 0.0}, {2, 0.02}}}}}});
  ASSERT_TRUE(svg.ok()) << svg.status();
  EXPECT_EQ(count(*svg, "<svg"), 1u);
  EXPECT_EQ(count(*svg, "<polyline"), 2u);
  EXPECT_NE(svg->find("translate(0 420)"), std::string::npos);
  EXPECT_NE(svg->find(">nats<"), std::string::npos);
}

}  // namespace
}  // namespace troupe::run

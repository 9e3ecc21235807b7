#include "apps/cli/top_view.hpp"

#include <algorithm>
#include <functional>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"

namespace troupe::cli {
namespace {

// An /api/series answer with one series per (node, actor), each with `points`.
nlohmann::json series_of(int nodes, int actors_per_node,
                         const std::function<nlohmann::json(int node, int actor)>& points) {
  nlohmann::json out = {{"series", nlohmann::json::array()}};
  for (int n = 0; n < nodes; ++n) {
    for (int a = 0; a < actors_per_node; ++a) {
      out["series"].push_back({{"labels",
                                {{"node", absl::StrCat("w", n + 1)},
                                 {"role", "worker"},
                                 {"actor", absl::StrCat("trainer/", a)}}},
                               {"points", points(n, a)}});
    }
  }
  return out;
}

TEST(TopView, TheBusiestActorsFirstAndTheStuckOnesBeforeThem) {
  const auto messages = series_of(2, 2, [](int n, int a) {
    const double rate = n * 10 + a;  // w2/trainer/1 busiest
    return nlohmann::json::array({{0.0, 0.0}, {5.0, 5 * rate}});
  });
  const auto zeros = series_of(2, 2, [](int, int) { return nlohmann::json::array({{5.0, 0.0}}); });
  const auto stuck = series_of(2, 2, [](int n, int a) {
    return nlohmann::json::array({{5.0, n == 0 && a == 0 ? 1.0 : 0.0}});
  });
  const auto rows = top_actor_rows(messages, zeros, zeros, stuck);
  ASSERT_EQ(rows.size(), 4u);
  EXPECT_EQ(rows[0].node, "w1");
  EXPECT_TRUE(rows[0].stuck);
  EXPECT_EQ(rows[1].node, "w2");
  EXPECT_EQ(rows[1].actor, "trainer/1");
  EXPECT_DOUBLE_EQ(rows[1].per_second, 11);
  const std::string text =
      render_top({.status = {{"epoch", 4}, {"members", nlohmann::json::array()}},
                  .actors = rows,
                  .figures = {{"troupe_train_loss", 2.5}}});
  EXPECT_NE(text.find("STUCK"), std::string::npos) << text;
  EXPECT_NE(text.find("troupe_train_loss"), std::string::npos) << text;
}

// 64 nodes with 16 actors each (1,024), a minute of samples each: what a big job's top reads
// every second. Its size is bounded by the rows shown, whatever the actors.
TEST(TopView, AJobOf64NodesAnd1024ActorsFitsOnAScreen) {
  const auto minute = [](int n, int a) {
    nlohmann::json points = nlohmann::json::array();
    for (int t = 0; t < 60; ++t)
      points.push_back({t, t * (n + a)});
    return points;
  };
  nlohmann::json status = {{"epoch", 65}, {"members", nlohmann::json::array()}};
  for (int n = 0; n < 64; ++n) {
    status["members"].push_back({{"node", absl::StrCat("w", n + 1)},
                                 {"state", "alive"},
                                 {"heartbeat_age_ms", 100},
                                 {"actors", {"trainer/0"}}});
  }
  const auto messages = series_of(64, 16, minute);
  const auto zeros = series_of(64, 16, [](int, int) { return nlohmann::json::array({{59, 0}}); });
  const auto rows = top_actor_rows(messages, zeros, zeros, zeros);
  ASSERT_EQ(rows.size(), 1024u);
  EXPECT_EQ(rows[0].node, "w64");
  const std::string text = render_top({.status = status, .actors = rows}, 20);
  EXPECT_NE(text.find("... and 1004 more"), std::string::npos);
  EXPECT_LT(std::count(text.begin(), text.end(), '\n'), 64 + 20 + 12);
}

}  // namespace
}  // namespace troupe::cli

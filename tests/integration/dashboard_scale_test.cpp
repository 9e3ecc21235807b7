// The dashboard of a big job: 64 workers with 16 actors each (1,024) and a minute of history,
// served by the head's HTTP endpoints from a synthetic view and loaded in headless chromium.
// The page must show every member and every actor; how long it took to draw is recorded
// (render_ms), not judged: speeds belong in benchmarks.

#include <regex>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "runtime/cluster/head_http.hpp"
#include "runtime/metrics/registry.hpp"
#include "tests/support/headless_chromium.hpp"

namespace troupe::testing {
namespace {

using namespace std::chrono_literals;

constexpr int nodes = 64;
constexpr int actors_per_node = 16;

TEST(DashboardScale, SixtyFourNodesAndAThousandActorsAreAllShown) {
  nlohmann::json status = {{"epoch", nodes + 1},
                           {"job", nlohmann::json::object()},
                           {"kv_keys", 0},
                           {"failure_timeout_ms", 2000},
                           {"members", nlohmann::json::array()}};
  status["members"].push_back({{"node", "head"}, {"state", "alive"}, {"head", true}});
  std::vector<metrics::registry> workers(nodes);
  for (int n = 0; n < nodes; ++n) {
    nlohmann::json actors = nlohmann::json::array();
    for (int a = 0; a < actors_per_node; ++a) {
      const std::string name = absl::StrCat("trainer/", n * actors_per_node + a);
      workers[n].actor(name);
      actors.push_back(name);
    }
    status["members"].push_back({{"node", absl::StrCat("w", n + 1)},
                                 {"state", "alive"},
                                 {"head", false},
                                 {"heartbeat_age_ms", 120},
                                 {"host", "gpu-7"},
                                 {"pid", 1000 + n},
                                 {"resources", {{"cores", 64}, {"gpus", 8}}},
                                 {"actors", actors}});
  }
  metrics::registry head_metrics;
  auto& loss = head_metrics.get_gauge("troupe_train_loss", "Loss.");
  cluster::head_view view(head_metrics);
  metrics::series_history history;
  for (int t = 0; t < 60; ++t) {  // a minute, every actor handling a message a second
    loss.set(5.0 - t * 0.05);
    std::vector<cluster::head_view::metrics_text> texts;
    for (int n = 0; n < nodes; ++n) {
      for (int a = 0; a < actors_per_node; ++a)
        workers[n].actor(absl::StrCat("trainer/", n * actors_per_node + a))->record(1000 * (a + 1));
      texts.emplace_back(absl::StrCat("w", n + 1),
                         std::make_shared<const std::string>(workers[n].prometheus_text()));
    }
    const auto status_bytes = nlohmann::json::to_msgpack(status);
    view.publish(std::string(status_bytes.begin(), status_bytes.end()), std::move(texts));
    history.record(t, view.metrics().text);
  }
  run::event_log events;
  events.emit(run::severity::info, "cluster_ready", "64 workers joined");
  auto http = cluster::head_http::start({}, view, history, events);
  ASSERT_TRUE(http.ok()) << http.status();

  const process_result dom = headless_chromium((*http)->url() + "/?once", "--dump-dom");
  expect_dashboard(dom, {"<td>w64</td>", "<td>trainer/1023</td>"}, /*min_charts=*/1);
  size_t rows = 0;
  for (size_t at = dom.out.find("<tr"); at != std::string::npos; at = dom.out.find("<tr", at + 1))
    ++rows;
  EXPECT_EQ(rows, 2 + (nodes + 1) + nodes * actors_per_node)  // headers, members, actors
      << "every member and actor, each once";
  std::smatch m;
  if (std::regex_search(dom.out, m, std::regex("data-render-ms=\"([0-9]+)\""))) {
    RecordProperty("render_ms", m[1].str());
  }
}

}  // namespace
}  // namespace troupe::testing

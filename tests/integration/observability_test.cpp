// The head's HTTP endpoints on a real cluster: a pretraining job on two local workers, held at a
// step while the test scrapes /metrics (every node's series, checked by promtool), reads
// /api/status, /api/series and /api/events, and is refused without the bearer token.

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>

#include <gtest/gtest.h>
#include <signal.h>

#include "httplib.h"
#include "tests/integration/cluster_harness.hpp"
#include "tests/support/headless_chromium.hpp"

namespace troupe::testing {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

constexpr char http_token[] = "dashboard-secret";

class ObservabilityTest : public cluster_harness {
 protected:
  // Two trainers (dp=2) on two local workers, 6 steps; `more` adds top-level sections.
  std::string config(const std::string& more = "") {
    std::string text;
    for (int i = 0; i < 2000; ++i)
      text += "the quick brown fox " + std::to_string(i % 89) + " jumps over the lazy dog\n";
    return dir_.write("observed.yaml",
                      "app: pretrain\n"
                      "model: {vocab: 256, ctx: 32, layers: 2, dim: 32, heads: 2}\n"
                      "roles: {trainer: {kind: trainer, impl: gpt, count: 2}}\n"
                      "cluster: {local_workers: 2, http_token: " +
                          std::string(http_token) +
                          "}\n"
                          "pretrain:\n"
                          "  train: {steps: 6, batch: 4, lr: 3.0e-3, warmup: 1, seed: 7}\n"
                          "  data: {path: " +
                          dir_.write("corpus.txt", text) +
                          ", eval_every: 0, eval_windows: 8}\n"
                          "  parallel: {dp: 2, zero: 1}\n" +
                          more);
  }

  // The head's HTTP URL, as the run directory records it.
  std::string head_url() const {
    std::string url;
    EXPECT_TRUE(wait_until([&] {
      std::ifstream in(run_dir() + "/head_http_url");
      return static_cast<bool>(std::getline(in, url)) && !url.empty();
    })) << "no head_http_url in the run directory";
    return url;
  }

  // A client of the head's HTTP endpoints that sends the token.
  static std::unique_ptr<httplib::Client> client(const std::string& url) {
    auto c = std::make_unique<httplib::Client>(url);
    c->set_bearer_token_auth(http_token);
    c->set_read_timeout(10, 0);
    return c;
  }

  // GET `path`: the body of a 200, or "" (the failure recorded).
  static std::string get(httplib::Client& c, const std::string& path) {
    auto r = c.Get(path);
    EXPECT_TRUE(r) << path << ": " << httplib::to_string(r.error());
    if (!r) return "";
    EXPECT_EQ(r->status, 200) << path << ": " << r->body;
    return r->status == 200 ? r->body : "";
  }
};

TEST_F(ObservabilityTest, TheHeadServesEveryNodesMetricsStatusSeriesAndEvents) {
  hold_.hold(2);
  start_head(config());
  const std::string url = head_url();
  auto http = client(url);
  // Both workers' trainers report through their heartbeats, next to the head's own series.
  std::string metrics;
  const auto has_trainer_of = [&](const std::string& node) {
    return std::regex_search(metrics,
                             std::regex("troupe_actor_messages_total\\{node=\"" + node +
                                        "\",role=\"worker\",actor=\"trainer/[01]\"\\} [1-9]"));
  };
  ASSERT_TRUE(wait_until([&] {
    metrics = get(*http, "/metrics");
    return has_trainer_of("w1") && has_trainer_of("w2") &&
           metrics.find("troupe_train_loss{node=\"head\",role=\"head\"}") != std::string::npos;
  })) << metrics;
  EXPECT_EQ(metrics.find("# TYPE troupe_actor_messages_total counter\n"),
            metrics.rfind("# TYPE troupe_actor_messages_total counter\n"))
      << "one TYPE line per family";
  // promtool (Debian's prometheus, scripts/setup.sh) checks the exposition as Prometheus would.
  const std::string scraped = dir_.write("metrics.txt", metrics);
  const process_result check = run({"/bin/sh", "-c", "promtool check metrics < " + scraped}, 30s);
  EXPECT_EQ(check.exit_code, 0) << "promtool check metrics:\n" << check.out << check.err;
  EXPECT_EQ(check.err.find("error"), std::string::npos) << check.err;

  const auto status = nlohmann::json::parse(get(*http, "/api/status"), nullptr, false);
  ASSERT_TRUE(status.is_object());
  EXPECT_EQ(status["members"].size(), 3u) << status.dump();  // the head and two workers

  // The history is sampled every second: the loss is there at the next sample.
  nlohmann::json loss;
  ASSERT_TRUE(wait_until([&] {
    loss = nlohmann::json::parse(get(*http, "/api/series?name=troupe_train_loss"));
    return !loss["series"].empty();
  })) << loss.dump();
  ASSERT_EQ(loss["series"].size(), 1u) << loss.dump();
  EXPECT_FALSE(loss["series"][0]["points"].empty());
  auto r = http->Get("/api/series");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);

  const std::string events = get(*http, "/api/events?follow=0");
  EXPECT_NE(events.find("\"event\":\"cluster_ready\""), std::string::npos) << events;
  EXPECT_NE(events.find("id: 1\ndata: {"), std::string::npos) << events;

  // troupe top --once, as a user on SSH would run it, with the run directory to find the head,
  // once the history it reads (sampled every second) has the trainers.
  ASSERT_TRUE(wait_until([&] {
    const std::string s = get(*http, "/api/series?name=troupe_actor_messages_total");
    return s.find("\"trainer/0\"") != std::string::npos &&
           s.find("\"trainer/1\"") != std::string::npos;
  }));
  const process_result top = troupe({"top", run_dir(), "--once", "--token", http_token});
  EXPECT_EQ(top.exit_code, 0) << top.err;
  for (const char* shown : {"w1", "w2", "head", "trainer/0", "trainer/1", "troupe_train_loss"}) {
    EXPECT_NE(top.out.find(shown), std::string::npos) << shown << " missing:\n" << top.out;
  }
  EXPECT_EQ(top.out.find("\x1b["), std::string::npos) << "no terminal codes in a pipe";
  const process_result refused = troupe({"top", run_dir(), "--once"});
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_NE(refused.err.find("wants its bearer token"), std::string::npos) << refused.err;

  httplib::Client anonymous(url);
  r = anonymous.Get("/metrics");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 401);

  hold_.release();
  const process_result done = head_->wait(120s);
  EXPECT_EQ(done.exit_code, 0) << done.err;
}

// A rank frozen mid-run (SIGSTOP) stops its group: the other rank's data-parallel group shows
// stuck in /metrics within health.stuck_after_s, long before the heartbeat timeout (here 30 s)
// declares the frozen worker dead. Thawed, the job finishes.
TEST_F(ObservabilityTest, AFrozenRankShowsItsGroupStuckBeforeItIsDeclaredDead) {
  hold_.hold(2);
  start_head(config("health: {stuck_after_s: 1}\n"), {"--set", "cluster.heartbeat_misses=60"});
  const std::string url = head_url();
  auto http = client(url);
  ASSERT_TRUE(wait_until([&] {
    return get(*http, "/metrics").find("actor=\"trainer/1/dp_group\"") != std::string::npos;
  }));
  int64_t frozen_pid = 0;
  const auto members = nlohmann::json::parse(get(*http, "/api/status"))["members"];
  for (const auto& m : members) {
    if (m["node"] == "w2") frozen_pid = m.value("pid", int64_t{0});
  }
  ASSERT_GT(frozen_pid, 0) << members.dump();
  ASSERT_EQ(::kill(static_cast<pid_t>(frozen_pid), SIGSTOP), 0);
  hold_.release();
  std::string metrics;
  const std::regex stuck(
      "troupe_actor_stuck\\{node=\"w1\",role=\"worker\",actor=\"trainer/[01]/dp_group\"\\} 1");
  const bool seen = wait_until([&] {
    metrics = get(*http, "/metrics");
    return std::regex_search(metrics, stuck);
  });
  const auto status = nlohmann::json::parse(get(*http, "/api/status"));
  // The head warns of it once, in the event log (and so on the terminal and in troupe.log).
  const bool warned = wait_until([&] {
    for (const auto& e : events_of(run_dir(), "alert"))
      if (e["kind"] == "stuck_collective" && e["node"] == "w1") return true;
    return false;
  });
  ::kill(static_cast<pid_t>(frozen_pid), SIGCONT);
  ASSERT_TRUE(seen) << metrics;
  EXPECT_TRUE(warned) << "no stuck_collective alert for w1";
  for (const auto& m : status["members"]) {
    EXPECT_EQ(m["state"], "alive") << m.dump();  // not yet declared dead
  }
  const process_result done = head_->wait(120s);
  EXPECT_EQ(done.exit_code, 0) << done.err;
}

// The dashboard in a real browser (Debian's chromium, headless, loopback only) on the held job:
// members, actors and curves with points, no console error; a screenshot in
// build/test-output/dashboard.png.
TEST_F(ObservabilityTest, TheDashboardShowsMembersActorsAndCurvesInABrowser) {
  hold_.hold(3);
  start_head(config());
  const std::string url = head_url();
  auto http = client(url);
  ASSERT_TRUE(wait_until([&] {  // two points of the loss curve, and the trainers in the history
    const auto loss = nlohmann::json::parse(get(*http, "/api/series?name=troupe_train_loss"));
    const std::string actors = get(*http, "/api/series?points=1&name=troupe_actor_messages_total");
    return !loss["series"].empty() && loss["series"][0]["points"].size() >= 2 &&
           actors.find("\"trainer/1\"") != std::string::npos;
  }));
  const fs::path out = fs::path(TROUPE_BINARY).parent_path() / "test-output";
  fs::create_directories(out);
  const std::string page = url + "/?once&access_token=" + http_token;
  const process_result dom = headless_chromium(page, "--dump-dom");
  expect_dashboard(dom,
                   {"<td>w1</td>", "<td>w2</td>", "<td>head</td>", "<td>trainer/0</td>",
                    "<td>trainer/1/dp_group</td>", "troupe_train_loss", "cluster_ready"},
                   /*min_charts=*/2);  // the loss and tokens/s
  const process_result shot =
      headless_chromium(page, "--screenshot=" + (out / "dashboard.png").string());
  EXPECT_EQ(shot.exit_code, 0) << shot.err;
  EXPECT_TRUE(fs::exists(out / "dashboard.png"));
  hold_.release();
  const process_result done = head_->wait(120s);
  EXPECT_EQ(done.exit_code, 0) << done.err;
}

}  // namespace
}  // namespace troupe::testing

// A job over three hosts: network namespaces on one bridge, each with its own 10.x address
// (tests/support/network_namespaces). The head runs in the first, a worker in each other, and
// every address they use is their host's: none of this works if a part binds 127.0.0.1 or
// assumes one hostname. Skipped without CAP_NET_ADMIN.

#include <csignal>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "tests/integration/troupe_cli.hpp"
#include "tests/support/network_namespaces.hpp"

namespace troupe::testing {
namespace {

constexpr const char* token = "TROUPE_CLUSTER_TOKEN=netns-test-token";

class NetnsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto hosts = network_namespaces::create(3);
    if (!hosts.ok()) GTEST_SKIP() << hosts.status();
    hosts_ = std::move(*hosts);
  }

  std::string head_endpoint() const { return "tcp://" + hosts_->address(0) + ":7070"; }

  // `troupe head` of `config` (with `sets`) in host 0, and a worker in each other host.
  void start(const std::string& config, std::vector<std::string> sets) {
    std::vector<std::string> head = {TROUPE_BINARY, "head", "--listen",  head_endpoint(),
                                     "--config",    config, "--run-dir", run_dir()};
    for (auto& s : sets)
      head.insert(head.end(), {"--set", std::move(s)});
    head_ = std::make_unique<subprocess>(hosts_->on(0, head), std::vector<std::string>{token});
    for (int i = 1; i <= 2; ++i) {
      workers_.push_back(std::make_unique<subprocess>(
          hosts_->on(i, {TROUPE_BINARY, "worker", "--join", head_endpoint(), "--bind",
                         hosts_->address(i)}),
          std::vector<std::string>{token}));
    }
  }

  std::string run_dir() const { return dir_.file("run"); }

  // `troupe status` from host `from`, as JSON.
  nlohmann::json status_from(int from) const {
    auto r = run(hosts_->on(from, {TROUPE_BINARY, "status", "--head", head_endpoint(), "--json"}),
                 std::chrono::seconds(30), {token});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return nlohmann::json::parse(r.out, nullptr, false);
  }

  // A completion asked from inside host 0, where the server listens.
  process_result complete(const std::string& url) const {
    return run(
        hosts_->on(0, http_request_argv(url + "/v1/completions",
                                        R"({"model":"troupe-tiny","prompt":"Hi","max_tokens":4})")),
        std::chrono::seconds(90));
  }

  std::unique_ptr<network_namespaces> hosts_;
  temp_dir dir_;
  std::unique_ptr<subprocess> head_;
  std::vector<std::unique_ptr<subprocess>> workers_;
};

TEST_F(NetnsTest, PretrainingAtDpTwoAcrossHosts) {
  const std::string config =
      dir_.write("pretrain.yaml",
                 "app: pretrain\n"
                 "cluster: {min_workers: 2}\n"
                 "model: {vocab: 256, ctx: 32, layers: 2, dim: 32, heads: 2}\n"
                 "roles: {trainer: {kind: trainer, impl: gpt, count: 2}}\n"
                 "pretrain:\n"
                 "  train: {steps: 10, batch: 8, warmup: 2}\n"
                 "  data: {eval_every: 5, eval_windows: 16}\n"
                 "  parallel: {dp: 2, zero: 1}\n");
  start(config, {});
  const process_result head = head_->wait(std::chrono::minutes(3));
  ASSERT_EQ(head.exit_code, 0) << head.err;
  const auto summary = summary_of(head);
  EXPECT_EQ(summary["status"], "succeeded") << head.out;
  EXPECT_EQ(summary["steps"], 10);
  for (auto& w : workers_) {
    const process_result r = w->wait(std::chrono::seconds(30));
    EXPECT_EQ(r.exit_code, 0) << r.err;
  }
  // A trainer on each worker's host: their Gloo group formed over the hosts' addresses (one on
  // 127.0.0.1 could not have).
  EXPECT_EQ(summary["world_size"], 2);
  EXPECT_EQ(events_of(run_dir(), "member_joined").size(), 2u);
}

TEST_F(NetnsTest, ServingAcrossHostsSurvivesAKilledWorkerAndStatusShowsEveryHost) {
  start(TROUPE_SOURCE_DIR "/configs/serve_tiny.yaml",
        {"cluster.local_workers=0", "cluster.min_workers=2", "roles.worker.elastic.min=2"});
  nlohmann::json serving = wait_for_event(run_dir(), "serving", std::chrono::minutes(2));
  ASSERT_FALSE(serving.is_null()) << head_->stderr_so_far();
  const std::string url = serving["url"];

  const nlohmann::json status = status_from(1);
  ASSERT_EQ(status["members"].size(), 3u) << status;
  for (const auto& m : status["members"]) {
    const std::string endpoint = m["endpoint"];
    EXPECT_FALSE(absl::StrContains(endpoint, "127.0.0.1")) << status;
  }
  auto first = complete(url);
  ASSERT_EQ(first.exit_code, 0) << first.err;
  EXPECT_TRUE(absl::StrContains(first.out, "\"choices\"")) << first.out;

  workers_[1]->signal(SIGKILL);
  ASSERT_FALSE(wait_for_event(run_dir(), "worker_lost", std::chrono::minutes(1)).is_null());
  auto after = complete(url);
  ASSERT_EQ(after.exit_code, 0) << after.err;
  EXPECT_TRUE(absl::StrContains(after.out, "\"choices\"")) << after.out;

  head_->signal(SIGINT);  // drains, then stops the cluster
  EXPECT_EQ(head_->wait(std::chrono::minutes(1)).exit_code, 0);
  EXPECT_EQ(workers_[0]->wait(std::chrono::seconds(30)).exit_code, 0);
}

// A partition: host 2's link goes down at the switch. Its worker misses its heartbeats and is
// declared dead, and serving goes on with host 1's. The partitioned worker, whose heartbeats go
// unanswered as long, counts the head as lost and exits: when the link comes back there is no
// zombie to rejoin (one that came back first would be refused: the head fenced it).
TEST_F(NetnsTest, APartitionedWorkerIsDeclaredDeadAndExitsWithoutRejoining) {
  start(TROUPE_SOURCE_DIR "/configs/serve_tiny.yaml",
        {"cluster.local_workers=0", "cluster.min_workers=2", "roles.worker.elastic.min=1"});
  nlohmann::json serving = wait_for_event(run_dir(), "serving", std::chrono::minutes(2));
  ASSERT_FALSE(serving.is_null()) << head_->stderr_so_far();

  ASSERT_TRUE(hosts_->set_link(2, false).ok());
  ASSERT_FALSE(wait_for_event(run_dir(), "member_dead", std::chrono::minutes(1)).is_null());
  auto during = complete(serving["url"]);
  ASSERT_EQ(during.exit_code, 0) << during.err;

  const process_result fenced = workers_[1]->wait(std::chrono::minutes(1));
  EXPECT_FALSE(fenced.timed_out) << "the partitioned worker did not exit";
  EXPECT_EQ(fenced.exit_code, 1);
  EXPECT_TRUE(absl::StrContains(fenced.err, "lost the head at " + head_endpoint())) << fenced.err;
  ASSERT_TRUE(hosts_->set_link(2, true).ok());
  const nlohmann::json status = status_from(2);  // reachable again
  int alive = 0;
  for (const auto& m : status["members"])
    alive += m["state"] == "alive";
  EXPECT_EQ(alive, 2) << status;  // the head and host 1's worker

  head_->signal(SIGINT);
  EXPECT_EQ(head_->wait(std::chrono::minutes(1)).exit_code, 0);
}

}  // namespace
}  // namespace troupe::testing

#pragma once

// A real cluster on loopback for integration tests: `troupe head` and `troupe worker` processes,
// as a user starts them, with the test plugins and the test hold.

#include <regex>
#include <thread>

#include <gtest/gtest.h>
#include <signal.h>

#include "tests/integration/troupe_cli.hpp"

namespace troupe::testing {

using namespace std::chrono_literals;

inline const std::string token = "integration-token";

class cluster_harness : public ::testing::Test {
 protected:
  using clock = std::chrono::steady_clock;

  // Every process gets the test plugins and the test hold: a test that needs the job running
  // at some point holds it (hold_.hold()) until it has done what it needed.
  std::vector<std::string> env() const {
    return {std::string("TROUPE_PLUGIN_PATH=") + TROUPE_TEST_PLUGIN_DIR, hold_.env()};
  }

  // `troupe head` serving the cluster on a port it picks, running `config` when given.
  void start_head(const std::string& config = "", std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {TROUPE_BINARY,       "head",    "--listen",
                                     "tcp://127.0.0.1:0", "--token", token};
    if (!config.empty()) {
      args.insert(args.end(), {"--config", config, "--run-dir", run_dir()});
    }
    args.insert(args.end(), extra.begin(), extra.end());
    head_ = std::make_unique<subprocess>(args, env());
    ASSERT_TRUE(head_->wait_for_stderr("join it with:", 20s)) << head_->wait(1s).err;
    std::smatch m;
    const std::string& err = head_->stderr_so_far();
    ASSERT_TRUE(std::regex_search(err, m, std::regex("listening on (tcp://[0-9.]+:[0-9]+)")))
        << err;
    endpoint_ = m[1];
  }

  // A worker joining with `worker_token`, and with `keys` (a CURVE keys directory) when set.
  subprocess& start_worker(const std::string& worker_token = token, const std::string& keys = "") {
    std::vector<std::string> args = {TROUPE_BINARY, "worker",  "--join",
                                     endpoint_,     "--token", worker_token};
    if (!keys.empty()) args.insert(args.end(), {"--keys", keys});
    workers_.push_back(std::make_unique<subprocess>(args, env()));
    return *workers_.back();
  }

  // `troupe status --json` (with `keys`, the CURVE keys directory, when set); an empty object
  // once the head is gone.
  nlohmann::json status() const {
    std::vector<std::string> args = {TROUPE_BINARY, "status", "--head", endpoint_,
                                     "--token",     token,    "--json"};
    if (!keys_.empty()) args.insert(args.end(), {"--keys", keys_});
    auto r = run(args, 10s);
    auto j = nlohmann::json::parse(r.out, nullptr, false);
    return j.is_object() ? j : nlohmann::json::object();
  }

  // The member record of `node`, or null.
  nlohmann::json member(const std::string& node) const {
    for (const auto& m : status().value("members", nlohmann::json::array())) {
      if (m["node"] == node) return m;
    }
    return nullptr;
  }

  // Waits (bounded) until the cluster has `n` live workers; returns their records.
  std::vector<nlohmann::json> live_workers(size_t n) const {
    std::vector<nlohmann::json> out;
    const auto deadline = clock::now() + 20s;
    while (clock::now() < deadline) {
      out.clear();
      for (const auto& m : status().value("members", nlohmann::json::array())) {
        if (!m["head"].get<bool>() && m["state"] == "alive") out.push_back(m);
      }
      if (out.size() >= n) return out;
      std::this_thread::sleep_for(50ms);
    }
    return out;
  }

  std::string run_dir() const { return dir_.file("run"); }

  // Waits up to `limit` for `node` to be reported dead; returns how long that took.
  clock::duration time_until_dead(const std::string& node, clock::duration limit) const {
    const auto start = clock::now();
    while (clock::now() - start < limit) {
      auto m = member(node);
      if (m.is_object() && m["state"] == "dead") return clock::now() - start;
      std::this_thread::sleep_for(50ms);
    }
    return clock::duration::max();
  }

  // `node`, silent since a moment ago, is declared dead for its missed heartbeats. How long that
  // takes is membership_test's (on a fake clock): timed here, it would take in the machine's load
  // and this test's own `troupe status` polls.
  void expect_declared_dead_by_its_heartbeats(const std::string& node) const {
    ASSERT_NE(time_until_dead(node, 30s), clock::duration::max()) << node << " is not dead";
    const nlohmann::json dead = wait_for_event(run_dir(), "member_dead", 10s);
    ASSERT_FALSE(dead.is_null());
    EXPECT_NE(dead.dump().find(node + " declared dead: no heartbeat for"), std::string::npos)
        << dead.dump();
  }

  temp_dir dir_;
  test_hold hold_{dir_};
  std::string endpoint_;
  std::string keys_;  // the cluster's CURVE keys directory, when it has one
  // A head stopped with Ctrl-C removes its cluster file (/tmp/troupe-UID/head-PORT.json); a
  // killed one would leave it behind. The destructors kill whatever is left.
  void TearDown() override {
    hold_.release();
    if (!head_) return;
    head_->signal(SIGINT);
    head_->wait(10s);
  }

  std::unique_ptr<subprocess> head_;
  std::vector<std::unique_ptr<subprocess>> workers_;
};

}  // namespace troupe::testing

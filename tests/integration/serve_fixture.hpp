#pragma once

// The serving tests' fixture: a real `troupe launch` of configs/serve_tiny.yaml (a small fresh
// model, local worker processes), its HTTP API, its /metrics, and the test hold that keeps
// requests running (docs/testing.md).

#include <cmath>
#include <csignal>
#include <future>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "httplib.h"
#include "tests/integration/troupe_cli.hpp"

namespace troupe::testing {

using namespace std::chrono_literals;

class ServeTest : public ::testing::Test {
 protected:
  // Starts the serve config (`config_`) with a small fresh model on two local workers (`workers`:
  // how many the job has once it serves), and waits until it serves (`https`: with serve.tls) on
  // the port it picked.
  void start(std::vector<std::string> extra = {}, int workers = 2, bool https = false) {
    https_ = https;
    std::vector<std::string> args = {
        TROUPE_BINARY,  "launch",  config_,
        "--run-dir",    run_dir(), "--set",
        "serve.port=0", "--set",   "model={vocab: 256, ctx: 64, layers: 2, dim: 32, heads: 4}"};
    args.insert(args.end(), extra.begin(), extra.end());
    job_ = std::make_unique<subprocess>(args, std::vector<std::string>{hold_.env()});
    const auto serving = wait_for_event(run_dir(), "serving");
    ASSERT_TRUE(serving.is_object()) << job_->wait(1s).err;
    port_ = serving["port"];
    ASSERT_TRUE(metric_reaches("troupe_serve_workers", workers, 30s)) << job_->wait(1s).err;
  }

  std::string run_dir() const { return dir_.file("run"); }

  httplib::Client client() const {
    httplib::Client c(absl::StrCat(https_ ? "https" : "http", "://127.0.0.1:", port_));
    c.enable_server_certificate_verification(false);  // the tests' certificate is self-signed
    c.set_read_timeout(60, 0);
    return c;
  }

  // The value of `series` (e.g. `troupe_serve_in_flight`) in /metrics; NaN when absent.
  double metric(const std::string& series) const {
    auto c = client();
    auto res = c.Get("/metrics");
    if (!res) return NAN;
    std::istringstream lines(res->body);
    for (std::string line; std::getline(lines, line);) {
      if (line.rfind(series + " ", 0) == 0) return std::stod(line.substr(series.size() + 1));
    }
    return NAN;
  }

  // Waits (bounded) until `series` reads `value` (`at_least`: `value` or more).
  bool metric_reaches(const std::string& series, double value, std::chrono::milliseconds limit,
                      bool at_least = false) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    for (double v = metric(series); at_least ? !(v >= value) : v != value; v = metric(series)) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      std::this_thread::sleep_for(10ms);
    }
    return true;
  }

  // Starts `n` completions of `max_tokens` tokens on their own threads; each returns its body
  // (null when it failed).
  std::vector<std::future<nlohmann::json>> completions(int n, int max_tokens) const {
    std::vector<std::future<nlohmann::json>> calls;
    for (int i = 0; i < n; ++i) {
      calls.push_back(std::async(std::launch::async, [this, i, max_tokens] {
        auto c = client();
        auto res = c.Post("/v1/completions",
                          R"({"model": "troupe-tiny", "prompt": "request )" + std::to_string(i) +
                              R"(", "max_tokens": )" + std::to_string(max_tokens) +
                              R"(, "seed": )" + std::to_string(i + 1) + "}",
                          "application/json");
        return res && res->status == 200 ? nlohmann::json::parse(res->body) : nlohmann::json();
      }));
    }
    return calls;
  }

  static nlohmann::json post(httplib::Client& c, const std::string& path, const std::string& body,
                             int want_status) {
    auto res = c.Post(path.c_str(), body, "application/json");
    EXPECT_TRUE(res) << path;
    if (!res) return {};
    EXPECT_EQ(res->status, want_status) << body << " -> " << res->body;
    return nlohmann::json::parse(res->body, nullptr, false);
  }

  void TearDown() override {
    hold_.release();
    if (job_) {
      job_->signal(SIGINT);
      job_->wait(20s);
    }
  }

  std::string config_ = TROUPE_SOURCE_DIR "/configs/serve_tiny.yaml";
  temp_dir dir_;
  test_hold hold_{dir_};
  int port_ = 0;
  bool https_ = false;
  std::unique_ptr<subprocess> job_;
};

}  // namespace troupe::testing

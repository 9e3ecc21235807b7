// `app: serve` end to end: a real multi-process serve job (head + two worker processes) and real
// HTTP requests: completions (whole and streamed), chat, the error statuses, a worker killed
// during a load, /metrics after it, a worker joining a running job, Ctrl-C draining.

#include <atomic>
#include <cmath>
#include <csignal>
#include <filesystem>
#include <future>
#include <regex>
#include <sstream>

#include <gtest/gtest.h>

#include "httplib.h"
#include "tests/integration/troupe_cli.hpp"

namespace troupe::testing {
namespace {

using namespace std::chrono_literals;

class ServeTest : public ::testing::Test {
 protected:
  // Starts the serve config with a fresh model on two local workers: a small one unless `full`
  // (the config's tiny GPT, slow enough to be caught mid-request).
  void start(std::vector<std::string> extra = {}, bool full = false) {
    port_ = free_port();
    std::vector<std::string> args = {TROUPE_BINARY,
                                     "launch",
                                     std::string(TROUPE_SOURCE_DIR) + "/configs/serve_tiny.yaml",
                                     "--run-dir",
                                     dir_.file("run"),
                                     "--set",
                                     "serve.port=" + std::to_string(port_)};
    if (!full) {
      args.insert(args.end(),
                  {"--set", "model={vocab: 256, ctx: 64, layers: 2, dim: 32, heads: 4}"});
    }
    args.insert(args.end(), extra.begin(), extra.end());
    job_ = std::make_unique<subprocess>(args);
    ASSERT_TRUE(job_->wait_for_stderr("serving troupe-tiny on", 30s)) << job_->wait(1s).err;
  }

  httplib::Client client() const {
    httplib::Client c("127.0.0.1", port_);
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
    if (job_) {
      job_->signal(SIGINT);
      job_->wait(20s);
    }
  }

  temp_dir dir_;
  int port_ = 0;
  std::unique_ptr<subprocess> job_;
};

TEST_F(ServeTest, CompletionsChatAndEveryErrorStatus) {
  start();
  auto c = client();
  auto body =
      post(c, "/v1/completions",
           R"({"model": "troupe-tiny", "prompt": "Hello", "max_tokens": 7, "seed": 3})", 200);
  EXPECT_EQ(body["object"], "text_completion");
  EXPECT_EQ(body["usage"]["completion_tokens"], 7);
  EXPECT_EQ(body["usage"]["prompt_tokens"], 5);
  EXPECT_EQ(body["choices"][0]["finish_reason"], "length");
  // The same seed gives the same text, whichever worker runs it.
  EXPECT_EQ(post(c, "/v1/completions",
                 R"({"model": "troupe-tiny", "prompt": "Hello", "max_tokens": 7, "seed": 3})",
                 200)["choices"][0]["text"],
            body["choices"][0]["text"]);

  auto chat = post(c, "/v1/chat/completions",
                   R"({"model": "troupe-tiny", "messages": [{"role": "user", "content": "Hi"}],
                       "max_tokens": 4})",
                   200);
  EXPECT_EQ(chat["object"], "chat.completion");
  EXPECT_EQ(chat["choices"][0]["message"]["role"], "assistant");

  // Streamed: data chunks, then [DONE]; the pieces add up to max_tokens bytes of text.
  std::string streamed;
  auto res = c.Post("/v1/completions",
                    R"({"model": "troupe-tiny", "prompt": "Hello", "max_tokens": 6,
                        "stream": true, "temperature": 0})",
                    "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(res->get_header_value("Content-Type"), "text/event-stream");
  int chunks = 0;
  bool done = false;
  std::istringstream lines(res->body);
  for (std::string line; std::getline(lines, line);) {
    if (line.empty()) continue;
    ASSERT_EQ(line.rfind("data: ", 0), 0u) << line;
    if (line == "data: [DONE]") {
      done = true;
      continue;
    }
    const auto chunk = nlohmann::json::parse(line.substr(6));
    ++chunks;
    EXPECT_EQ(chunk["object"], "text_completion");
  }
  EXPECT_TRUE(done);
  EXPECT_GE(chunks, 1);

  EXPECT_EQ(post(c, "/v1/completions", "{not json", 400)["error"]["type"], "invalid_request_error");
  EXPECT_NE(post(c, "/v1/completions", R"({"model": "troupe-tiny", "prompt": "x", "bogus": 1})",
                 400)["error"]["message"]
                .get<std::string>()
                .find("unknown field 'bogus'"),
            std::string::npos);
  EXPECT_EQ(
      post(c, "/v1/completions", R"({"model": "other", "prompt": "x"})", 404)["error"]["code"],
      "model_not_found");
  EXPECT_EQ(post(c, "/v1/completions",
                 R"({"model": "troupe-tiny", "prompt": ")" + std::string(80, 'a') + R"("})",
                 413)["error"]["code"],
            "context_length_exceeded");
  EXPECT_EQ(c.Get("/v1/nothing")->status, 404);
  EXPECT_EQ(c.Get("/health")->status, 200);
  EXPECT_EQ(nlohmann::json::parse(c.Get("/v1/models")->body)["data"][0]["id"], "troupe-tiny");
  const std::string metrics = c.Get("/metrics")->body;
  EXPECT_NE(metrics.find("troupe_serve_responses_total{status=\"413\"} 1"), std::string::npos)
      << metrics;
  EXPECT_NE(metrics.find("troupe_serve_workers 2"), std::string::npos) << metrics;
}

// The official OpenAI Node client (installed by scripts/setup.sh from the npm registry), unchanged.
TEST_F(ServeTest, TheOfficialOpenAiClientWorksUnchanged) {
  start();
  const std::string dir = std::string(TROUPE_SOURCE_DIR) + "/tests/integration/openai_client";
  ASSERT_TRUE(std::filesystem::exists(dir + "/node_modules/openai"))
      << "the OpenAI Node client is not installed: run scripts/setup.sh";
  auto r = run({"/usr/bin/env", "node", dir + "/check.mjs", std::to_string(port_)}, 60s);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto seen = nlohmann::json::parse(r.out);
  EXPECT_EQ(seen["models"], nlohmann::json::array({"troupe-tiny"}));
  EXPECT_EQ(seen["completion_tokens"], 12);
  EXPECT_EQ(seen["completion_finish"], "length");
  EXPECT_EQ(seen["chat_role"], "assistant");
  EXPECT_GE(seen["stream_chunks"].get<int>(), 1);
  EXPECT_EQ(seen["stream_finish"], "length");
  EXPECT_GE(seen["chat_stream_chunks"].get<int>(), 1);
  EXPECT_EQ(seen["error_status"], 404);
  EXPECT_EQ(seen["error_code"], "model_not_found");
}

TEST_F(ServeTest, ABearerTokenIsRequiredWhenSet) {
  start({"--set", "serve.token=s3cret"});
  auto c = client();
  EXPECT_EQ(post(c, "/v1/completions", R"({"model": "troupe-tiny", "prompt": "x"})",
                 401)["error"]["type"],
            "authentication_error");
  c.set_bearer_token_auth("s3cret");
  post(c, "/v1/completions", R"({"model": "troupe-tiny", "prompt": "x", "max_tokens": 2})", 200);
}

// A flood against a queue of one: every request is answered, either in full or at once with
// 429 and Retry-After.
TEST_F(ServeTest, AFloodGets429WithRetryAfter) {
  start({"--set", "serve.max_queue=1", "--set", "serve.max_per_worker=1"});
  std::vector<std::future<std::pair<int, std::string>>> calls;
  for (int i = 0; i < 32; ++i) {
    calls.push_back(std::async(std::launch::async, [this] {
      auto c = client();
      auto res =
          c.Post("/v1/completions", R"({"model": "troupe-tiny", "prompt": "x", "max_tokens": 60})",
                 "application/json");
      if (!res) return std::pair<int, std::string>{-1, httplib::to_string(res.error())};
      return std::pair<int, std::string>{
          res->status, res->status == 429 ? res->get_header_value("Retry-After") : res->body};
    }));
  }
  int ok = 0, refused = 0;
  for (auto& f : calls) {
    const auto [status, detail] = f.get();
    if (status == 200) {
      ++ok;
      EXPECT_EQ(nlohmann::json::parse(detail)["usage"]["completion_tokens"], 60);
    } else {
      EXPECT_EQ(status, 429);
      EXPECT_EQ(detail, "1") << "Retry-After";
      ++refused;
    }
  }
  EXPECT_GE(ok, 3);
  EXPECT_GE(refused, 1);
  auto c = client();
  EXPECT_NE(c.Get("/metrics")->body.find("troupe_serve_responses_total{status=\"429\"}"),
            std::string::npos);
}

// SIGKILL one worker process while requests run: every request still completes exactly once,
// with all its tokens. Afterwards /metrics shows the latencies and batches, and the KV blocks
// in use are back to 0.
TEST_F(ServeTest, AKilledWorkerLosesNoRequest) {
  start({}, true);
  auto calls = completions(8, 100);
  // Once all eight run, kill a worker process ("w1 joined from HOST (pid N, epoch E)").
  ASSERT_TRUE(metric_reaches("troupe_serve_in_flight", 8, 2s));
  int killed = 0;
  for (const auto& e : events_of(dir_.file("run"), "member_joined")) {
    std::smatch m;
    const std::string message = e.value("message", "");
    if (killed == 0 && std::regex_search(message, m, std::regex("\\(pid ([0-9]+)"))) {
      ::kill(std::stoi(m[1]), SIGKILL);
      ++killed;
    }
  }
  ASSERT_EQ(killed, 1) << "no worker pid in the event log";
  for (auto& f : calls) {
    const auto body = f.get();
    ASSERT_TRUE(body.is_object()) << "a request failed";
    EXPECT_EQ(body["usage"]["completion_tokens"], 100);
  }
  auto c = client();
  const std::string metrics = c.Get("/metrics")->body;
  EXPECT_NE(metrics.find("troupe_serve_in_flight 0"), std::string::npos) << metrics;
  EXPECT_FALSE(events_of(dir_.file("run"), "worker_lost").empty());
  EXPECT_EQ(metrics.find("troupe_serve_replays_total 0"), std::string::npos)
      << "no request was replayed: the kill came too late\n"
      << metrics;
  EXPECT_GE(metric("troupe_serve_time_to_first_token_seconds_count"), 8) << metrics;
  EXPECT_GT(metric("troupe_serve_inter_token_latency_seconds_count"), 8 * 50) << metrics;
  EXPECT_GT(metric("troupe_serve_batch_size_count"), 0) << metrics;
  EXPECT_GT(metric("troupe_serve_kv_blocks_capacity"), 0) << metrics;
  // The survivor reports its blocks free within a poll's wait (0.5 s).
  EXPECT_TRUE(metric_reaches("troupe_serve_kv_blocks_in_use", 0, 3s)) << c.Get("/metrics")->body;
}

// A worker started with `troupe worker --join` on a running serve job gets an inference worker
// (the config's worker role is elastic), and the router sends it requests within 2 s of its
// joining; when it leaves again, no request is lost.
TEST_F(ServeTest, AJoinedWorkerTakesTrafficWithinTwoSeconds) {
  const std::string head = "tcp://127.0.0.1:" + std::to_string(free_port());
  start({"--set", "cluster.local_workers=1", "--set", "cluster.listen=" + head});
  ASSERT_TRUE(metric_reaches("troupe_serve_workers", 1, 10s));
  // A steady load: four clients, each sending its next request when the last one ends.
  std::atomic<bool> stop{false};
  std::vector<std::future<int>> clients;
  for (int i = 0; i < 4; ++i) {
    clients.push_back(std::async(std::launch::async, [this, &stop] {
      int failures = 0;
      auto c = client();
      while (!stop) {
        auto res = c.Post("/v1/completions",
                          R"({"model": "troupe-tiny", "prompt": "load", "max_tokens": 8})",
                          "application/json");
        failures += !res || res->status != 200;
      }
      return failures;
    }));
  }
  // On the launcher's machine no token is needed: the launcher left it in the cluster file.
  subprocess joined({TROUPE_BINARY, "worker", "--join", head});
  ASSERT_TRUE(joined.wait_for_stderr("joined", 20s)) << joined.wait(1s).err;
  const auto joined_at = std::chrono::steady_clock::now();
  const bool took =
      metric_reaches("troupe_serve_dispatched_total{worker=\"worker/1\"}", 1, 10s, true);
  const auto delay = std::chrono::steady_clock::now() - joined_at;
  EXPECT_TRUE(took) << "the joined worker received no request";
  EXPECT_LE(delay, 2s) << std::chrono::duration<double>(delay).count() << " s";
  EXPECT_EQ(metric("troupe_serve_workers"), 2);
  // It leaves (Ctrl-C) under load: its requests finish elsewhere, none fails.
  joined.signal(SIGINT);
  EXPECT_EQ(joined.wait(20s).exit_code, 0);
  EXPECT_TRUE(metric_reaches("troupe_serve_workers", 1, 10s));
  std::this_thread::sleep_for(300ms);  // more requests, on the one worker left
  stop = true;
  for (auto& f : clients)
    EXPECT_EQ(f.get(), 0) << "requests failed";
}

// Ctrl-C drains: the requests in flight finish in full while new ones get 503, then the job
// exits 0.
TEST_F(ServeTest, CtrlCFinishesTheRequestsInFlightThenExitsZero) {
  // A longer context, so that the requests are sure to outlast the start of the drain.
  start({"--set", "model={vocab: 256, ctx: 512, layers: 4, dim: 128, heads: 4}"}, true);
  auto calls = completions(4, 480);
  ASSERT_TRUE(metric_reaches("troupe_serve_in_flight", 4, 2s));
  job_->signal(SIGINT);
  bool refused = false;
  for (int i = 0; i < 200 && !refused; ++i) {
    auto c = client();
    auto res = c.Post("/v1/completions", R"({"model": "troupe-tiny", "prompt": "late"})",
                      "application/json");
    ASSERT_TRUE(res) << "the server stopped before the requests in flight ended";
    refused = res->status == 503;
    if (!refused) std::this_thread::sleep_for(10ms);
  }
  EXPECT_TRUE(refused) << "a request arriving while draining was not refused";
  for (auto& f : calls) {
    const auto body = f.get();
    ASSERT_TRUE(body.is_object()) << "a request in flight failed";
    EXPECT_EQ(body["usage"]["completion_tokens"], 480);
  }
  auto r = job_->wait(30s);
  job_.reset();
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_FALSE(events_of(dir_.file("run"), "drained").empty());
}

// A drain that outlasts runtime.stop_grace_s is cut short: the job stops at once (exit 130) and
// the requests still running are answered 503 instead of waiting for a server that is gone.
TEST_F(ServeTest, ADrainPastTheGracePeriodStopsAtOnce) {
  start({"--set", "model={vocab: 256, ctx: 512, layers: 4, dim: 128, heads: 4}", "--set",
         "runtime.stop_grace_s=0"},
        true);
  std::vector<std::future<int>> calls;
  for (int i = 0; i < 4; ++i) {
    calls.push_back(std::async(std::launch::async, [this] {
      auto c = client();
      auto res = c.Post("/v1/completions",
                        R"({"model": "troupe-tiny", "prompt": "long", "max_tokens": 500})",
                        "application/json");
      return res ? res->status : -1;
    }));
  }
  ASSERT_TRUE(metric_reaches("troupe_serve_in_flight", 4, 2s));
  job_->signal(SIGINT);
  auto r = job_->wait(20s);
  job_.reset();
  EXPECT_EQ(r.exit_code, 130) << r.err;
  EXPECT_NE(r.err.find("did not stop within runtime.stop_grace_s"), std::string::npos) << r.err;
  for (auto& f : calls)
    EXPECT_EQ(f.get(), 503) << "a request cut off by the stop";
}

}  // namespace
}  // namespace troupe::testing

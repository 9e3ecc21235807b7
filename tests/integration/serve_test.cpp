// `app: serve` end to end: a real multi-process serve job (head + two worker processes) and real
// HTTP requests: completions (whole and streamed), chat, the error statuses, a worker killed
// during a load, /metrics after it, a worker joining a running job, Ctrl-C draining.
//
// Requests that must still be running at some point (a kill, a join, a drain) are kept running
// by the test hold (docs/testing.md), never by a generation hoped to be slow enough: the
// engines run no iteration until the test releases them, on any machine.

#include <atomic>
#include <cmath>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <future>
#include <regex>
#include <sstream>

#include <gtest/gtest.h>
#include <sys/resource.h>

#include "absl/strings/str_cat.h"
#include "httplib.h"
#include "tests/integration/serve_fixture.hpp"
#include "tests/support/headless_chromium.hpp"
#include "tests/support/proc_state.hpp"
#include "tests/support/raw_http_client.hpp"
#include "tests/support/tls_certificate.hpp"

namespace troupe::testing {
namespace {

using namespace std::chrono_literals;

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
  const auto models = nlohmann::json::parse(c.Get("/v1/models")->body);
  EXPECT_EQ(models["data"][0]["id"], "troupe-tiny");
  EXPECT_EQ(models["data"][0]["max_model_len"], 64);
  // vLLM's tokenizer endpoints, and a prompt given as their token ids.
  const auto tokens = post(c, "/tokenize", R"({"prompt": "Hello"})", 200);
  EXPECT_EQ(tokens["count"], 5);
  EXPECT_EQ(tokens["max_model_len"], 64);
  EXPECT_EQ(post(c, "/detokenize", tokens.dump(), 400)["error"]["message"],
            "unknown field 'count'");
  EXPECT_EQ(
      post(c, "/detokenize", nlohmann::json{{"tokens", tokens["tokens"]}}.dump(), 200)["prompt"],
      "Hello");
  EXPECT_EQ(post(c, "/v1/completions",
                 nlohmann::json{{"model", "troupe-tiny"},
                                {"prompt", tokens["tokens"]},
                                {"max_tokens", 7},
                                {"seed", 3}}
                     .dump(),
                 200)["choices"][0]["text"],
            body["choices"][0]["text"]);
  EXPECT_NE(post(c, "/detokenize", R"({"tokens": [999]})", 400)["error"]["message"]
                .get<std::string>()
                .find("'tokens'[0] must be a token id"),
            std::string::npos);
  const std::string metrics = c.Get("/metrics")->body;
  EXPECT_NE(metrics.find("troupe_serve_responses_total{status=\"413\"} 1"), std::string::npos)
      << metrics;
  EXPECT_NE(metrics.find("troupe_serve_workers 2"), std::string::npos) << metrics;
}

// Cache-aware routing over real worker processes, as SGLang's router does: requests that start
// with the same 48 tokens (three KV blocks) all go to the worker that computed them first, which
// finds those blocks in its prefix cache; the router's dispatch counts and the workers' cache
// metrics show it.
TEST_F(ServeTest, RequestsSharingAPrefixGoToTheWorkerThatCachedIt) {
  start();
  auto c = client();
  const std::string prefix = "You are terse; answer in a word or two, please. ";
  ASSERT_EQ(prefix.size(), 48u);
  for (const char* question : {"why?", "how?", "who?", "when"}) {
    post(c, "/v1/completions",
         nlohmann::json{{"model", "troupe-tiny"},
                        {"prompt", prefix + question},
                        {"max_tokens", 2},
                        {"temperature", 0}}
             .dump(),
         200);
  }
  const std::string metrics = c.Get("/metrics")->body;
  std::vector<double> dispatched;
  std::istringstream lines(metrics);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("troupe_serve_dispatched_total{", 0) == 0)
      dispatched.push_back(std::stod(line.substr(line.rfind(' ') + 1)));
  }
  std::sort(dispatched.begin(), dispatched.end());
  ASSERT_FALSE(dispatched.empty()) << metrics;
  EXPECT_EQ(dispatched.back(), 4) << metrics;  // one worker took them all
  // Each later request found the first 48 tokens' three blocks.
  EXPECT_TRUE(metric_reaches("troupe_serve_prefix_cache_hits_total", 3 * 48, 30s, true))
      << c.Get("/metrics")->body;
}

// The official OpenAI Node client (installed by scripts/setup.sh from the npm registry), unchanged.
TEST_F(ServeTest, TheOfficialOpenAiClientWorksUnchanged) {
  // A context that holds the tools' definitions, which the chat template puts in the prompt.
  start({"--set", "model={vocab: 256, ctx: 256, layers: 2, dim: 32, heads: 4}"});
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
  // n and logprobs.
  EXPECT_EQ(seen["n_choices"], nlohmann::json::array({0, 1, 2}));
  EXPECT_GE(seen["n_distinct"].get<int>(), 2) << "three samples with seeds 7, 8, 9";
  EXPECT_EQ(seen["completion_logprobs"], 5);
  EXPECT_EQ(seen["completion_top"], 2);
  EXPECT_EQ(seen["logprobs_negative"], true);
  EXPECT_EQ(seen["chat_choices"], 2);
  EXPECT_EQ(seen["chat_logprobs"], 4);
  EXPECT_EQ(seen["chat_top"], 3);
  EXPECT_EQ(seen["stream_choices"], nlohmann::json::array({0, 1}));
  // The rest of the API.
  EXPECT_EQ(seen["biased_text"], "AAAAA");
  EXPECT_EQ(seen["penalized_tokens"], 6);
  EXPECT_EQ(seen["seed_zero_repeats"], true);
  EXPECT_EQ(seen["batch_choices"], nlohmann::json::array({0, 1, 2, 3}));
  EXPECT_EQ(seen["batch_echo"], nlohmann::json::array({true, true, true, true}));
  EXPECT_EQ(seen["batch_prompt_tokens"], 9);
  EXPECT_EQ(seen["parts_finish"], "length");
  EXPECT_EQ(seen["stream_usage"]["completion_tokens"], 4);
  EXPECT_EQ(seen["stream_usage_chunks"], 1);
  EXPECT_EQ(seen["structured"], nlohmann::json::array({true, true, true}));
  EXPECT_EQ(seen["chat_structured"], "boolean");
  if (seen["json_object_finish"] == "stop") {  // greedy may outgrow max_tokens in an open object
    EXPECT_TRUE(nlohmann::json::parse(seen["json_object_text"].get<std::string>()).is_object());
  }
  EXPECT_EQ(seen["forced_call"], nlohmann::json::array({"function", "set_light", "boolean", true}));
  EXPECT_EQ(seen["streamed_call"],
            nlohmann::json::array({0, "set_light", "boolean", true, "stop"}));
  EXPECT_EQ(seen["auto_reply"], nlohmann::json::array({"string", nullptr}));
  EXPECT_EQ(seen["required_call"], nlohmann::json::array({"tool_calls", "set_light", "boolean"}));
  EXPECT_EQ(seen["required_stream"],
            nlohmann::json::array({"tool_calls", "set_light", "boolean", true, nullptr}));
  EXPECT_EQ(seen["chat_stream_helper"], nlohmann::json::array({"assistant", "string"}));
  // Two embeddings of the model's width (dim 32), of unit length, 5 + 8 prompt tokens (bytes),
  // the floats the base64 said.
  EXPECT_EQ(seen["embeddings"], nlohmann::json::array({2, 32, 13, true, true}));
}

// HTTPS from serve.tls, on a cluster whose control plane is CURVE: both ends encrypted.
TEST_F(ServeTest, ServesHttpsOnACurveCluster) {
  const std::string keys = dir_.file("keys");
  ASSERT_EQ(troupe({"keys", "generate", "--out", keys}, 30s).exit_code, 0);
  const std::string cert = dir_.file("cert.pem"), key = dir_.file("key.pem");
  make_tls_certificate(cert, key);
  start({"--set", "cluster.auth=curve", "--set", "cluster.keys=" + keys, "--set",
         "serve.tls={cert: " + cert + ", key: " + key + "}"},
        2, /*https=*/true);
  EXPECT_EQ(wait_for_event(run_dir(), "serving")["url"].get<std::string>().rfind("https://", 0),
            0u);
  auto c = client();
  post(c, "/v1/completions", R"({"model": "troupe-tiny", "prompt": "x", "max_tokens": 2})", 200);
  httplib::Client plain("127.0.0.1", port_);
  EXPECT_FALSE(plain.Get("/health")) << "plain HTTP answered on an HTTPS port";
  const auto ready = events_of(run_dir(), "cluster_ready");
  ASSERT_EQ(ready.size(), 1u);
  EXPECT_EQ(ready[0]["auth"], "curve");
}

TEST_F(ServeTest, ABearerTokenAndTheHttpLimitsComeFromTheConfig) {
  start({"--set", "serve.token=s3cret", "--set", "serve.http.max_body_bytes=256"});
  auto c = client();
  EXPECT_EQ(post(c, "/v1/completions", R"({"model": "troupe-tiny", "prompt": "x"})",
                 401)["error"]["type"],
            "authentication_error");
  c.set_bearer_token_auth("s3cret");
  post(c, "/v1/completions", R"({"model": "troupe-tiny", "prompt": "x", "max_tokens": 2})", 200);
  const std::string long_prompt =
      R"({"model": "troupe-tiny", "prompt": ")" + std::string(300, 'x') + R"(", "max_tokens": 2})";
  const auto too_big = post(c, "/v1/completions", long_prompt, 413);
  EXPECT_NE(too_big["error"]["message"].get<std::string>().find("serve.http.max_body_bytes"),
            std::string::npos)
      << too_big;
}

// A flood against a queue of one, with the engines held: exactly three requests are taken (one
// running on each worker, one waiting) and the other 29 answered at once with 429 and
// Retry-After; once released, the three finish in full.
// The head's dashboard of a serving job under load (completions held in flight on the
// workers), in headless chromium: the members, the workers' actors and the serving curves with
// points, and no console message.
TEST_F(ServeTest, TheDashboardShowsAServingJobUnderLoad) {
  start();
  hold_.hold();
  auto calls = completions(8, 8);
  const auto released = hold_.release_at_exit();
  ASSERT_TRUE(metric_reaches("troupe_serve_in_flight", 1, 30s, /*at_least=*/true));
  std::string dashboard;
  std::getline(std::ifstream(run_dir() + "/head_http_url"), dashboard);
  ASSERT_FALSE(dashboard.empty()) << "no head_http_url in the run directory";
  httplib::Client head(dashboard);
  std::string history;
  ASSERT_TRUE(wait_until([&] {  // the load in the head's history: two samples of it
    auto r = head.Get("/api/series?name=troupe_serve_in_flight");
    if (!r || r->status != 200) return false;
    history = r->body;
    const auto series = nlohmann::json::parse(r->body);
    int loaded = 0;
    for (const auto& s : series["series"])
      for (const auto& p : s["points"])
        loaded += p[1].is_number() && p[1].get<double>() >= 1;
    return loaded >= 2;
  })) << history;
  const process_result dom = headless_chromium(dashboard + "/?once", "--dump-dom");
  expect_dashboard(
      dom, {"<td>w1</td>", "<td>w2</td>", "<td>head</td>", "troupe_serve_running_sequences"},
      /*min_charts=*/2);  // the running sequences, the queue, the KV blocks
  hold_.release();
  for (auto& call : calls)
    EXPECT_FALSE(call.get().is_null());
}

TEST_F(ServeTest, AFloodGets429WithRetryAfter) {
  start({"--set", "serve.max_queue=1", "--set", "serve.max_per_worker=1"});
  hold_.hold();
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
  const auto released = hold_.release_at_exit();
  const auto answered = [&] {
    return std::count_if(calls.begin(), calls.end(),
                         [](const auto& f) { return f.wait_for(0s) == std::future_status::ready; });
  };
  EXPECT_TRUE(wait_until([&] { return answered() >= 29; }));
  EXPECT_EQ(answered(), 29) << "the held server answered more or fewer than the refused ones";
  hold_.release();
  int ok = 0, refused = 0;
  for (auto& f : calls) {
    const auto [status, detail] = f.get();
    if (status == 200) {
      ++ok;
      EXPECT_EQ(nlohmann::json::parse(detail)["usage"]["completion_tokens"], 60);
    } else {
      EXPECT_EQ(status, 429) << detail;
      EXPECT_EQ(detail, "1") << "Retry-After";
      ++refused;
    }
  }
  EXPECT_EQ(ok, 3);
  EXPECT_EQ(refused, 29);
  EXPECT_EQ(metric("troupe_serve_responses_total{status=\"429\"}"), 29);
}

// SIGKILL one worker process while its requests are held on it: every request still completes
// exactly once, with all its tokens, the killed worker's four replayed on the other. Afterwards
// /metrics shows the latencies and batches, and the KV blocks in use are back to 0.
TEST_F(ServeTest, AKilledWorkerLosesNoRequest) {
  start();
  hold_.hold();
  auto calls = completions(8, 50);
  const auto released = hold_.release_at_exit();
  // All eight are on the workers, four each (the least loaded takes the next), and stay there.
  ASSERT_TRUE(metric_reaches("troupe_serve_in_flight", 8, 30s));
  int killed = 0;  // "w1 joined from HOST (pid N, C cores, epoch E)"
  for (const auto& e : events_of(run_dir(), "member_joined")) {
    std::smatch m;
    const std::string message = e.value("message", "");
    if (killed == 0 && std::regex_search(message, m, std::regex("\\(pid ([0-9]+)"))) {
      ::kill(std::stoi(m[1]), SIGKILL);
      ++killed;
    }
  }
  ASSERT_EQ(killed, 1) << "no worker pid in the event log";
  EXPECT_TRUE(metric_reaches("troupe_serve_replays_total", 4, 30s))
      << "the killed worker's requests were not replayed";
  hold_.release();
  for (auto& f : calls) {
    const auto body = f.get();
    ASSERT_TRUE(body.is_object()) << "a request failed";
    EXPECT_EQ(body["usage"]["completion_tokens"], 50);
  }
  auto c = client();
  const std::string metrics = c.Get("/metrics")->body;
  EXPECT_NE(metrics.find("troupe_serve_in_flight 0"), std::string::npos) << metrics;
  EXPECT_FALSE(events_of(run_dir(), "worker_lost").empty());
  EXPECT_EQ(metric("troupe_serve_replays_total"), 4) << metrics;
  EXPECT_GE(metric("troupe_serve_time_to_first_token_seconds_count"), 8) << metrics;
  EXPECT_GE(metric("troupe_serve_inter_token_latency_seconds_count"), 8 * 49) << metrics;
  EXPECT_GT(metric("troupe_serve_batch_size_count"), 0) << metrics;
  EXPECT_GT(metric("troupe_serve_kv_blocks_capacity"), 0) << metrics;
  // The survivor reports its blocks free within a poll's wait (0.5 s).
  EXPECT_TRUE(metric_reaches("troupe_serve_kv_blocks_in_use", 0, 30s)) << c.Get("/metrics")->body;
}

// A worker started with `troupe worker --join` on a running serve job gets an inference worker
// (the config's worker role is elastic), and the router sends it the next request: with the
// engines held, four requests wait on the first worker, so the newcomer is the least loaded.
// When it leaves again (Ctrl-C) with that request on it, the request is replayed and none fails.
TEST_F(ServeTest, AJoinedWorkerTakesTheNextRequest) {
  start({"--set", "cluster.local_workers=1"}, 1);
  const auto ready = wait_for_event(run_dir(), "cluster_ready");
  ASSERT_TRUE(ready.is_object());
  hold_.hold();
  auto calls = completions(4, 8);
  std::vector<std::future<nlohmann::json>> next;
  const auto released = hold_.release_at_exit();
  ASSERT_TRUE(metric_reaches("troupe_serve_in_flight", 4, 30s));
  // On the launcher's machine no token is needed: the launcher left it in the cluster file.
  subprocess joined({TROUPE_BINARY, "worker", "--join", ready["head"]}, {hold_.env()});
  ASSERT_TRUE(joined.wait_for_stderr("joined", 30s)) << joined.wait(1s).err;
  const auto joined_at = std::chrono::steady_clock::now();
  ASSERT_TRUE(metric_reaches("troupe_serve_workers", 2, 30s)) << "the joined worker got no role";
  // Recorded, not asserted: how long it takes depends on the machine.
  RecordProperty("join_to_serving_ms",
                 static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                      std::chrono::steady_clock::now() - joined_at)
                                      .count()));
  next = completions(1, 8);
  EXPECT_TRUE(metric_reaches("troupe_serve_dispatched_total{worker=\"worker/1\"}", 1, 30s))
      << "the joined worker did not take the next request";
  EXPECT_EQ(metric("troupe_serve_dispatched_total{worker=\"worker/0\"}"), 4);
  // It leaves with the request on it: the request is replayed on the first worker.
  joined.signal(SIGINT);
  EXPECT_EQ(joined.wait(20s).exit_code, 0);
  EXPECT_TRUE(metric_reaches("troupe_serve_workers", 1, 30s));
  EXPECT_TRUE(metric_reaches("troupe_serve_replays_total", 1, 30s));
  hold_.release();
  calls.push_back(std::move(next.front()));
  for (auto& f : calls) {
    const auto body = f.get();
    ASSERT_TRUE(body.is_object()) << "a request failed";
    EXPECT_EQ(body["usage"]["completion_tokens"], 8);
  }
}

// Ctrl-C drains: the requests in flight (held until the drain has begun) finish in full while
// new ones get 503, then the job exits 0.
TEST_F(ServeTest, CtrlCFinishesTheRequestsInFlightThenExitsZero) {
  start();
  hold_.hold();
  auto calls = completions(4, 40);
  const auto released = hold_.release_at_exit();
  ASSERT_TRUE(metric_reaches("troupe_serve_in_flight", 4, 30s));
  job_->signal(SIGINT);
  ASSERT_TRUE(wait_for_event(run_dir(), "draining").is_object()) << "no drain began";
  auto c = client();
  auto late = c.Post("/v1/completions", R"({"model": "troupe-tiny", "prompt": "late"})",
                     "application/json");
  ASSERT_TRUE(late) << "the server stopped before the requests in flight ended";
  EXPECT_EQ(late->status, 503) << "a request arriving while draining was not refused";
  hold_.release();
  for (auto& f : calls) {
    const auto body = f.get();
    ASSERT_TRUE(body.is_object()) << "a request in flight failed";
    EXPECT_EQ(body["usage"]["completion_tokens"], 40);
  }
  auto r = job_->wait(30s);
  job_.reset();
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_FALSE(events_of(run_dir(), "drained").empty());
}

// 2,000 clients streaming at once, all held by construction (the engines run nothing until the
// test releases them): the serving process holds them on its event loop, without a thread each
// and in bounded memory, then streams every one to its end.
TEST_F(ServeTest, TwoThousandStreamingClientsAtOnceHoldNoThreadEach) {
  constexpr int clients = 2000;
  rlimit files{};
  ::getrlimit(RLIMIT_NOFILE, &files);
  if (files.rlim_max < clients + 256) {
    GTEST_SKIP() << "needs " << clients + 256 << " open files; the hard limit is "
                 << files.rlim_max;
  }
  files.rlim_cur = files.rlim_max;
  ::setrlimit(RLIMIT_NOFILE, &files);
  start({"--set", "serve.max_queue=4096"});
  hold_.hold();
  const auto released = hold_.release_at_exit();
  const pid_t server = job_->pid();  // the launch process serves the API
  const int threads_before = thread_count(server);
  const int64_t rss_before = resident_kib(server);
  std::vector<std::unique_ptr<raw_http_client>> streams;
  for (int i = 0; i < clients; ++i) {
    streams.push_back(std::make_unique<raw_http_client>(port_));
    const std::string body = absl::StrCat(R"({"model": "troupe-tiny", "prompt": "client )", i,
                                          R"(", "max_tokens": 4, "stream": true})");
    ASSERT_TRUE(streams.back()->send(
        absl::StrCat("POST /v1/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
                     "Content-Type: application/json\r\nContent-Length: ",
                     body.size(), "\r\n\r\n", body)));
  }
  // Every request accepted: on a worker (held) or waiting in the router's queue.
  ASSERT_TRUE(testing::wait_until(
      [&] {
        return metric("troupe_serve_in_flight") + metric("troupe_serve_queue_depth") == clients;
      },
      60s));
  EXPECT_GE(metric("troupe_serve_http_connections"), clients);
  const int threads = thread_count(server);
  const double kib_each = static_cast<double>(resident_kib(server) - rss_before) / clients;
  std::cout << "{\"streaming_clients\": " << clients
            << ", \"server_threads_before\": " << threads_before
            << ", \"server_threads_during\": " << threads
            << ", \"server_rss_kib_per_client\": " << kib_each << "}" << std::endl;
  EXPECT_LT(threads - threads_before, 8) << "a thread per connection";
  EXPECT_LT(kib_each, 64.0);
  hold_.release();
  int complete = 0;
  for (auto& s : streams) {
    const std::string answer = s->read_to_end();
    complete += answer.find("data: [DONE]") != std::string::npos ? 1 : 0;
  }
  EXPECT_EQ(complete, clients);
}

// A drain that outlasts runtime.stop_grace_s is cut short: the job stops at once (exit 130) and
// the requests still running (held for good) are answered 503 instead of waiting for a server
// that is gone.
TEST_F(ServeTest, ADrainPastTheGracePeriodStopsAtOnce) {
  start({"--set", "runtime.stop_grace_s=0"});
  hold_.hold();
  std::vector<std::future<int>> calls;
  for (int i = 0; i < 4; ++i) {
    calls.push_back(std::async(std::launch::async, [this] {
      auto c = client();
      auto res = c.Post("/v1/completions",
                        R"({"model": "troupe-tiny", "prompt": "long", "max_tokens": 40})",
                        "application/json");
      return res ? res->status : -1;
    }));
  }
  const auto released = hold_.release_at_exit();
  ASSERT_TRUE(metric_reaches("troupe_serve_in_flight", 4, 30s));
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

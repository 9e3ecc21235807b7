#pragma once

// Concurrent streaming clients of a troupe server over HTTP, as vLLM's benchmark_serving drives
// one: each client sends its next completion request when the last one ends, and every request
// records its time to first token, the gaps between the chunks after it, and its end-to-end time.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "httplib.h"

namespace troupe::bench {

struct load_result {
  double tokens_per_s = 0;    ///< output tokens over the whole run
  double requests_per_s = 0;  ///< completed requests over the whole run
  std::vector<double> ttft_ms, itl_ms, e2el_ms;
  std::vector<double> tpot_ms;  ///< per request: (e2el - ttft) / (output tokens - 1)
};

inline double percentile(std::vector<double> xs, double p) {
  if (xs.empty()) return 0;
  std::sort(xs.begin(), xs.end());
  return xs[std::min(xs.size() - 1, static_cast<size_t>(p * xs.size()))];
}

inline double mean(const std::vector<double>& xs) {
  double sum = 0;
  for (double x : xs)
    sum += x;
  return xs.empty() ? 0 : sum / static_cast<double>(xs.size());
}

/// Requests 0..requests-1 to POST /v1/completions on 127.0.0.1:`port` from `clients` threads:
/// `body(i)` is request i's JSON body (streamed), `output_tokens(i)` how many tokens it answers.
inline load_result run_load(int port, int clients, int requests,
                            const std::function<std::string(int)>& body,
                            const std::function<int(int)>& output_tokens) {
  using clock = std::chrono::steady_clock;
  std::atomic<int> next{0};
  std::atomic<int64_t> tokens{0}, completed{0};
  std::mutex mu;
  load_result r;
  const auto start = clock::now();
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&] {
      httplib::Client client("127.0.0.1", port);
      client.set_read_timeout(300, 0);
      for (int i = next++; i < requests; i = next++) {
        const auto sent = clock::now();
        auto last = sent;
        bool first = true;
        std::vector<double> gaps;
        double ttft = 0;
        httplib::Request req;
        req.method = "POST";
        req.path = "/v1/completions";
        req.headers = {{"Content-Type", "application/json"}};
        req.body = body(i);
        req.content_receiver = [&](const char*, size_t, uint64_t, uint64_t) {
          const auto now = clock::now();
          if (first) {
            ttft = std::chrono::duration<double, std::milli>(now - sent).count();
            first = false;
          } else {
            gaps.push_back(std::chrono::duration<double, std::milli>(now - last).count());
          }
          last = now;
          return true;
        };
        httplib::Response response;
        httplib::Error error = httplib::Error::Success;
        if (!client.send(req, response, error) || response.status != 200) continue;
        const double e2el = std::chrono::duration<double, std::milli>(last - sent).count();
        const int n = output_tokens(i);
        tokens += n;
        ++completed;
        std::lock_guard lock(mu);
        r.ttft_ms.push_back(ttft);
        r.e2el_ms.push_back(e2el);
        if (n > 1) r.tpot_ms.push_back((e2el - ttft) / (n - 1));
        r.itl_ms.insert(r.itl_ms.end(), gaps.begin(), gaps.end());
      }
    });
  }
  for (auto& t : threads)
    t.join();
  const double seconds = std::chrono::duration<double>(clock::now() - start).count();
  r.tokens_per_s = static_cast<double>(tokens.load()) / seconds;
  r.requests_per_s = static_cast<double>(completed.load()) / seconds;
  return r;
}

}  // namespace troupe::bench

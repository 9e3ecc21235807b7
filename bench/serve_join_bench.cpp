// Elastic serving against restarting the world: `troupe worker --join` on a running serve job
// (configs/serve_tiny.yaml with one local worker) until the router sends the newcomer a
// request, against what a server without elasticity does to get one more worker: `troupe launch`
// of the same job with two local workers, until its first completed response. Each is repeated
// (joins on the same job, one at a time, each newcomer leaving with Ctrl-C before the next);
// medians. The serving issue asks for traffic on a joined worker within 2 s.
//
//   serve_join_bench [--repeats N] [--troupe PATH] [--config PATH]

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bench/bench_process.hpp"
#include "bench/bench_report.hpp"
#include "httplib.h"

namespace {

using namespace troupe::bench;
using clock_type = std::chrono::steady_clock;
using namespace std::chrono_literals;

struct settings {
  std::string troupe = TROUPE_BINARY;
  std::string config = TROUPE_SOURCE_DIR "/configs/serve_tiny.yaml";
};

// Sums the /metrics lines starting with `prefix` whose text does not contain `except`.
double metric_sum(int port, const std::string& prefix, const std::string& except = "") {
  httplib::Client c("127.0.0.1", port);
  auto res = c.Get("/metrics");
  if (!res) return -1;
  double sum = 0;
  std::istringstream lines(res->body);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind(prefix, 0) != 0 || (!except.empty() && line.find(except) != std::string::npos))
      continue;
    sum += std::stod(line.substr(line.rfind(' ') + 1));
  }
  return sum;
}

bool complete(int port, int max_tokens) {
  httplib::Client c("127.0.0.1", port);
  c.set_read_timeout(120, 0);
  auto res = c.Post("/v1/completions",
                    R"({"model": "troupe-tiny", "prompt": "join", "max_tokens": )" +
                        std::to_string(max_tokens) + "}",
                    "application/json");
  return res && res->status == 200;
}

double seconds_since(clock_type::time_point t) {
  return std::chrono::duration<double>(clock_type::now() - t).count();
}

std::string run_dir(int n) {
  return "/tmp/serve_join_bench." + std::to_string(getpid()) + "." + std::to_string(n);
}

// Seconds from `troupe worker --join` to the router's first request on the newcomer, once per
// repeat on one running job; empty on failure.
std::vector<double> joins(const settings& s, int repeats) {
  const std::string dir = run_dir(0);
  const pid_t job = spawn({s.troupe, "launch", s.config, "--run-dir", dir, "--set",
                           "cluster.local_workers=1", "--set", "serve.port=0"});
  const auto serving = wait_event(dir, "serving");
  const auto ready = wait_event(dir, "cluster_ready");
  std::vector<double> out;
  if (serving.is_object() && ready.is_object()) {
    const int port = serving["port"];
    const std::string endpoint = ready["head"];
    for (int r = 0; r < repeats; ++r) {
      const auto started = clock_type::now();
      const pid_t worker = spawn({s.troupe, "worker", "--join", endpoint});
      // Two requests at a time: the first worker takes one, the least loaded (the newcomer,
      // once the router has it) the other.
      const double before = metric_sum(port, "troupe_serve_dispatched_total", "worker/0");
      bool took = false;
      while (!took && seconds_since(started) < 60) {
        std::thread a([&] { complete(port, 32); });
        std::thread b([&] { complete(port, 32); });
        a.join();
        b.join();
        took = metric_sum(port, "troupe_serve_dispatched_total", "worker/0") > before;
      }
      if (!took) break;
      out.push_back(seconds_since(started));  // an upper bound: the pair of requests ended
      stop(worker);
      if (!wait_until([&] { return metric_sum(port, "troupe_serve_workers") == 1; })) break;
    }
  }
  stop(job);
  std::error_code ignored;
  std::filesystem::remove_all(dir, ignored);
  return out.size() == static_cast<size_t>(repeats) ? out : std::vector<double>{};
}

// Seconds from `troupe launch` of the job with two local workers to its first response.
double restart(const settings& s, int n) {
  const std::string dir = run_dir(n);
  const auto started = clock_type::now();
  const pid_t job = spawn({s.troupe, "launch", s.config, "--run-dir", dir, "--set",
                           "cluster.local_workers=2", "--set", "serve.port=0"});
  const auto serving = wait_event(dir, "serving");
  double took = -1;
  if (serving.is_object() && complete(serving["port"], 1)) took = seconds_since(started);
  stop(job);
  std::error_code ignored;
  std::filesystem::remove_all(dir, ignored);
  return took;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace troupe::bench;
  int repeats = 5;
  settings s;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--repeats" && i + 1 < argc) {
      repeats = std::max(1, std::stoi(argv[++i]));
    } else if (a == "--troupe" && i + 1 < argc) {
      s.troupe = argv[++i];
    } else if (a == "--config" && i + 1 < argc) {
      s.config = argv[++i];
    } else {
      return unknown_argument("serve_join_bench", a);
    }
  }
  const std::vector<double> joined = joins(s, repeats);
  std::vector<double> restarted;
  for (int r = 0; r < repeats; ++r)
    restarted.push_back(restart(s, r + 1));
  if (joined.empty() || std::count(restarted.begin(), restarted.end(), -1.0) > 0) {
    std::fprintf(stderr, "serve_join_bench: a serve job did not start or serve; run %s launch %s\n",
                 s.troupe.c_str(), s.config.c_str());
    return 1;
  }
  report("serve_join_bench", "join_to_traffic_s", joined, "s",
         "restart: troupe launch with one more worker to its first response", restarted,
         better::lower, {{"target_s", 2}});
  return 0;
}

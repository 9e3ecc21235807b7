#pragma once

// Runs the real troupe binary, as a user would, for the integration tests.

#include <chrono>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "tests/support/subprocess.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/wait.hpp"

namespace troupe::testing {

/// The whole file at `path` ("" when it cannot be read).
inline std::string read_file(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

/// A command that asks `url` (a JSON POST of `body` when it is not empty) and prints the reply's
/// body: for requests from inside a network namespace (network_namespaces::on).
inline std::vector<std::string> http_request_argv(const std::string& url,
                                                  const std::string& body = "") {
  return {"/usr/bin/python3", "-c",
          "import sys, urllib.request\n"
          "req = urllib.request.Request(sys.argv[1], data=sys.argv[2].encode() or None, "
          "headers={'Content-Type': 'application/json'})\n"
          "print(urllib.request.urlopen(req, timeout=60).read().decode())\n",
          url, body};
}

/// `troupe ARGS...` with the test plugins on TROUPE_PLUGIN_PATH.
inline process_result troupe(std::vector<std::string> args,
                             std::chrono::milliseconds timeout = std::chrono::seconds(60)) {
  args.insert(args.begin(), TROUPE_BINARY);
  return run(args, timeout, {std::string("TROUPE_PLUGIN_PATH=") + TROUPE_TEST_PLUGIN_DIR});
}

/// The shipped GRPO config, which the RL tests shorten.
inline const std::string grpo_config = std::string(TROUPE_SOURCE_DIR) + "/configs/rlhf_grpo.yaml";

/// The `--set` arguments of a short RL run from scratch: no warm-up, no validation, `steps`
/// steps, and then each of `sets` ("key=value").
inline std::vector<std::string> short_rl_run(int steps, const std::vector<std::string>& sets = {}) {
  std::vector<std::string> args = {
      "--set", "rlhf.warmup.steps=0",
      "--set", "rlhf.trainer.test_freq=0",
      "--set", "rlhf.trainer.total_training_steps=" + std::to_string(steps)};
  for (const std::string& set : sets)
    args.insert(args.end(), {"--set", set});
  return args;
}

/// `troupe launch CONFIG --run-dir RUN_DIR` and then `extra`.
inline std::vector<std::string> launch_args(const std::string& config, const std::string& run_dir,
                                            const std::vector<std::string>& extra) {
  std::vector<std::string> args = {"launch", config, "--run-dir", run_dir};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

/// The JSON summary: the last line of stdout.
inline nlohmann::json summary_of(const process_result& r) {
  std::string out = r.out;
  while (!out.empty() && out.back() == '\n')
    out.pop_back();
  const size_t nl = out.rfind('\n');
  return nlohmann::json::parse(nl == std::string::npos ? out : out.substr(nl + 1), nullptr, false);
}

/// The complete lines of a JSONL file (one still being written is left for the next read).
inline std::vector<nlohmann::json> read_jsonl(const std::string& path) {
  std::vector<nlohmann::json> out;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    if (in.eof()) break;  // no newline yet: the writer is not done with it
    out.push_back(nlohmann::json::parse(line));
  }
  return out;
}

/// Events of `type` in a run directory's event log.
inline std::vector<nlohmann::json> events_of(const std::string& run_dir, const std::string& type) {
  std::vector<nlohmann::json> out;
  for (auto& e : read_jsonl(run_dir + "/events.jsonl")) {
    if (e["event"] == type) out.push_back(e);
  }
  return out;
}

/// Waits (bounded) for the first event of `type` in a run directory's event log; null if none
/// came within `limit`.
inline nlohmann::json wait_for_event(const std::string& run_dir, const std::string& type,
                                     std::chrono::milliseconds limit = std::chrono::seconds(30)) {
  std::vector<nlohmann::json> found;
  wait_until([&] { return !(found = events_of(run_dir, type)).empty(); }, limit);
  return found.empty() ? nlohmann::json() : found.front();
}

/// The test hold (TROUPE_TEST_HOLD, docs/testing.md) of the processes started with env(): while
/// it is on, their inference engines, training steps and faulty stages in mode hold or hang wait
/// after the units of work it allows. It is how a test keeps work in flight for as long as it
/// needs, on any machine, instead of sizing a workload to be "long enough".
class test_hold {
 public:
  explicit test_hold(const temp_dir& dir) : path_(dir.file("hold")) {}
  ~test_hold() { release(); }

  /// The variable to start a process with.
  [[nodiscard]] std::string env() const { return "TROUPE_TEST_HOLD=" + path_; }
  /// Holds every paced loop after `units` units of work (counted from its start).
  void hold(int64_t units = 0) const { std::ofstream(path_) << units << '\n'; }
  /// Lets them all go on.
  void release() const { std::remove(path_.c_str()); }

  /// Releases the hold when it goes out of scope. Declared after the held work's futures, it
  /// lets that work finish before they are waited for, also when an assertion ends a test early.
  struct release_guard {
    const test_hold* hold;
    ~release_guard() { hold->release(); }
  };
  [[nodiscard]] release_guard release_at_exit() const { return {this}; }

 private:
  std::string path_;
};

/// `n` numbered lines "line 0" .. "line n-1".
inline std::string numbered_lines(int n) {
  std::string text;
  for (int i = 0; i < n; ++i)
    text += "line " + std::to_string(i) + " of the Quick Brown Fox\n";
  return text;
}

/// The digest the digest sink reports for these payloads in this order.
inline std::string expected_digest(const std::vector<std::string>& payloads) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (const auto& p : payloads) {
    for (unsigned char c : p)
      h = (h ^ c) * 0x100000001b3ull;
    h = (h ^ 0u) * 0x100000001b3ull;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "fnv1a64:%016llx", static_cast<unsigned long long>(h));
  return buf;
}

// The metrics rows of the RL steps, without what depends on time.
inline std::vector<nlohmann::json> rl_step_rows(const std::string& run_dir) {
  std::vector<nlohmann::json> rows;
  for (auto row : read_jsonl(run_dir + "/metrics.jsonl")) {
    if (!row.contains("critic/score/mean")) continue;
    for (auto it = row.begin(); it != row.end();) {
      const std::string& key = it.key();
      const bool timed =
          key.rfind("timing_s/", 0) == 0 || key == "perf/throughput" || key == "perf/time_per_step";
      it = timed ? row.erase(it) : std::next(it);
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

}  // namespace troupe::testing

// The serving app under load, over HTTP: `troupe launch configs/serve_tiny.yaml` with one
// inference worker (fresh weights of the tiny GPT, its context raised to 512), N concurrent
// clients streaming completions of mixed prompt (8-64 bytes) and output lengths: long-tailed as
// in chat traffic (`exponential`: mean 48 tokens, 4-384; the default) or `uniform` (16-96). The
// same engine in static-batching mode (serve.engine.batching: static) is the baseline, in the
// same run. Reports output tokens/s (target: continuous >= 3x static at equal concurrency), time
// to first token and inter-token latency (p50 and p99).
//
// With --shared-prefix N every prompt is one N-byte system prompt and a short question of its
// own, each answered in 8 tokens, and the baseline is the same continuous engine without prefix
// caching (serve.engine.prefix_caching: false): TTFT p50 with the cache, target <= 0.2x without
// (the model's context raised to hold the prompt).
//
// With --llama-cpp, troupe serve against llama.cpp on the same Llama model, prompts and precision
// (f32, and int8 against Q8_0): serve_llama_cpp.cpp.
//
//   serve_bench [--clients N] [--requests M] [--lengths exponential|uniform]
//               [--shared-prefix N] [--device auto|cpu|cuda] [--troupe PATH] [--config PATH]
//   serve_bench --llama-cpp [--clients N] [--max-tokens T] [--work-dir DIR] [--troupe PATH]
//
// --troupe and --config default to this build's binary and configs/serve_tiny.yaml (give them
// where the build tree is elsewhere, as on the device machine).

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench/bench_report.hpp"
#include "bench/serve_llama_cpp.hpp"
#include "bench/serve_load.hpp"
#include "httplib.h"

namespace {

using troupe::bench::load_result;
using troupe::bench::percentile;
using troupe::bench::run_load;

// Output tokens of request `i`: a deterministic spread (golden-ratio points) over the
// distribution, so that both modes get the same requests.
int output_length(int i, bool exponential) {
  const double u = std::fmod((i + 0.5) * 0.6180339887498949, 1.0);
  if (!exponential) return 16 + static_cast<int>(u * 81);
  return std::clamp(static_cast<int>(std::lround(-48.0 * std::log(1.0 - u))), 4, 384);
}

struct server_settings {
  std::string troupe = TROUPE_BINARY;
  std::string config = TROUPE_SOURCE_DIR "/configs/serve_tiny.yaml";
  std::string device = "auto";
  std::string run_dir;
  int shared_prefix = 0;  // bytes of system prompt every request starts with; 0: none
};

// The shared system prompt: varied bytes, the same for every request.
std::string system_prompt(int bytes) {
  std::string s;
  for (int i = 0; i < bytes; ++i)
    s.push_back(static_cast<char>('a' + (i * 7 + i / 26) % 26));
  return s;
}

// Starts the serve job on `port` in `mode` (continuous or static batching; with a shared
// prefix, caching or not); its pid, or -1.
pid_t start_server(int port, const std::string& mode, const server_settings& s) {
  const pid_t pid = fork();
  if (pid == 0) {
    // The job's own output (progress, summary line) is not the benchmark's.
    const int null_fd = open("/dev/null", O_WRONLY);
    dup2(null_fd, STDOUT_FILENO);
    dup2(null_fd, STDERR_FILENO);
    std::vector<std::string> args = {
        s.troupe,
        "launch",
        s.config,
        "--run-dir",
        s.run_dir,
        "--set",
        "serve.port=" + std::to_string(port),
        "--set",
        "serve.engine.device=" + s.device,
        "--set",
        "cluster.local_workers=1",
        "--set",
        "serve.max_queue=4096",
        "--set",
        "model={vocab: 256, ctx: " + std::to_string(std::max(512, s.shared_prefix + 128)) +
            ", layers: 4, dim: 128, heads: 4}",
        "--set"};
    if (s.shared_prefix > 0) {
      // Blocks for every client's whole prompt, so that the baseline is not also preempted.
      args.push_back("serve.engine.prefix_caching=" +
                     std::string(mode == "cached" ? "true" : "false"));
      args.insert(args.end(), {"--set", "serve.engine.kv_blocks=" +
                                            std::to_string(64 * (s.shared_prefix / 16 + 8))});
    } else {
      args.push_back("serve.engine.batching=" + mode);
    }
    std::vector<char*> argv;
    for (auto& a : args)
      argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(s.troupe.c_str(), argv.data());
    _exit(127);
  }
  httplib::Client probe("127.0.0.1", port);
  for (int i = 0; i < 300; ++i) {
    if (auto res = probe.Get("/health"); res && res->status == 200) return pid;
    if (waitpid(pid, nullptr, WNOHANG) == pid) return -1;  // the job failed (its run dir says why)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
  return -1;
}

// The completions of the default and --shared-prefix loads: mixed prompt and output lengths, or
// the shared system prompt and a question of each request's own answered in 8 tokens.
load_result run_mixed_load(int port, int clients, int requests, bool exponential,
                           int shared_prefix) {
  const std::string system = system_prompt(shared_prefix);
  const auto tokens = [&](int i) { return shared_prefix > 0 ? 8 : output_length(i, exponential); };
  return run_load(
      port, clients, requests,
      [&](int i) {
        const int prompt = 8 + (i * 37) % 57;
        const std::string text = shared_prefix > 0 ? system + " Q" + std::to_string(i) + "?"
                                                   : std::string(prompt, 'a' + i % 26);
        // no stop strings, and prompt + output fit the context: every request says max_tokens
        return "{\"model\": \"troupe-tiny\", \"prompt\": \"" + text +
               "\", \"stream\": true, \"max_tokens\": " + std::to_string(tokens(i)) +
               ", \"seed\": " + std::to_string(i + 1) + "}";
      },
      tokens);
}

}  // namespace

int main(int argc, char** argv) {
  using namespace troupe::bench;
  int clients = 16, requests = 96;
  std::string lengths = "exponential";
  server_settings server_with;
  bool llama_cpp = false;
  int max_tokens = 64;
  std::string work_dir;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--llama-cpp") {
      llama_cpp = true;
    } else if (a == "--work-dir" && i + 1 < argc) {
      work_dir = argv[++i];
    } else if (a == "--max-tokens" && i + 1 < argc) {
      max_tokens = std::stoi(argv[++i]);
    } else if (a == "--clients" && i + 1 < argc) {
      clients = std::stoi(argv[++i]);
    } else if (a == "--requests" && i + 1 < argc) {
      requests = std::stoi(argv[++i]);
    } else if (a == "--lengths" && i + 1 < argc &&
               (std::string(argv[i + 1]) == "exponential" ||
                std::string(argv[i + 1]) == "uniform")) {
      lengths = argv[++i];
    } else if (a == "--shared-prefix" && i + 1 < argc) {
      server_with.shared_prefix = std::stoi(argv[++i]);
    } else if (a == "--device" && i + 1 < argc &&
               (std::string(argv[i + 1]) == "auto" || std::string(argv[i + 1]) == "cpu" ||
                std::string(argv[i + 1]) == "cuda")) {
      server_with.device = argv[++i];
    } else if (a == "--troupe" && i + 1 < argc) {
      server_with.troupe = argv[++i];
    } else if (a == "--config" && i + 1 < argc) {
      server_with.config = argv[++i];
    } else {
      return unknown_argument("serve_bench", a);
    }
  }
  if (llama_cpp) {
    return compare_with_llama_cpp({.troupe = server_with.troupe,
                                   .source_dir = TROUPE_SOURCE_DIR,
                                   .clients = clients,
                                   .requests = 2 * clients,
                                   .max_tokens = max_tokens,
                                   .work_dir = work_dir});
  }
  load_result modes[2];
  const bool prefix = server_with.shared_prefix > 0;
  const char* names[2] = {prefix ? "cached" : "continuous", prefix ? "uncached" : "static"};
  for (int m = 0; m < 2; ++m) {
    const int port = 20000 + static_cast<int>(getpid() % 20000) + m;
    server_with.run_dir = "/tmp/serve_bench." + std::to_string(getpid()) + "." + names[m];
    const pid_t server = start_server(port, names[m], server_with);
    if (server < 0) {
      std::fprintf(stderr, "serve_bench: the %s server did not start; see %s/events.jsonl\n",
                   names[m], server_with.run_dir.c_str());
      return 1;
    }
    const bool exponential = lengths == "exponential";
    run_mixed_load(port, clients, std::max(clients, requests / 8), exponential,
                   server_with.shared_prefix);  // warm-up
    modes[m] = run_mixed_load(port, clients, requests, exponential, server_with.shared_prefix);
    kill(server, SIGTERM);
    waitpid(server, nullptr, 0);
    std::error_code ignored;
    std::filesystem::remove_all(server_with.run_dir, ignored);
  }
  if (prefix) {
    const nlohmann::json extra = {{"device", server_with.device},
                                  {"clients", clients},
                                  {"requests", requests},
                                  {"shared_prefix_tokens", server_with.shared_prefix},
                                  {"output_tokens", 8}};
    for (double p : {0.5, 0.99}) {
      const std::string q = p == 0.5 ? "p50" : "p99";
      report("serve_bench", "shared_prefix_ttft_" + q, {percentile(modes[0].ttft_ms, p)}, "ms",
             "the same engine without prefix caching", {percentile(modes[1].ttft_ms, p)},
             better::lower, extra);
    }
    report("serve_bench", "shared_prefix_output_tokens_per_s", {modes[0].tokens_per_s}, "tokens/s",
           "the same engine without prefix caching", {modes[1].tokens_per_s}, better::higher,
           extra);
    return 0;
  }
  double mean_output = 0;
  for (int i = 0; i < requests; ++i)
    mean_output += output_length(i, lengths == "exponential");
  const nlohmann::json extra = {{"device", server_with.device},
                                {"clients", clients},
                                {"requests", requests},
                                {"output_lengths", lengths},
                                {"mean_output_tokens", mean_output / requests}};
  report("serve_bench", "output_tokens_per_s", {modes[0].tokens_per_s}, "tokens/s",
         "the same engine with static batching", {modes[1].tokens_per_s}, better::higher, extra);
  for (double p : {0.5, 0.99}) {
    const std::string q = p == 0.5 ? "p50" : "p99";
    report("serve_bench", "ttft_" + q, {percentile(modes[0].ttft_ms, p)}, "ms", "static batching",
           {percentile(modes[1].ttft_ms, p)}, better::lower, extra);
    report("serve_bench", "inter_token_latency_" + q, {percentile(modes[0].itl_ms, p)}, "ms",
           "static batching", {percentile(modes[1].itl_ms, p)}, better::lower, extra);
  }
  return 0;
}

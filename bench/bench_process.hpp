#pragma once

// The real `troupe` binary as a user runs it, for the benchmarks that measure whole jobs:
// starting and stopping its processes, and reading what a run directory says.

#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "nlohmann/json.hpp"

namespace troupe::bench {

using process_clock = std::chrono::steady_clock;

/// How every benchmark runs its PyTorch baseline (Debian's python3-torch): OpenMP's threads wait
/// passively between regions. With its default, active waiting, PyTorch on 2 threads took about
/// three times as long as on 1 on the 2-core development machine (bench/ref_ppo_torch.py, 1.5 s a
/// step against 0.55), its idle threads spinning on the cores the others needed; with passive
/// waiting, 0.50-0.58 s. On 1 thread the policy changes nothing.
inline const std::string torch_python = "OMP_WAIT_POLICY=passive /usr/bin/python3 ";

/// Starts `args` (args[0] a path) with its output discarded; its pid.
inline pid_t spawn(const std::vector<std::string>& args) {
  const pid_t pid = fork();
  if (pid == 0) {
    const int null_fd = open("/dev/null", O_WRONLY);
    dup2(null_fd, STDOUT_FILENO);
    dup2(null_fd, STDERR_FILENO);
    std::vector<char*> argv;
    for (const auto& a : args)
      argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  return pid;
}

/// Runs the shell command `cmd` to its end; what it printed on stdout.
inline std::string read_command(const std::string& cmd) {
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(cmd.c_str(), "r"), pclose);
  if (!pipe) return {};
  std::string out;
  char buf[512];
  while (fgets(buf, sizeof buf, pipe.get()))
    out += buf;
  return out;
}

/// Ctrl-C, then waits for the process to end.
inline void stop(pid_t pid) {
  kill(pid, SIGINT);
  waitpid(pid, nullptr, 0);
}

/// Polls `done` every 2 ms for up to `limit`; whether it became true.
inline bool wait_until(const std::function<bool()>& done,
                       std::chrono::milliseconds limit = std::chrono::seconds(60)) {
  const auto deadline = process_clock::now() + limit;
  while (!done()) {
    if (process_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return true;
}

/// The complete lines of a JSON-lines file (a line still being written is left out).
inline std::vector<nlohmann::json> read_jsonl(const std::string& path) {
  std::vector<nlohmann::json> out;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    if (in.eof()) break;
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_object()) out.push_back(std::move(j));
  }
  return out;
}

/// The first event of `type` in RUN_DIR/events.jsonl, waited for up to 60 s; null if none.
inline nlohmann::json wait_event(const std::string& run_dir, const std::string& type) {
  nlohmann::json found;
  wait_until([&] {
    for (auto& e : read_jsonl(run_dir + "/events.jsonl")) {
      if (e.value("event", "") == type) {
        found = std::move(e);
        return true;
      }
    }
    return false;
  });
  return found;
}

}  // namespace troupe::bench

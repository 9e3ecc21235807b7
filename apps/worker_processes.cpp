#include "apps/worker_processes.hpp"

#include <algorithm>
#include <cstring>
#include <thread>

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"

extern char** environ;

namespace troupe::apps {

std::string self_executable() {
  char buf[4096];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, n) : std::string("troupe");
}

absl::Status worker_processes::start(int count, const std::string& head,
                                     const cluster::cluster_credentials& credentials,
                                     const std::string& log_dir,
                                     const std::vector<std::string>& plugin_dirs) {
  const std::string exe = self_executable();
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    if (std::strncmp(*e, "TROUPE_CLUSTER_TOKEN=", 21) != 0 &&
        std::strncmp(*e, "TROUPE_KEYS=", 12) != 0) {
      env.emplace_back(*e);
    }
  }
  env.push_back("TROUPE_CLUSTER_TOKEN=" + credentials.token);
  if (credentials.curve) env.push_back("TROUPE_KEYS=" + credentials.keys_dir);
  const pid_t parent = getpid();
  // The workers share this machine's cores, and say so: a role that sizes its threads by its
  // worker's cores (an elastic trainer) takes its share.
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency() / std::max(1, count));
  for (int i = 0; i < count; ++i) {
    std::vector<std::string> args = {exe,  "worker",      "--join",
                                     head, "--resources", absl::StrCat("cores=", cores)};
    for (const auto& d : plugin_dirs) {
      args.push_back("--plugin-dir");
      args.push_back(d);
    }
    const std::string log = absl::StrCat(log_dir, "/worker-", i + 1, ".log");
    const pid_t pid = fork();
    if (pid < 0) return absl::UnavailableError(absl::StrCat("fork failed: ", std::strerror(errno)));
    if (pid == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != parent) _exit(1);  // the parent died before prctl took effect
      // Out of the terminal's process group: Ctrl-C reaches the launcher alone, which stops
      // the job in order (a server drains its requests on these workers first).
      setpgid(0, 0);
      const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
      if (fd >= 0) {
        dup2(fd, STDOUT_FILENO);
        dup2(fd, STDERR_FILENO);
      }
      std::vector<char*> argv, envp;
      for (auto& a : args)
        argv.push_back(a.data());
      argv.push_back(nullptr);
      for (auto& v : env)
        envp.push_back(v.data());
      envp.push_back(nullptr);
      execve(exe.c_str(), argv.data(), envp.data());
      std::fprintf(stderr, "cannot start %s: %s\n", exe.c_str(), std::strerror(errno));
      _exit(127);
    }
    pids_.push_back(pid);
  }
  return absl::OkStatus();
}

void worker_processes::reap(std::chrono::milliseconds grace) {
  auto deadline = std::chrono::steady_clock::now() + grace;
  bool terminated = false;
  while (!pids_.empty()) {
    std::erase_if(pids_, [](pid_t pid) { return waitpid(pid, nullptr, WNOHANG) == pid; });
    if (pids_.empty()) break;
    if (std::chrono::steady_clock::now() > deadline) {
      if (terminated) {
        for (pid_t pid : pids_)
          kill(pid, SIGKILL);
        for (pid_t pid : pids_)
          waitpid(pid, nullptr, 0);
        pids_.clear();
        break;
      }
      for (pid_t pid : pids_)
        kill(pid, SIGTERM);
      terminated = true;
      deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

worker_processes::~worker_processes() {
  reap(std::chrono::milliseconds(0));
}

}  // namespace troupe::apps

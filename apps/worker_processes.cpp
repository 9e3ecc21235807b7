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

std::vector<std::string> environment_with(const std::vector<std::string>& set) {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    const char* eq = std::strchr(*e, '=');
    const size_t name = eq == nullptr ? std::strlen(*e) : static_cast<size_t>(eq - *e) + 1;
    const bool replaced = std::any_of(set.begin(), set.end(), [&](const std::string& v) {
      return v.compare(0, name, *e, name) == 0;
    });
    if (!replaced) env.emplace_back(*e);
  }
  env.insert(env.end(), set.begin(), set.end());
  return env;
}

absl::StatusOr<pid_t> start_child(std::vector<std::string> args, std::vector<std::string> env,
                                  const std::string& log, bool append) {
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) return absl::UnavailableError(absl::StrCat("fork failed: ", std::strerror(errno)));
  if (pid > 0) return pid;
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) _exit(1);  // the parent died before prctl took effect
  // Out of the terminal's process group: Ctrl-C reaches the launcher alone, which stops the job
  // in order (a server drains its requests on the workers first).
  setpgid(0, 0);
  const int fd =
      open(log.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | (append ? O_APPEND : O_TRUNC), 0644);
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
  execve(argv[0], argv.data(), envp.data());
  std::fprintf(stderr, "cannot start %s: %s\n", argv[0], std::strerror(errno));
  _exit(127);
}

absl::Status worker_processes::start(int count, const std::string& head,
                                     const cluster::cluster_credentials& credentials,
                                     const std::string& log_dir,
                                     const std::vector<std::string>& plugin_dirs) {
  const std::string exe = self_executable();
  std::vector<std::string> secrets = {"TROUPE_CLUSTER_TOKEN=" + credentials.token};
  if (credentials.curve) secrets.push_back("TROUPE_KEYS=" + credentials.keys_dir);
  const std::vector<std::string> env = environment_with(secrets);
  // The workers share this machine's cores, and say so: a role that sizes its threads by its
  // worker's cores (an elastic trainer) takes its share.
  const int running = static_cast<int>(pids_.size()) + count;
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency() / std::max(1, running));
  for (int i = 0; i < count; ++i) {
    std::vector<std::string> args = {exe,  "worker",      "--join",
                                     head, "--resources", absl::StrCat("cores=", cores)};
    for (const auto& d : plugin_dirs) {
      args.push_back("--plugin-dir");
      args.push_back(d);
    }
    const std::string log = absl::StrCat(log_dir, "/worker-", ++started_, ".log");
    auto pid = start_child(std::move(args), env, log, false);
    if (!pid.ok()) return pid.status();
    pids_.push_back(*pid);
  }
  return absl::OkStatus();
}

int worker_processes::reap_exited() {
  const size_t before = pids_.size();
  std::erase_if(pids_, [](pid_t pid) { return waitpid(pid, nullptr, WNOHANG) == pid; });
  return static_cast<int>(before - pids_.size());
}

void worker_processes::reap(std::chrono::milliseconds grace) {
  auto deadline = std::chrono::steady_clock::now() + grace;
  bool terminated = false;
  while (!pids_.empty()) {
    reap_exited();
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

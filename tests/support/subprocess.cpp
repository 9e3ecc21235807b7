#include "tests/support/subprocess.hpp"

#include <cstring>
#include <stdexcept>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

namespace troupe::testing {

subprocess::subprocess(const std::vector<std::string>& argv, const std::vector<std::string>& env) {
  int out[2], err[2];
  if (pipe(out) != 0 || pipe(err) != 0) throw std::runtime_error("pipe failed");
  std::vector<std::string> envs;
  for (char** e = environ; *e != nullptr; ++e)
    envs.emplace_back(*e);
  envs.insert(envs.end(), env.begin(), env.end());
  pid_ = fork();
  if (pid_ < 0) throw std::runtime_error("fork failed");
  if (pid_ == 0) {
    setpgid(0, 0);  // its own process group, so a kill reaches its children too
    dup2(out[1], STDOUT_FILENO);
    dup2(err[1], STDERR_FILENO);
    close(out[0]);
    close(err[0]);
    std::vector<char*> args, vars;
    for (const auto& a : argv)
      args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    for (const auto& v : envs)
      vars.push_back(const_cast<char*>(v.c_str()));
    vars.push_back(nullptr);
    execve(args[0], args.data(), vars.data());
    std::fprintf(stderr, "execve %s: %s\n", args[0], std::strerror(errno));
    _exit(127);
  }
  close(out[1]);
  close(err[1]);
  out_fd_ = out[0];
  err_fd_ = err[0];
}

subprocess::~subprocess() {
  if (!reaped_) {
    kill(-pid_, SIGKILL);
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  if (out_fd_ >= 0) close(out_fd_);
  if (err_fd_ >= 0) close(err_fd_);
}

void subprocess::signal(int sig) const {
  if (!reaped_) kill(pid_, sig);  // a reaped pid may belong to another process by now
}

// Reads whatever is available within `slice`; false once both pipes are closed.
bool subprocess::pump(std::chrono::milliseconds slice) {
  pollfd fds[2] = {{out_fd_, POLLIN, 0}, {err_fd_, POLLIN, 0}};
  const int n = (out_fd_ >= 0) + (err_fd_ >= 0);
  if (n == 0) return false;
  pollfd* first = out_fd_ >= 0 ? &fds[0] : &fds[1];
  if (poll(first, n, static_cast<int>(slice.count())) <= 0) return true;
  char buf[65536];
  for (pollfd* p = first; p < first + n; ++p) {
    if (!(p->revents & (POLLIN | POLLHUP))) continue;
    const ssize_t got = read(p->fd, buf, sizeof buf);
    std::string& sink = p->fd == out_fd_ ? result_.out : result_.err;
    if (got > 0) {
      sink.append(buf, got);
    } else {
      close(p->fd);
      (p->fd == out_fd_ ? out_fd_ : err_fd_) = -1;
    }
  }
  return out_fd_ >= 0 || err_fd_ >= 0;
}

process_result subprocess::wait(std::chrono::milliseconds timeout) {
  if (reaped_) return result_;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (pump(std::chrono::milliseconds(50))) {
    if (std::chrono::steady_clock::now() > deadline) {
      result_.timed_out = true;
      kill(-pid_, SIGKILL);
      kill(pid_, SIGKILL);
      break;
    }
  }
  int status = 0;
  waitpid(pid_, &status, 0);
  reaped_ = true;
  result_.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return result_;
}

bool subprocess::wait_for_stderr(const std::string& text, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (result_.err.find(text) == std::string::npos) {
    if (std::chrono::steady_clock::now() > deadline || !pump(std::chrono::milliseconds(50))) {
      return result_.err.find(text) != std::string::npos;
    }
  }
  return true;
}

int free_port() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof addr;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    close(fd);
    throw std::runtime_error("no free port");
  }
  close(fd);
  return ntohs(addr.sin_port);
}

process_result run(const std::vector<std::string>& argv, std::chrono::milliseconds timeout,
                   const std::vector<std::string>& env) {
  subprocess p(argv, env);
  return p.wait(timeout);
}

}  // namespace troupe::testing

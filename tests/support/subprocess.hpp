#pragma once

#include <chrono>
#include <string>
#include <vector>

#include <sys/types.h>

namespace troupe::testing {

/// What a finished child process left behind.
struct process_result {
  int exit_code = -1;  // the exit status, or 128 + signal number
  bool timed_out = false;
  std::string out;
  std::string err;
};

/// A child process with captured stdout and stderr. Every wait is bounded; the destructor kills
/// and reaps a child that is still running, so no test leaves processes behind.
class subprocess {
 public:
  /// Starts `argv` (argv[0] is a path) with `env` added to the environment.
  explicit subprocess(const std::vector<std::string>& argv,
                      const std::vector<std::string>& env = {});
  ~subprocess();
  subprocess(const subprocess&) = delete;
  subprocess& operator=(const subprocess&) = delete;

  [[nodiscard]] pid_t pid() const { return pid_; }

  /// Sends `signal` to the child, unless it has been waited for.
  void signal(int signal) const;

  /// Reads output until the child exits or `timeout` passes; on timeout the child is killed.
  /// Once the child has been waited for, returns the same result again.
  process_result wait(std::chrono::milliseconds timeout);

  /// Reads output until stderr contains `text` or `timeout` passes; true if it appeared.
  bool wait_for_stderr(const std::string& text, std::chrono::milliseconds timeout);

  /// What the child wrote to stderr so far (as far as waits have read it).
  [[nodiscard]] const std::string& stderr_so_far() const { return result_.err; }

 private:
  bool pump(std::chrono::milliseconds slice);

  pid_t pid_ = -1;
  int out_fd_ = -1;
  int err_fd_ = -1;
  bool reaped_ = false;
  process_result result_;
};

/// A TCP port on 127.0.0.1 that was free a moment ago.
int free_port();

/// Runs `argv` to completion (bounded by `timeout`).
process_result run(const std::vector<std::string>& argv,
                   std::chrono::milliseconds timeout = std::chrono::seconds(60),
                   const std::vector<std::string>& env = {});

}  // namespace troupe::testing

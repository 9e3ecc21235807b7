#pragma once

// What Linux says a process or thread is doing, from /proc: tests use it to know, instead of
// guess, that a process is stopped or a thread is asleep in a wait.

#include <fstream>
#include <iterator>
#include <string>

#include <sys/types.h>

namespace troupe::testing {

/// The state letter of /proc/PID/stat, or of thread TID of PID (R running, S sleeping, T
/// stopped, ...); 0 when it cannot be read.
inline char proc_state(pid_t pid, pid_t tid = 0) {
  const std::string path = "/proc/" + std::to_string(pid) +
                           (tid > 0 ? "/task/" + std::to_string(tid) : std::string()) + "/stat";
  std::ifstream in(path);
  const std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t paren = stat.rfind(')');  // the command name may hold spaces and parentheses
  return paren != std::string::npos && paren + 2 < stat.size() ? stat[paren + 2] : 0;
}

}  // namespace troupe::testing

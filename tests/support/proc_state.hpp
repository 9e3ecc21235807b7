#pragma once

// What Linux says a process or thread is doing, from /proc: tests use it to know, instead of
// guess, that a process is stopped, a thread is asleep in a wait, or bytes wait in a socket.

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <sstream>
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

/// The most bytes waiting unread in one of PID's established TCP connections (rx_queue of
/// /proc/PID/net/tcp and tcp6, for the sockets among its descriptors); 0 when there are none.
inline int64_t most_unread_tcp_bytes(pid_t pid) {
  const std::string proc = "/proc/" + std::to_string(pid);
  std::set<std::string> inodes;
  std::error_code ec;
  for (const auto& fd : std::filesystem::directory_iterator(proc + "/fd", ec)) {
    const std::string target = std::filesystem::read_symlink(fd.path(), ec).string();
    if (target.starts_with("socket:[")) inodes.insert(target.substr(8, target.size() - 9));
  }
  int64_t most = 0;
  for (const char* table : {"/net/tcp", "/net/tcp6"}) {
    std::ifstream in(proc + table);
    std::string line;
    std::getline(in, line);  // the header
    while (std::getline(in, line)) {
      std::istringstream fields(line);
      std::string slot, local, remote, state, queues, timer, retransmits, uid, timeout, inode;
      fields >> slot >> local >> remote >> state >> queues >> timer >> retransmits >> uid >>
          timeout >> inode;
      if (state != "01" || !inodes.contains(inode)) continue;  // 01: established
      most = std::max<int64_t>(most, std::stoll(queues.substr(queues.find(':') + 1), nullptr, 16));
    }
  }
  return most;
}

/// The threads of process PID (0: this one).
inline int thread_count(pid_t pid = 0) {
  const std::string task =
      (pid > 0 ? "/proc/" + std::to_string(pid) : std::string("/proc/self")) + "/task";
  int n = 0;
  std::error_code ec;
  for (auto it = std::filesystem::directory_iterator(task, ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    ++n;
  }
  return n;
}

/// The resident memory of process PID (0: this one) in KiB (VmRSS); 0 when it cannot be read.
inline int64_t resident_kib(pid_t pid = 0) {
  std::ifstream status((pid > 0 ? "/proc/" + std::to_string(pid) : std::string("/proc/self")) +
                       "/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stoll(line.substr(6));
  }
  return 0;
}

}  // namespace troupe::testing

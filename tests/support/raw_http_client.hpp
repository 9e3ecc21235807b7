#pragma once

// An HTTP client on a raw socket, for the tests that need one that sends half a request, trickles,
// never reads, or holds thousands of connections.

#include <chrono>
#include <cstdint>
#include <string>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

namespace troupe::testing {

class raw_http_client {
 public:
  explicit raw_http_client(int port) : fd_(::socket(AF_INET, SOCK_STREAM, 0)) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0;
  }
  ~raw_http_client() { ::close(fd_); }
  [[nodiscard]] bool connected() const { return connected_; }
  [[nodiscard]] int fd() const { return fd_; }

  bool send(const std::string& bytes) {
    return ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL) ==
           static_cast<ssize_t>(bytes.size());
  }
  // Whether the server answers within `limit`.
  bool answered(std::chrono::milliseconds limit) {
    pollfd p{fd_, POLLIN, 0};
    return ::poll(&p, 1, static_cast<int>(limit.count())) > 0;
  }
  // Everything the server sends until it closes (at most 30 s); "" when it never answers.
  std::string read_to_end() { return read_until(""); }
  // What the server sends until `marker` has come, or (empty) until it closes; at most 30 s.
  std::string read_until(const std::string& marker) {
    std::string got;
    char buf[4096];
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while ((marker.empty() || got.find(marker) == std::string::npos) &&
           std::chrono::steady_clock::now() < until) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 100) <= 0) continue;
      const ssize_t n = ::recv(fd_, buf, sizeof(buf), 0);
      if (n <= 0) break;
      got.append(buf, static_cast<size_t>(n));
    }
    return got;
  }
  // The status of the answer read to its end.
  int status() {
    const std::string r = read_to_end();
    return r.rfind("HTTP/1.1 ", 0) == 0 ? std::stoi(r.substr(9, 3)) : -1;
  }

 private:
  int fd_;
  bool connected_ = false;
};

}  // namespace troupe::testing

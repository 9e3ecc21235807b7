#include "runtime/http/http_connection.hpp"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>

#include <arpa/inet.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>

namespace troupe::http {
namespace {

using clock = http_connection::clock;

void address_of(int fd, int (*query)(int, sockaddr*, socklen_t*), std::string& ip, int& port) {
  sockaddr_storage a{};
  socklen_t len = sizeof(a);
  ip.clear();
  port = 0;
  if (query(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) return;
  char text[INET6_ADDRSTRLEN] = {};
  if (a.ss_family == AF_INET) {
    const auto& v4 = reinterpret_cast<const sockaddr_in&>(a);
    ::inet_ntop(AF_INET, &v4.sin_addr, text, sizeof(text));
    port = ntohs(v4.sin_port);
  } else if (a.ss_family == AF_INET6) {
    const auto& v6 = reinterpret_cast<const sockaddr_in6&>(a);
    ::inet_ntop(AF_INET6, &v6.sin6_addr, text, sizeof(text));
    port = ntohs(v6.sin6_port);
  }
  ip = text;
}

// What an OpenSSL call that returned `result` waits for: POLLIN, POLLOUT, or 0 (it failed).
short tls_wait(SSL* ssl, int result) {
  switch (SSL_get_error(ssl, result)) {
    case SSL_ERROR_WANT_READ:
      return POLLIN;
    case SSL_ERROR_WANT_WRITE:
      return POLLOUT;
    default:
      return 0;
  }
}

}  // namespace

head_scan scan_request_head(absl::string_view received, const http_limits& limits) {
  constexpr auto npos = absl::string_view::npos;
  const size_t line_end = received.find("\r\n");
  if ((line_end == npos ? received.size() : line_end) > limits.max_url_bytes) {
    return head_scan::url_too_long;
  }
  if (line_end == npos) return head_scan::incomplete;
  // Header lines one by one: each within cpp-httplib's cap, all within max_header_bytes.
  for (size_t at = line_end + 2;;) {
    const size_t end = received.find("\r\n", at);
    const size_t length = (end == npos ? received.size() : end) - at;
    if (length > httplib_header_line_max || at + length > limits.max_header_bytes) {
      return head_scan::headers_too_large;
    }
    if (end == npos) return head_scan::incomplete;
    if (length == 0) return head_scan::complete;  // the blank line that ends the head
    at = end + 2;
  }
}

clock::duration seconds(double s) {
  return std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(s));
}

bool wait_ready(int fd, short events, clock::time_point until) {
  for (;;) {
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(until - clock::now()).count();
    pollfd p{fd, events, 0};
    const int n = ::poll(&p, 1, static_cast<int>(std::max<int64_t>(left, 0)));
    if (n > 0) {
      if (events == POLLOUT) return (p.revents & POLLOUT) != 0 && (p.revents & POLLERR) == 0;
      return true;
    }
    if (n == 0 || errno != EINTR) return false;
  }
}

http_connection::http_connection(socket_t fd, const http_limits& limits, SSL_CTX* tls)
    : fd_(fd), limits_(limits) {
  ::fcntl(fd_, F_SETFL, ::fcntl(fd_, F_GETFL) | O_NONBLOCK);
  if (tls != nullptr) {
    ssl_ = SSL_new(tls);
    SSL_set_fd(ssl_, fd_);
  }
}

http_connection::~http_connection() {
  if (ssl_ != nullptr) SSL_free(ssl_);
}

bool http_connection::handshake() {
  if (ssl_ == nullptr) return true;
  const auto until = clock::now() + seconds(limits_.read_timeout_s);
  for (;;) {
    const int r = SSL_accept(ssl_);
    if (r == 1) return true;
    const short wait = tls_wait(ssl_, r);
    if (wait == 0 || !wait_ready(fd_, wait, until)) return false;
  }
}

http_connection::head http_connection::read_head(clock::time_point first_byte_by) {
  const bool buffered = !pending_.empty() || (ssl_ != nullptr && SSL_pending(ssl_) > 0);
  if (!buffered && !wait_ready(fd_, POLLIN, first_byte_by)) return head::idle;
  deadline_ = clock::now() + seconds(limits_.read_timeout_s);
  for (;;) {
    switch (scan_request_head(pending_, limits_)) {
      case head_scan::complete:
        return head::request;
      case head_scan::url_too_long:
        return head::url_too_long;
      case head_scan::headers_too_large:
        return head::headers_too_large;
      case head_scan::incomplete:
        break;
    }
    char buf[4096];
    const ssize_t n = read_some(buf, sizeof(buf), deadline_);
    if (n <= 0) return timed_out_ ? head::timed_out : head::closed;
    pending_.append(buf, static_cast<size_t>(n));
  }
}

ssize_t http_connection::read_some(char* ptr, size_t size, clock::time_point until) {
  for (;;) {
    if (ssl_ != nullptr) {
      if (SSL_pending(ssl_) == 0 && !wait_ready(fd_, POLLIN, until)) break;
      const int r = SSL_read(ssl_, ptr, static_cast<int>(std::min<size_t>(size, INT_MAX)));
      if (r > 0) return r;
      if (SSL_get_error(ssl_, r) == SSL_ERROR_ZERO_RETURN) return 0;
      const short wait = tls_wait(ssl_, r);
      if (wait == 0) return -1;
      if (wait == POLLOUT && !wait_ready(fd_, POLLOUT, until)) break;
      continue;
    }
    if (!wait_ready(fd_, POLLIN, until)) break;
    const ssize_t n = ::recv(fd_, ptr, size, 0);
    if (n >= 0 || (errno != EINTR && errno != EAGAIN)) return n;
  }
  timed_out_ = true;  // every read waits for the request's deadline
  return -1;
}

ssize_t http_connection::write_some(const char* ptr, size_t size) {
  const auto until = clock::now() + seconds(limits_.write_timeout_s);
  for (;;) {
    if (ssl_ != nullptr) {
      const int r = SSL_write(ssl_, ptr, static_cast<int>(std::min<size_t>(size, INT_MAX)));
      if (r > 0) return r;
      const short wait = tls_wait(ssl_, r);
      if (wait == 0 || !wait_ready(fd_, wait, until)) return -1;
      continue;
    }
    if (!wait_ready(fd_, POLLOUT, until)) return -1;
    const ssize_t n = ::send(fd_, ptr, size, MSG_NOSIGNAL);
    if (n >= 0 || (errno != EINTR && errno != EAGAIN)) return n;
  }
}

bool http_connection::write_all(absl::string_view bytes) {
  for (size_t sent = 0; sent < bytes.size();) {
    const ssize_t n = write_some(bytes.data() + sent, bytes.size() - sent);
    if (n <= 0) return false;
    sent += static_cast<size_t>(n);
  }
  return true;
}

void http_connection::linger() {
  if (ssl_ != nullptr) SSL_shutdown(ssl_);  // close_notify; the client's bytes are dropped raw
  ::shutdown(fd_, SHUT_WR);
  const auto until = clock::now() + std::chrono::seconds(1);
  char sink[4096];
  for (size_t drained = 0; drained < (1u << 20) && wait_ready(fd_, POLLIN, until);) {
    const ssize_t n = ::recv(fd_, sink, sizeof(sink), 0);
    if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN)) break;
    if (n > 0) drained += static_cast<size_t>(n);
  }
}

bool http_connection::is_readable() const {
  return !pending_.empty() || (ssl_ != nullptr && SSL_pending(ssl_) > 0) ||
         wait_ready(fd_, POLLIN, deadline_);
}

bool http_connection::is_writable() const {
  return wait_ready(fd_, POLLOUT, clock::now() + seconds(limits_.write_timeout_s));
}

ssize_t http_connection::read(char* ptr, size_t size) {
  if (pending_.empty()) return read_some(ptr, size, deadline_);
  const size_t n = std::min(size, pending_.size());
  std::memcpy(ptr, pending_.data(), n);
  pending_.erase(0, n);
  return static_cast<ssize_t>(n);
}

ssize_t http_connection::write(const char* ptr, size_t size) {
  return write_some(ptr, size);
}

void http_connection::get_remote_ip_and_port(std::string& ip, int& port) const {
  address_of(fd_, ::getpeername, ip, port);
}

void http_connection::get_local_ip_and_port(std::string& ip, int& port) const {
  address_of(fd_, ::getsockname, ip, port);
}

}  // namespace troupe::http

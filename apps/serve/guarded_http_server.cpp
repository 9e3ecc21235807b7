#include "apps/serve/guarded_http_server.hpp"

#include <cerrno>
#include <chrono>
#include <cstring>

#include <arpa/inet.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"

namespace troupe::apps {
namespace {

using clock = std::chrono::steady_clock;

// cpp-httplib's own cap on one header line (CPPHTTPLIB_HEADER_MAX_LENGTH, fixed in Debian's
// build); a longer line is refused here as 431 rather than reaching it as a bare 400.
constexpr size_t httplib_header_line_max = 8192;

clock::duration seconds(double s) {
  return std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(s));
}

// Waits until `fd` is ready for `events` or `until` passes; true when ready (or hung up, so that
// the next read sees the end).
bool wait_ready(int fd, short events, clock::time_point until) {
  for (;;) {
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(until - clock::now()).count();
    pollfd p{fd, events, 0};
    const int n = ::poll(&p, 1, static_cast<int>(std::max<int64_t>(left, 0)));
    if (n > 0) {
      if (events == POLLOUT) return (p.revents & POLLOUT) != 0 && (p.revents & POLLERR) == 0;
      return true;
    }
    if (n == 0) return false;
    if (errno != EINTR) return false;
  }
}

const char* reason_of(int status) {
  switch (status) {
    case 408:
      return "Request Timeout";
    case 413:
      return "Payload Too Large";
    case 414:
      return "URI Too Long";
    case 431:
      return "Request Header Fields Too Large";
    case 503:
      return "Service Unavailable";
    default:
      return "Error";
  }
}

// One connection as cpp-httplib's Stream: its bytes received but not yet consumed come first,
// every read waits no later than the current request's deadline, every write no longer than the
// write timeout.
class connection_stream final : public httplib::Stream {
 public:
  enum class head { request, idle, closed, timed_out, url_too_long, headers_too_large };

  connection_stream(socket_t fd, const http_limits& limits) : fd_(fd), limits_(limits) {}

  // Reads the next request's line and headers: its first byte must come by `first_byte_by`
  // (else `idle`), and the rest of the request within read_timeout_s of it.
  head read_head(clock::time_point first_byte_by) {
    if (pending_.empty() && !wait_ready(fd_, POLLIN, first_byte_by)) return head::idle;
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
      const ssize_t n = read_socket(buf, sizeof(buf));
      if (n <= 0) return timed_out_ ? head::timed_out : head::closed;
      pending_.append(buf, static_cast<size_t>(n));
    }
  }
  [[nodiscard]] bool timed_out() const { return timed_out_; }

  bool is_readable() const override {
    return !pending_.empty() || wait_ready(fd_, POLLIN, deadline_);
  }
  bool is_writable() const override {
    return wait_ready(fd_, POLLOUT, clock::now() + seconds(limits_.write_timeout_s));
  }
  ssize_t read(char* ptr, size_t size) override {
    if (pending_.empty()) return read_socket(ptr, size);
    const size_t n = std::min(size, pending_.size());
    std::memcpy(ptr, pending_.data(), n);
    pending_.erase(0, n);
    return static_cast<ssize_t>(n);
  }
  ssize_t write(const char* ptr, size_t size) override {
    for (;;) {
      if (!is_writable()) return -1;
      const ssize_t n = ::send(fd_, ptr, size, MSG_NOSIGNAL);
      if (n >= 0 || (errno != EINTR && errno != EAGAIN)) return n;
    }
  }
  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    address_of(::getpeername, ip, port);
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    address_of(::getsockname, ip, port);
  }
  socket_t socket() const override { return fd_; }

 private:
  ssize_t read_socket(char* ptr, size_t size) {
    for (;;) {
      if (!wait_ready(fd_, POLLIN, deadline_)) {
        timed_out_ = true;
        return -1;
      }
      const ssize_t n = ::recv(fd_, ptr, size, 0);
      if (n >= 0 || (errno != EINTR && errno != EAGAIN)) return n;
    }
  }
  void address_of(int (*query)(int, sockaddr*, socklen_t*), std::string& ip, int& port) const {
    sockaddr_storage a{};
    socklen_t len = sizeof(a);
    ip.clear();
    port = 0;
    if (query(fd_, reinterpret_cast<sockaddr*>(&a), &len) != 0) return;
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

  socket_t fd_;
  const http_limits& limits_;
  std::string pending_;
  clock::time_point deadline_ = clock::now();
  bool timed_out_ = false;
};

// The connection this thread serves, for the error handler (cpp-httplib calls it on that thread).
thread_local const connection_stream* serving = nullptr;

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

guarded_http_server::guarded_http_server(http_limits limits, refusal_body refusal)
    : limits_(limits), refusal_(std::move(refusal)) {
  const size_t threads = static_cast<size_t>(limits_.max_connections) + 8;  // 8 to refuse with
  new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  set_payload_max_length(limits_.max_body_bytes);
  set_write_timeout(std::chrono::duration<double>(limits_.write_timeout_s));
  set_keep_alive_timeout(static_cast<time_t>(limits_.keep_alive_timeout_s + 0.999));
  set_keep_alive_max_count(100);
  Server::set_error_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (res.status == 400 && serving != nullptr && serving->timed_out()) {
      res.status = 408;
      res.set_content(
          refusal_(408, absl::StrCat("the request did not arrive within ", limits_.read_timeout_s,
                                     " s (serve.http.read_timeout_s)")),
          "application/json");
    } else if (res.status == 413 && res.body.empty()) {  // cpp-httplib's own, not a route's
      res.set_content(
          refusal_(413, absl::StrCat("the request body is over ", limits_.max_body_bytes,
                                     " bytes (serve.http.max_body_bytes)")),
          "application/json");
    }
    if (route_error_handler_) route_error_handler_(req, res);
  });
}

guarded_http_server& guarded_http_server::set_error_handler(Handler handler) {
  route_error_handler_ = std::move(handler);
  return *this;
}

void guarded_http_server::refuse(socket_t sock, int status, const std::string& message) {
  const std::string body = refusal_(status, message);
  const std::string response = absl::StrCat(
      "HTTP/1.1 ", status, " ", reason_of(status),
      "\r\nContent-Type: application/json\r\nContent-Length: ", body.size(),
      "\r\nConnection: close\r\n", status == 503 ? "Retry-After: 1\r\n" : "", "\r\n", body);
  const auto until = clock::now() + seconds(limits_.write_timeout_s);
  for (size_t sent = 0; sent < response.size();) {
    if (!wait_ready(sock, POLLOUT, until)) return;
    const ssize_t n = ::send(sock, response.data() + sent, response.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno != EINTR && errno != EAGAIN) return;
    if (n > 0) sent += static_cast<size_t>(n);
  }
  // A lingering close: the client may still be sending what was refused, and closing with
  // unread bytes would reset the connection before it reads the answer. What it sends within
  // a second, up to a megabyte, is read and dropped.
  ::shutdown(sock, SHUT_WR);
  const auto linger_until = clock::now() + std::chrono::seconds(1);
  char sink[4096];
  for (size_t drained = 0; drained < (1u << 20) && wait_ready(sock, POLLIN, linger_until);) {
    const ssize_t n = ::recv(sock, sink, sizeof(sink), 0);
    if (n <= 0) break;
    drained += static_cast<size_t>(n);
  }
}

bool guarded_http_server::process_and_close_socket(socket_t sock) {
  struct on_exit {
    socket_t sock;
    ~on_exit() {
      ::shutdown(sock, SHUT_RDWR);
      ::close(sock);
    }
  } closer{sock};
  if (connections_.fetch_add(1) >= limits_.max_connections) {
    connections_.fetch_sub(1);
    refuse(sock, 503,
           absl::StrCat("the server has ", limits_.max_connections,
                        " connections open (serve.http.max_connections); retry shortly"));
    return true;
  }
  connection_stream connection(sock, limits_);
  serving = &connection;
  struct release {
    std::atomic<int>& count;
    ~release() {
      serving = nullptr;
      count.fetch_sub(1);
    }
  } released{connections_};

  auto first_byte_by = clock::now() + seconds(limits_.read_timeout_s);
  for (size_t left = keep_alive_max_count_; left > 0 && svr_sock_ != INVALID_SOCKET; --left) {
    const bool first = left == keep_alive_max_count_;
    switch (connection.read_head(first_byte_by)) {
      case connection_stream::head::request:
        break;
      case connection_stream::head::closed:
        return true;
      case connection_stream::head::idle:
        if (!first) return true;  // a kept-alive connection with nothing more to ask
        [[fallthrough]];
      case connection_stream::head::timed_out:
        refuse(sock, 408,
               absl::StrCat("the request did not arrive within ", limits_.read_timeout_s,
                            " s (serve.http.read_timeout_s)"));
        return true;
      case connection_stream::head::url_too_long:
        refuse(sock, 414,
               absl::StrCat("the request line is over ", limits_.max_url_bytes,
                            " bytes (serve.http.max_url_bytes)"));
        return true;
      case connection_stream::head::headers_too_large:
        refuse(sock, 431,
               absl::StrCat("the request headers are over ", limits_.max_header_bytes,
                            " bytes, or one is over ", httplib_header_line_max,
                            " (serve.http.max_header_bytes)"));
        return true;
    }
    bool closed = false;
    process_request(connection, left == 1, closed, nullptr);
    if (closed || connection.timed_out()) return true;
    first_byte_by = clock::now() + seconds(limits_.keep_alive_timeout_s);
  }
  return true;
}

}  // namespace troupe::apps

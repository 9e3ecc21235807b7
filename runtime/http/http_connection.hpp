#pragma once

#include <chrono>
#include <string>

#include <openssl/ssl.h>

#include "absl/strings/string_view.h"
#include "httplib.h"
#include "runtime/http/http_limits.hpp"

namespace troupe::http {

/// cpp-httplib's own cap on one header line (CPPHTTPLIB_HEADER_MAX_LENGTH, fixed in Debian's
/// build); a longer line is refused as 431 rather than reaching it as a bare 400.
inline constexpr size_t httplib_header_line_max = 8192;

/// Where a request's head stands in the bytes received so far.
enum class head_scan { incomplete, complete, url_too_long, headers_too_large };

/// Scans `received`, the start of a connection's next request, against `limits`: complete once
/// the blank line after the headers has come.
[[nodiscard]] head_scan scan_request_head(absl::string_view received, const http_limits& limits);

/// One accepted HTTP connection, over TCP or TLS, as cpp-httplib's Stream (guarded_http_server).
/// The bytes received but not yet consumed come first; every read waits no later than the
/// current request's deadline, every write no longer than the write timeout. The socket is
/// non-blocking: each wait is a poll, so no client holds the thread past its deadline.
class http_connection final : public httplib::Stream {
 public:
  using clock = std::chrono::steady_clock;
  enum class head { request, idle, closed, timed_out, url_too_long, headers_too_large };

  /// `tls`: the server's TLS context, or null for plain HTTP. Owns neither the socket nor it.
  http_connection(socket_t fd, const http_limits& limits, SSL_CTX* tls);
  ~http_connection() override;
  http_connection(const http_connection&) = delete;
  http_connection& operator=(const http_connection&) = delete;

  /// The TLS handshake, within read_timeout_s (true at once without TLS); false when it failed.
  [[nodiscard]] bool handshake();

  /// Reads the next request's line and headers: its first byte must come by `first_byte_by`
  /// (else `idle`), and the rest of the request within read_timeout_s of it.
  [[nodiscard]] head read_head(clock::time_point first_byte_by);
  /// Whether a read ran past the request's deadline.
  [[nodiscard]] bool timed_out() const { return timed_out_; }

  /// Writes all of `bytes`; false when the client stopped taking them.
  bool write_all(absl::string_view bytes);
  /// Ends sending, then reads and drops what the client still sends (a second, a megabyte at
  /// most), so that closing does not reset the connection before it read the answer.
  void linger();

  bool is_readable() const override;
  bool is_writable() const override;
  ssize_t read(char* ptr, size_t size) override;
  ssize_t write(const char* ptr, size_t size) override;
  void get_remote_ip_and_port(std::string& ip, int& port) const override;
  void get_local_ip_and_port(std::string& ip, int& port) const override;
  socket_t socket() const override { return fd_; }

 private:
  ssize_t read_some(char* ptr, size_t size, clock::time_point until);
  ssize_t write_some(const char* ptr, size_t size);

  socket_t fd_;
  const http_limits& limits_;
  SSL* ssl_ = nullptr;
  std::string pending_;
  clock::time_point deadline_ = clock::now();
  bool timed_out_ = false;
};

/// Waits until `fd` is ready for `events` (POLLIN or POLLOUT) or `until` passes; true when ready
/// (or hung up, so that the next read sees the end).
[[nodiscard]] bool wait_ready(int fd, short events, http_connection::clock::time_point until);

/// `s` seconds as the clock's duration.
[[nodiscard]] http_connection::clock::duration seconds(double s);

}  // namespace troupe::http

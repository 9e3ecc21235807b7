#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "httplib.h"
#include "runtime/http/http_connection.hpp"
#include "runtime/http/http_limits.hpp"

namespace troupe::http {

/// cpp-httplib's server, with the limits it lacks enforced on each connection before it parses:
/// it caps body size itself, but keeps a thread per connection for as long as a client trickles
/// bytes (slowloris), queues connections without bound, and its URL and header caps are fixed
/// at build time. Here every connection (http_connection: TCP, or TLS after use_tls) is admitted
/// against max_connections, its request heads are read under a deadline and the size limits,
/// and only then parsed by cpp-httplib.
class guarded_http_server : public httplib::Server {
 public:
  /// `refusal` gives the body of a refusal the server writes itself (status, message); it may
  /// count it too. It is called on the connection's thread.
  using refusal_body = std::function<std::string(int status, const std::string& message)>;

  guarded_http_server(http_limits limits, refusal_body refusal);

  /// The route handlers' error handler; a request cut off by the read deadline reaches it (and
  /// the client) as 408, not cpp-httplib's 400.
  guarded_http_server& set_error_handler(Handler handler);

  /// Serves HTTPS from now on, with the PEM certificate chain `cert` and private key `key`
  /// (which its group and others must not be able to read). TLS 1.2 at least.
  [[nodiscard]] absl::Status use_tls(const std::string& cert, const std::string& key);

  /// Listens on `host:port` (0: a free port) with the system's maximum backlog and serves on a
  /// thread of its own until destroyed; the port it listens on.
  [[nodiscard]] absl::StatusOr<int> start(const std::string& host, int port);

  /// Stops serving and joins the thread `start` began.
  ~guarded_http_server() override;

  /// Connections being served now.
  [[nodiscard]] int connections() const { return connections_.load(); }

 private:
  bool process_and_close_socket(socket_t sock) override;
  void refuse(http_connection& connection, int status, const std::string& message);

  http_limits limits_;
  refusal_body refusal_;
  Handler route_error_handler_;
  std::shared_ptr<SSL_CTX> tls_;  // null: plain HTTP
  std::atomic<int> connections_{0};
  std::thread thread_;  // listening, once started
};

}  // namespace troupe::http

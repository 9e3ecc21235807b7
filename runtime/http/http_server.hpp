#pragma once

#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "httplib.h"
#include "runtime/http/http_limits.hpp"
#include "runtime/http/reply_source.hpp"

namespace troupe::http {

/// An HTTP/1.1 server on one event loop (epoll): every connection, idle, reading, or streaming a
/// reply, is a few kilobytes of state rather than a thread, so thousands of clients cost little.
/// The loop reads each request under `http_limits` (sizes, the read deadline, the number of
/// connections: each answered with its status, see http_limits), then runs its route on a small
/// pool of handler threads, so that a route may parse or render for a while without holding the
/// loop. A route answers whole (an httplib::Response) or later through a reply_source, which the
/// loop pulls as the client reads: a client that stops reading holds at most
/// `reply_buffer_bytes` of its reply, and is cut off after `write_timeout_s`. Connections are
/// kept alive (up to 100 requests each). Requests and responses are cpp-httplib's types.
class http_server {
 public:
  /// A route that answers whole: fills `res` (status 200 unless set).
  using handler = std::function<void(const httplib::Request&, httplib::Response&)>;
  /// A route that may answer later: returns a source, or fills `res` and returns null.
  using deferred_handler =
      std::function<std::shared_ptr<reply_source>(const httplib::Request&, httplib::Response&)>;
  /// Runs before every route: true when it answered `res` itself (the route does not run).
  using pre_routing_handler = std::function<bool(const httplib::Request&, httplib::Response&)>;
  /// The body of a refusal the server makes itself (status, message); it may count it too.
  using refusal_body = std::function<std::string(int status, const std::string& message)>;

  http_server(http_limits limits, refusal_body refusal);
  /// Stops serving: ends every connection (abandoning their sources) and joins its threads.
  ~http_server();
  http_server(const http_server&) = delete;
  http_server& operator=(const http_server&) = delete;

  /// Routes `method` (GET also answers HEAD) on `path`, matched exactly; before start().
  void route(const std::string& method, const std::string& path, handler h);
  void route_deferred(const std::string& method, const std::string& path, deferred_handler h);
  void set_pre_routing(pre_routing_handler h);
  /// Answers a path no route has (default: 404 with the refusal body).
  void set_not_found(handler h);

  /// Serves HTTPS from now on, with the PEM certificate chain `cert` and private key `key`.
  [[nodiscard]] absl::Status use_tls(const std::string& cert, const std::string& key);

  /// Listens on `host:port` (0: a free port) and serves on threads of its own until destroyed;
  /// the port it listens on.
  [[nodiscard]] absl::StatusOr<int> start(const std::string& host, int port);

  /// Connections open now (those refused for being past max_connections not counted).
  [[nodiscard]] int connections() const;
  /// Reply bytes held now for all clients, not yet taken by them.
  [[nodiscard]] size_t buffered_bytes() const;

  struct loop;  // the event loop, its connections and handler threads (http_server.cpp)

 private:
  std::unique_ptr<loop> loop_;
};

}  // namespace troupe::http

#pragma once

#include <atomic>
#include <functional>
#include <string>

#include "absl/strings/string_view.h"
#include "apps/serve/http_limits.hpp"
#include "httplib.h"

namespace troupe::apps {

/// Where a request's head stands in the bytes received so far.
enum class head_scan { incomplete, complete, url_too_long, headers_too_large };

/// Scans `received`, the start of a connection's next request, against `limits`: complete once
/// the blank line after the headers has come.
[[nodiscard]] head_scan scan_request_head(absl::string_view received, const http_limits& limits);

/// cpp-httplib's server, with the limits it lacks enforced on each connection before it parses:
/// it caps body size itself, but keeps a thread per connection for as long as a client trickles
/// bytes (slowloris), queues connections without bound, and its URL and header caps are fixed
/// at build time. Here every connection is admitted against max_connections, its request heads
/// are read under a deadline and the size limits, and only then parsed by cpp-httplib.
class guarded_http_server : public httplib::Server {
 public:
  /// `refusal` gives the body of a refusal the server writes itself (status, message); it may
  /// count it too. It is called on the connection's thread.
  using refusal_body = std::function<std::string(int status, const std::string& message)>;

  guarded_http_server(http_limits limits, refusal_body refusal);

  /// The route handlers' error handler; a request cut off by the read deadline reaches it (and
  /// the client) as 408, not cpp-httplib's 400.
  guarded_http_server& set_error_handler(Handler handler);

  /// Connections being served now.
  [[nodiscard]] int connections() const { return connections_.load(); }

 private:
  bool process_and_close_socket(socket_t sock) override;
  void refuse(socket_t sock, int status, const std::string& message);

  http_limits limits_;
  refusal_body refusal_;
  Handler route_error_handler_;
  std::atomic<int> connections_{0};
};

}  // namespace troupe::apps

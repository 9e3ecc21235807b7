#pragma once

#include <cstddef>
#include <string>
#include <variant>

#include "absl/strings/string_view.h"
#include "httplib.h"
#include "runtime/http/http_limits.hpp"

namespace troupe::http {

/// Where a request's head stands in the bytes received so far.
enum class head_scan { incomplete, complete, url_too_long, headers_too_large };

/// Scans `received`, the start of a connection's next request, against `limits`: complete once
/// the blank line after the headers has come; `head_bytes` (if given) is then the head's size,
/// that blank line included.
[[nodiscard]] head_scan scan_request_head(absl::string_view received, const http_limits& limits,
                                          size_t* head_bytes = nullptr);

/// A request's line and headers, parsed: what the route handlers see, less the body.
struct request_head {
  httplib::Request request;       ///< method, target, path (decoded), params, version, headers
  size_t body_bytes = 0;          ///< Content-Length
  bool keep_alive = true;         ///< HTTP/1.1 unless `Connection: close`; HTTP/1.0 if it asks
  bool expects_continue = false;  ///< `Expect: 100-continue`: answer 100 before the body comes
};

/// Why a head was refused: the status to answer with, and what to tell the client.
struct head_error {
  int status;
  std::string message;
  size_t body_bytes = 0;  ///< the body the client still sends (413), drained before closing
};

/// Parses a complete head (scan_request_head said so) under `limits`: a malformed line or header
/// is 400, a body over max_body_bytes 413, a chunked or otherwise encoded body 411 (send it with
/// a Content-Length), an HTTP version other than 1.0 and 1.1 505.
[[nodiscard]] std::variant<request_head, head_error> parse_request_head(absl::string_view head,
                                                                        const http_limits& limits);

/// The reason phrase of an HTTP status ("Not Found"); "Unknown" for one it does not know.
[[nodiscard]] const char* reason_phrase(int status);

}  // namespace troupe::http

#pragma once

#include <cstddef>
#include <string>

namespace troupe::http {

/// What one HTTP client may ask of the server (`serve.http`). Each limit is answered with its
/// status: a body over max_body_bytes 413, a request line over max_url_bytes 414, a request line
/// and headers over max_header_bytes (or one header line over cpp-httplib's 8 KiB) 431, a request
/// not wholly arrived within read_timeout_s 408, and a connection past max_connections 503.
struct http_limits {
  size_t max_body_bytes = 4u << 20;
  size_t max_url_bytes = 8192;  ///< cpp-httplib refuses longer request lines itself
  size_t max_header_bytes = 16384;
  double read_timeout_s = 30;       ///< the whole request, head and body, from its first byte
  double write_timeout_s = 30;      ///< a client that takes no bytes this long is cut off
  double keep_alive_timeout_s = 5;  ///< an idle kept-alive connection is closed after this
  int max_connections = 128;
  /// Where these come from in the config, for the refusals' messages (not a setting itself);
  /// empty: fixed limits.
  std::string config_key = "serve.http";
};

}  // namespace troupe::http

#pragma once

#include <cstddef>
#include <string>

namespace troupe::http {

/// What one HTTP client may ask of the server (`serve.http`). Each limit is answered with its
/// status: a body over max_body_bytes 413, a request line over max_url_bytes 414, a request line
/// and headers over max_header_bytes 431, a request not wholly arrived within read_timeout_s 408,
/// and a connection past max_connections 503.
struct http_limits {
  size_t max_body_bytes = 4u << 20;
  size_t max_url_bytes = 8192;
  size_t max_header_bytes = 16384;
  double read_timeout_s = 30;       ///< the whole request, head and body, from its first byte
  double write_timeout_s = 30;      ///< a client that takes no bytes this long is cut off
  double keep_alive_timeout_s = 5;  ///< an idle kept-alive connection is closed after this
  int max_connections = 4096;
  /// A reply's bytes the server holds for a client that has not read them yet; past this it
  /// stops taking more of a streamed reply until the client reads (back-pressure).
  size_t reply_buffer_bytes = 64u << 10;
  /// Where these come from in the config, for the refusals' messages (not a setting itself);
  /// empty: fixed limits.
  std::string config_key = "serve.http";

  /// " (serve.http.NAME)": the config key of limit NAME, for a refusal's message; empty without
  /// a config key.
  [[nodiscard]] std::string where(const std::string& name) const {
    return config_key.empty() ? "" : " (" + config_key + "." + name + ")";
  }
};

}  // namespace troupe::http

#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include <openssl/ssl.h>

#include "absl/status/statusor.h"

namespace troupe::http {

/// An accepted non-blocking socket, plain or TLS, as the event loop reads and writes it: no call
/// waits; one that cannot go on says which readiness it waits for.
class socket_transport {
 public:
  enum class wait { none, readable, writable };
  /// The outcome of a call: `bytes` moved, or why none were.
  struct result {
    size_t bytes = 0;
    bool closed = false;        ///< the peer ended the connection (or it failed)
    wait blocked = wait::none;  ///< nothing moved until the socket is ready for this
  };

  /// `tls`: the server's TLS context, or null for plain TCP. Takes the socket (closes it).
  socket_transport(int fd, SSL_CTX* tls);
  ~socket_transport();
  socket_transport(const socket_transport&) = delete;
  socket_transport& operator=(const socket_transport&) = delete;

  [[nodiscard]] int fd() const { return fd_; }
  [[nodiscard]] bool tls() const { return ssl_ != nullptr; }

  /// Advances the TLS handshake: true once done (at once for plain TCP); else `blocked` says what
  /// it waits for, or `closed` that it failed.
  [[nodiscard]] bool handshake(result& r);
  [[nodiscard]] result read(char* into, size_t size);
  [[nodiscard]] result write(const char* from, size_t size);
  /// Ends sending (TLS close_notify, then a TCP half-close); what the peer sends is still read.
  void shutdown_write();

  /// "IP" and port of the peer.
  void peer(std::string& ip, int& port) const;

 private:
  result tls_blocked(int ret);

  int fd_;
  SSL* ssl_ = nullptr;
};

/// A TLS server context from the PEM certificate chain `cert` and private key `key` (which its
/// group and others must not be able to read; errors name `serve.tls`); TLS 1.2 at least.
[[nodiscard]] absl::StatusOr<std::shared_ptr<SSL_CTX>> tls_server_context(const std::string& cert,
                                                                          const std::string& key);

}  // namespace troupe::http

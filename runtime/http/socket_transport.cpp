#include "runtime/http/socket_transport.hpp"

#include <cerrno>
#include <climits>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"

namespace troupe::http {

socket_transport::socket_transport(int fd, SSL_CTX* tls) : fd_(fd) {
  if (tls != nullptr) {
    ssl_ = SSL_new(tls);
    SSL_set_fd(ssl_, fd_);
  }
}

socket_transport::~socket_transport() {
  if (ssl_ != nullptr) SSL_free(ssl_);
  ::close(fd_);
}

socket_transport::result socket_transport::tls_blocked(int ret) {
  result r;
  switch (SSL_get_error(ssl_, ret)) {
    case SSL_ERROR_WANT_READ:
      r.blocked = wait::readable;
      break;
    case SSL_ERROR_WANT_WRITE:
      r.blocked = wait::writable;
      break;
    default:  // the peer closed, or sent what is not TLS
      ERR_clear_error();
      r.closed = true;
  }
  return r;
}

bool socket_transport::handshake(result& r) {
  if (ssl_ == nullptr || SSL_is_init_finished(ssl_)) return true;
  const int ret = SSL_accept(ssl_);
  if (ret == 1) return true;
  r = tls_blocked(ret);
  return false;
}

socket_transport::result socket_transport::read(char* into, size_t size) {
  if (ssl_ != nullptr) {
    const int n = SSL_read(ssl_, into, static_cast<int>(std::min<size_t>(size, INT_MAX)));
    if (n > 0) return {static_cast<size_t>(n)};
    return tls_blocked(n);
  }
  for (;;) {
    const ssize_t n = ::recv(fd_, into, size, 0);
    if (n > 0) return {static_cast<size_t>(n)};
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return {0, false, wait::readable};
    return {0, true};
  }
}

socket_transport::result socket_transport::write(const char* from, size_t size) {
  if (ssl_ != nullptr) {
    const int n = SSL_write(ssl_, from, static_cast<int>(std::min<size_t>(size, INT_MAX)));
    if (n > 0) return {static_cast<size_t>(n)};
    return tls_blocked(n);
  }
  for (;;) {
    const ssize_t n = ::send(fd_, from, size, MSG_NOSIGNAL);
    if (n >= 0) return {static_cast<size_t>(n)};
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return {0, false, wait::writable};
    return {0, true};
  }
}

void socket_transport::shutdown_write() {
  if (ssl_ != nullptr && SSL_is_init_finished(ssl_)) {
    SSL_shutdown(ssl_);  // close_notify, if the socket takes it now
    ERR_clear_error();
  }
  ::shutdown(fd_, SHUT_WR);
}

void socket_transport::peer(std::string& ip, int& port) const {
  sockaddr_storage a{};
  socklen_t len = sizeof(a);
  ip.clear();
  port = 0;
  if (::getpeername(fd_, reinterpret_cast<sockaddr*>(&a), &len) != 0) return;
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

absl::StatusOr<std::shared_ptr<SSL_CTX>> tls_server_context(const std::string& cert,
                                                            const std::string& key) {
  struct stat st {};
  if (stat(key.c_str(), &st) != 0) {
    return absl::NotFoundError(absl::StrCat("serve.tls.key: cannot read ", key));
  }
  if ((st.st_mode & 077) != 0) {
    return absl::PermissionDeniedError(absl::StrCat(
        "serve.tls.key: ", key,
        " is open to its group or others; a private key must not be: chmod 600 ", key));
  }
  std::shared_ptr<SSL_CTX> ctx(SSL_CTX_new(TLS_server_method()), SSL_CTX_free);
  const auto failed = [](const std::string& what) {
    char reason[256] = {};
    ERR_error_string_n(ERR_get_error(), reason, sizeof(reason));
    ERR_clear_error();
    return absl::InvalidArgumentError(absl::StrCat(what, ": ", reason));
  };
  if (!ctx) return failed("cannot make a TLS context");
  SSL_CTX_set_min_proto_version(ctx.get(), TLS1_2_VERSION);
  // A write retried after WANT_WRITE may come from a moved buffer and be taken in part.
  SSL_CTX_set_mode(ctx.get(), SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  if (SSL_CTX_use_certificate_chain_file(ctx.get(), cert.c_str()) != 1) {
    return failed(absl::StrCat("serve.tls.cert: cannot use ", cert, " (a PEM certificate chain)"));
  }
  if (SSL_CTX_use_PrivateKey_file(ctx.get(), key.c_str(), SSL_FILETYPE_PEM) != 1) {
    return failed(absl::StrCat("serve.tls.key: cannot use ", key, " (a PEM private key)"));
  }
  if (SSL_CTX_check_private_key(ctx.get()) != 1) {
    return failed(absl::StrCat("serve.tls.key: ", key, " is not the key of ", cert));
  }
  return ctx;
}

}  // namespace troupe::http

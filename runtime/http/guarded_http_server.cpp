#include "runtime/http/guarded_http_server.hpp"

#include <openssl/err.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"

namespace troupe::http {
namespace {

using clock = http_connection::clock;

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

// " (serve.http.NAME)": the config key of a limit, for a refusal's message; empty without one.
std::string setting(const http_limits& limits, absl::string_view name) {
  return limits.config_key.empty() ? "" : absl::StrCat(" (", limits.config_key, ".", name, ")");
}

// The connection this thread serves, for the error handler (cpp-httplib calls it on that thread).
thread_local const http_connection* serving = nullptr;

}  // namespace

guarded_http_server::guarded_http_server(http_limits limits, refusal_body refusal)
    : limits_(limits), refusal_(std::move(refusal)) {
  const size_t threads = static_cast<size_t>(limits_.max_connections) + 8;  // 8 to refuse with
  new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  // Timeouts are the connection's own (http_connection); cpp-httplib keeps the body cap and the
  // number of requests on one kept-alive connection.
  set_payload_max_length(limits_.max_body_bytes);
  set_keep_alive_max_count(100);
  Server::set_error_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (res.status == 400 && serving != nullptr && serving->timed_out()) {
      res.status = 408;
      res.set_content(
          refusal_(408, absl::StrCat("the request did not arrive within ", limits_.read_timeout_s,
                                     " s", setting(limits_, "read_timeout_s"))),
          "application/json");
    } else if (res.status == 413 && res.body.empty()) {  // cpp-httplib's own, not a route's
      res.set_content(
          refusal_(413, absl::StrCat("the request body is over ", limits_.max_body_bytes, " bytes",
                                     setting(limits_, "max_body_bytes"))),
          "application/json");
    }
    if (route_error_handler_) route_error_handler_(req, res);
  });
}

guarded_http_server& guarded_http_server::set_error_handler(Handler handler) {
  route_error_handler_ = std::move(handler);
  return *this;
}

absl::Status guarded_http_server::use_tls(const std::string& cert, const std::string& key) {
  struct stat st {};
  if (stat(key.c_str(), &st) != 0) {
    return absl::NotFoundError(absl::StrCat("serve.tls.key: cannot read ", key));
  }
  if ((st.st_mode & 077) != 0) {
    return absl::PermissionDeniedError(
        absl::StrCat("serve.tls.key: ", key,
                     " is open to its group or others; a private key must not be: "
                     "chmod 600 ",
                     key));
  }
  std::unique_ptr<SSL_CTX, void (*)(SSL_CTX*)> ctx(SSL_CTX_new(TLS_server_method()), SSL_CTX_free);
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
  tls_ = std::shared_ptr<SSL_CTX>(ctx.release(), SSL_CTX_free);
  return absl::OkStatus();
}

void guarded_http_server::refuse(http_connection& connection, int status,
                                 const std::string& message) {
  const std::string body = refusal_(status, message);
  // The client may still be sending what was refused: the connection lingers, so that closing
  // does not reset it before the client reads the answer.
  if (connection.write_all(absl::StrCat(
          "HTTP/1.1 ", status, " ", reason_of(status),
          "\r\nContent-Type: application/json\r\nContent-Length: ", body.size(),
          "\r\nConnection: close\r\n", status == 503 ? "Retry-After: 1\r\n" : "", "\r\n", body))) {
    connection.linger();
  }
}

guarded_http_server::~guarded_http_server() {
  stop();
  if (thread_.joinable()) thread_.join();
}

absl::StatusOr<int> guarded_http_server::start(const std::string& host, int port) {
  // cpp-httplib listens with a backlog of 5, which a burst of clients overflows (their
  // connections are reset); the socket is listened on again with the system's maximum.
  auto listening = std::make_shared<int>(-1);
  set_socket_options([listening](socket_t fd) {
    int yes = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
    *listening = fd;
  });
  const int bound = port == 0 ? bind_to_any_port(host) : (bind_to_port(host, port) ? port : -1);
  if (bound <= 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen on ", host, ":", port, " (in use? port 0 picks a free one)"));
  }
  if (*listening >= 0) ::listen(*listening, SOMAXCONN);
  thread_ = std::thread([this] { listen_after_bind(); });
  return bound;
}

bool guarded_http_server::process_and_close_socket(socket_t sock) {
  struct on_exit {
    socket_t sock;
    ~on_exit() {
      ::shutdown(sock, SHUT_RDWR);
      ::close(sock);
    }
  } closer{sock};
  http_connection connection(sock, limits_, tls_.get());
  if (connections_.fetch_add(1) >= limits_.max_connections) {
    connections_.fetch_sub(1);
    if (!connection.handshake()) return true;
    refuse(connection, 503,
           absl::StrCat("the server has ", limits_.max_connections, " connections open",
                        setting(limits_, "max_connections"), "; retry shortly"));
    return true;
  }
  serving = &connection;
  struct release {
    std::atomic<int>& count;
    ~release() {
      serving = nullptr;
      count.fetch_sub(1);
    }
  } released{connections_};
  if (!connection.handshake()) return true;  // not TLS, or not within the read deadline

  auto first_byte_by = clock::now() + seconds(limits_.read_timeout_s);
  for (size_t left = keep_alive_max_count_; left > 0 && svr_sock_ != INVALID_SOCKET; --left) {
    const bool first = left == keep_alive_max_count_;
    switch (connection.read_head(first_byte_by)) {
      case http_connection::head::request:
        break;
      case http_connection::head::closed:
        return true;
      case http_connection::head::idle:
        if (!first) return true;  // a kept-alive connection with nothing more to ask
        [[fallthrough]];
      case http_connection::head::timed_out:
        refuse(connection, 408,
               absl::StrCat("the request did not arrive within ", limits_.read_timeout_s, " s",
                            setting(limits_, "read_timeout_s")));
        return true;
      case http_connection::head::url_too_long:
        refuse(connection, 414,
               absl::StrCat("the request line is over ", limits_.max_url_bytes, " bytes",
                            setting(limits_, "max_url_bytes")));
        return true;
      case http_connection::head::headers_too_large:
        refuse(connection, 431,
               absl::StrCat("the request headers are over ", limits_.max_header_bytes,
                            " bytes, or one is over ", httplib_header_line_max,
                            setting(limits_, "max_header_bytes")));
        return true;
    }
    bool closed = false;
    process_request(connection, left == 1, closed, nullptr);
    if (closed || connection.timed_out()) return true;
    first_byte_by = clock::now() + seconds(limits_.keep_alive_timeout_s);
  }
  return true;
}

}  // namespace troupe::http

#include "runtime/http/guarded_http_server.hpp"

#include <future>
#include <thread>

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/tls_certificate.hpp"
#include "tests/support/wait.hpp"

namespace troupe::http {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

TEST(ScanRequestHead, FindsTheHeadsEndAndEachLimit) {
  http_limits l;
  l.max_url_bytes = 32;
  l.max_header_bytes = 128;
  EXPECT_EQ(scan_request_head("GET / HTTP/1.1\r\nHost: a\r\n\r\n", l), head_scan::complete);
  EXPECT_EQ(scan_request_head("GET / HTTP/1.1\r\nHost: a\r\n", l), head_scan::incomplete);
  EXPECT_EQ(scan_request_head("GET / HT", l), head_scan::incomplete);
  // The URL is refused as soon as its line is longer, ended or not.
  EXPECT_EQ(scan_request_head("GET /" + std::string(40, 'a'), l), head_scan::url_too_long);
  EXPECT_EQ(scan_request_head("GET / HTTP/1.1\r\nX: " + std::string(120, 'b'), l),
            head_scan::headers_too_large);
  l.max_header_bytes = 64 << 10;  // one line over cpp-httplib's 8 KiB is refused on its own
  EXPECT_EQ(scan_request_head("GET / HTTP/1.1\r\nX: " + std::string(9000, 'b') + "\r\n\r\n", l),
            head_scan::headers_too_large);
}

// A client on a raw socket, so that it can send half a request, trickle, or never read.
class raw_client {
 public:
  explicit raw_client(int port) : fd_(::socket(AF_INET, SOCK_STREAM, 0)) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0;
  }
  ~raw_client() { ::close(fd_); }
  [[nodiscard]] bool connected() const { return connected_; }

  bool send(const std::string& bytes) {
    return ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL) ==
           static_cast<ssize_t>(bytes.size());
  }
  // Whether the server answers within `limit`.
  bool answered(std::chrono::milliseconds limit) {
    pollfd p{fd_, POLLIN, 0};
    return ::poll(&p, 1, static_cast<int>(limit.count())) > 0;
  }
  // Everything the server sends until it closes (at most 30 s); "" when it never answers.
  std::string read_to_end() {
    std::string got;
    char buf[4096];
    const auto until = std::chrono::steady_clock::now() + seconds(30);
    while (std::chrono::steady_clock::now() < until) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 100) <= 0) continue;
      const ssize_t n = ::recv(fd_, buf, sizeof(buf), 0);
      if (n <= 0) break;
      got.append(buf, static_cast<size_t>(n));
    }
    return got;
  }
  // The status of the answer read to its end.
  int status() {
    const std::string r = read_to_end();
    return r.rfind("HTTP/1.1 ", 0) == 0 ? std::stoi(r.substr(9, 3)) : -1;
  }

 private:
  int fd_;
  bool connected_ = false;
};

std::string get(const std::string& path, const std::string& headers = "") {
  return absl::StrCat("GET ", path, " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n", headers,
                      "\r\n");
}

// A POST to /echo that says its body is `length` bytes and sends `sent` of them.
std::string post(size_t length, size_t sent) {
  return absl::StrCat("POST /echo HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: ",
                      length, "\r\n\r\n", std::string(sent, 'b'));
}

class GuardedHttpServer : public ::testing::Test {
 protected:
  void start(http_limits limits, const std::function<void(guarded_http_server&)>& setup = nullptr) {
    server_ = std::make_unique<guarded_http_server>(
        limits, [this](int status, const std::string& message) {
          refusals_.push_back(status);
          return nlohmann::json{{"error", {{"message", message}}}}.dump();
        });
    server_->Get("/ok", [](const httplib::Request&, httplib::Response& res) {
      res.set_content("ok", "text/plain");
    });
    server_->Post("/echo", [](const httplib::Request& req, httplib::Response& res) {
      res.set_content(std::to_string(req.body.size()), "text/plain");
    });
    // Chunks without end, until a write fails.
    server_->Get("/endless", [this](const httplib::Request&, httplib::Response& res) {
      res.set_chunked_content_provider("text/plain", [this](size_t, httplib::DataSink& sink) {
        const std::string chunk(64 << 10, 'x');
        if (sink.write(chunk.data(), chunk.size())) return true;
        write_failed_.set_value();
        return false;
      });
    });
    if (setup) setup(*server_);
    port_ = server_->bind_to_any_port("127.0.0.1");
    ASSERT_GT(port_, 0);
    thread_ = std::thread([this] { server_->listen_after_bind(); });
  }
  void TearDown() override {
    if (server_) server_->stop();
    if (thread_.joinable()) thread_.join();
  }

  std::unique_ptr<guarded_http_server> server_;
  std::thread thread_;
  int port_ = 0;
  std::vector<int> refusals_;  // written on the server's threads, read after they are done
  std::promise<void> write_failed_;
};

TEST_F(GuardedHttpServer, AnswersEachSizeLimitWithItsStatus) {
  http_limits l;
  l.max_body_bytes = 1000;
  l.max_url_bytes = 200;
  l.max_header_bytes = 1000;
  start(l);

  raw_client body(port_);
  ASSERT_TRUE(body.send(post(2000, 2000)));
  const std::string answer = body.read_to_end();
  EXPECT_EQ(answer.substr(0, 12), "HTTP/1.1 413") << answer;
  EXPECT_NE(answer.find("serve.http.max_body_bytes"), std::string::npos) << answer;

  raw_client url(port_);
  ASSERT_TRUE(url.send(get(absl::StrCat("/", std::string(300, 'u')))));
  EXPECT_EQ(url.status(), 414);

  raw_client headers(port_);
  ASSERT_TRUE(headers.send(get("/ok", absl::StrCat("X-Big: ", std::string(2000, 'h'), "\r\n"))));
  EXPECT_EQ(headers.status(), 431);

  raw_client fine(port_);
  ASSERT_TRUE(fine.send(post(1000, 1000)));
  const std::string ok = fine.read_to_end();
  EXPECT_EQ(ok.substr(0, 12), "HTTP/1.1 200") << ok;
  EXPECT_EQ(ok.substr(ok.size() - 4), "1000");
}

TEST_F(GuardedHttpServer, ASlowlorisIsCutOffAtTheDeadlineAndFreesItsConnection) {
  http_limits l;
  l.read_timeout_s = 1;
  l.max_connections = 1;
  start(l);

  // A byte whenever 50 ms pass without an answer keeps any per-read timeout from firing; only the
  // request's own deadline (1 s, while the whole trickle would take 200 s) ends it.
  raw_client slow(port_);
  ASSERT_TRUE(slow.connected());
  const std::string request = get("/ok", absl::StrCat("X-Slow: ", std::string(4000, 's'), "\r\n"));
  size_t sent = 0;
  while (sent < request.size() && !slow.answered(milliseconds(50))) {
    ASSERT_TRUE(slow.send(request.substr(sent++, 1)));
  }
  EXPECT_LT(sent, request.size()) << "the server waited for the whole trickle";
  EXPECT_EQ(slow.status(), 408);

  // A body that stops coming is cut off the same way.
  ASSERT_TRUE(testing::wait_until([&] { return server_->connections() == 0; }));
  raw_client half_body(port_);
  ASSERT_TRUE(half_body.send(post(100, 10)));
  const std::string answer = half_body.read_to_end();
  EXPECT_EQ(answer.substr(0, 12), "HTTP/1.1 408") << answer;
  EXPECT_NE(answer.find("serve.http.read_timeout_s"), std::string::npos) << answer;

  // The one connection slot is free again.
  ASSERT_TRUE(testing::wait_until([&] { return server_->connections() == 0; }));
  raw_client next(port_);
  ASSERT_TRUE(next.send(get("/ok")));
  EXPECT_EQ(next.status(), 200);
}

TEST_F(GuardedHttpServer, ConnectionsPastTheLimitAre503WhileTheAdmittedOnesFinish) {
  http_limits l;
  l.max_connections = 2;
  start(l);

  // Two connections held open by construction: each has sent half its request.
  raw_client a(port_), b(port_);
  const std::string request = get("/ok");
  ASSERT_TRUE(a.send(request.substr(0, 10)));
  ASSERT_TRUE(b.send(request.substr(0, 10)));
  ASSERT_TRUE(testing::wait_until([&] { return server_->connections() == 2; }));

  raw_client third(port_);
  ASSERT_TRUE(third.send(request));
  const std::string refused = third.read_to_end();
  EXPECT_EQ(refused.substr(0, 12), "HTTP/1.1 503") << refused;
  EXPECT_NE(refused.find("Retry-After: 1"), std::string::npos);
  EXPECT_NE(refused.find("serve.http.max_connections"), std::string::npos);

  ASSERT_TRUE(a.send(request.substr(10)));
  ASSERT_TRUE(b.send(request.substr(10)));
  EXPECT_EQ(a.status(), 200);
  EXPECT_EQ(b.status(), 200);
}

TEST_F(GuardedHttpServer, AClientThatReadsNothingIsCutOffAfterTheWriteTimeout) {
  http_limits l;
  l.write_timeout_s = 0.5;
  l.max_connections = 1;
  start(l);
  auto failed = write_failed_.get_future();
  raw_client sink(port_);
  ASSERT_TRUE(sink.send(get("/endless")));  // and never reads
  ASSERT_EQ(failed.wait_for(seconds(60)), std::future_status::ready);
  ASSERT_TRUE(testing::wait_until([&] { return server_->connections() == 0; }));
  raw_client next(port_);
  ASSERT_TRUE(next.send(get("/ok")));
  EXPECT_EQ(next.status(), 200);
}

TEST_F(GuardedHttpServer, ServesHttpsAndCutsOffASilentHandshake) {
  testing::temp_dir dir;
  const std::string cert = dir.file("cert.pem"), key = dir.file("key.pem");
  testing::make_tls_certificate(cert, key);
  http_limits l;
  l.read_timeout_s = 1;
  l.max_connections = 1;
  {
    guarded_http_server refused(l, [](int, const std::string&) { return std::string(); });
    chmod(key.c_str(), 0644);
    const absl::Status open = refused.use_tls(cert, key);
    EXPECT_EQ(open.code(), absl::StatusCode::kPermissionDenied) << open;
    EXPECT_NE(open.message().find("chmod 600"), std::string::npos) << open;
    chmod(key.c_str(), 0600);
    EXPECT_EQ(refused.use_tls(key, key).code(), absl::StatusCode::kInvalidArgument);
  }
  start(l, [&](guarded_http_server& s) { ASSERT_TRUE(s.use_tls(cert, key).ok()); });

  httplib::SSLClient https("127.0.0.1", port_);
  https.enable_server_certificate_verification(false);
  auto ok = https.Get("/ok");
  ASSERT_TRUE(ok) << httplib::to_string(ok.error());
  EXPECT_EQ(ok->status, 200);
  EXPECT_EQ(ok->body, "ok");
  auto big = https.Post("/echo", std::string(5 << 20, 'b'), "text/plain");
  ASSERT_TRUE(big);
  EXPECT_EQ(big->status, 413);

  // A client that connects and never starts the handshake holds the one slot only until the
  // read deadline; a plain HTTP request gets no answer but a closed connection.
  raw_client silent(port_);
  ASSERT_TRUE(silent.connected());
  EXPECT_EQ(silent.read_to_end(), "");
  raw_client plain(port_);
  ASSERT_TRUE(plain.send(get("/ok")));
  EXPECT_EQ(plain.status(), -1);
  ASSERT_TRUE(testing::wait_until([&] { return server_->connections() == 0; }));
  auto again = https.Get("/ok");
  ASSERT_TRUE(again);
  EXPECT_EQ(again->status, 200);
}

TEST_F(GuardedHttpServer, KeepsAConnectionAliveAcrossRequests) {
  start({});
  raw_client c(port_);
  ASSERT_TRUE(
      c.send("GET /ok HTTP/1.1\r\nHost: x\r\n\r\nGET /ok HTTP/1.1\r\nHost: x\r\n"
             "Connection: close\r\n\r\n"));
  const std::string both = c.read_to_end();
  EXPECT_EQ(both.find("HTTP/1.1 200"), 0u) << both;
  EXPECT_NE(both.find("HTTP/1.1 200", 10), std::string::npos) << both;
}

}  // namespace
}  // namespace troupe::http

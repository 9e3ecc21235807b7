#include "runtime/http/http_server.hpp"

#include <atomic>
#include <future>
#include <iostream>
#include <thread>

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "runtime/http/request_head.hpp"
#include "tests/support/proc_state.hpp"
#include "tests/support/raw_http_client.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/tls_certificate.hpp"
#include "tests/support/wait.hpp"

namespace troupe::http {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using testing::raw_http_client;

TEST(ScanRequestHead, FindsTheHeadsEndAndEachLimit) {
  http_limits l;
  l.max_url_bytes = 32;
  l.max_header_bytes = 128;
  size_t head = 0;
  EXPECT_EQ(scan_request_head("GET / HTTP/1.1\r\nHost: a\r\n\r\nbody", l, &head),
            head_scan::complete);
  EXPECT_EQ(head, 27u);
  EXPECT_EQ(scan_request_head("GET / HTTP/1.1\r\nHost: a\r\n", l), head_scan::incomplete);
  EXPECT_EQ(scan_request_head("GET / HT", l), head_scan::incomplete);
  // The URL is refused as soon as its line is longer, ended or not.
  EXPECT_EQ(scan_request_head("GET /" + std::string(40, 'a'), l), head_scan::url_too_long);
  EXPECT_EQ(scan_request_head("GET / HTTP/1.1\r\nX: " + std::string(120, 'b'), l),
            head_scan::headers_too_large);
}

request_head parsed(const std::string& head, const http_limits& l = {}) {
  auto p = parse_request_head(head, l);
  if (auto* e = std::get_if<head_error>(&p)) ADD_FAILURE() << e->status << " " << e->message;
  return std::get_if<request_head>(&p) != nullptr ? std::get<request_head>(std::move(p))
                                                  : request_head{};
}

int refused_with(const std::string& head, const http_limits& l = {}) {
  auto p = parse_request_head(head, l);
  return std::holds_alternative<head_error>(p) ? std::get<head_error>(p).status : 0;
}

TEST(ParseRequestHead, ReadsTheLineHeadersAndFraming) {
  const request_head h = parsed(
      "POST /v1/a%20b?x=1&y=two HTTP/1.1\r\nHost: h\r\ncontent-length:  12 \r\n"
      "Expect: 100-continue\r\nX-Two: a\r\nX-Two: b\r\n\r\n");
  EXPECT_EQ(h.request.method, "POST");
  EXPECT_EQ(h.request.path, "/v1/a b");
  EXPECT_EQ(h.request.get_param_value("y"), "two");
  EXPECT_EQ(h.body_bytes, 12u);
  EXPECT_TRUE(h.keep_alive);
  EXPECT_TRUE(h.expects_continue);
  EXPECT_EQ(h.request.get_header_value("Content-Length"), "12");
  EXPECT_EQ(h.request.get_header_value_count("x-two"), 2u);
  EXPECT_FALSE(parsed("GET / HTTP/1.1\r\nConnection: close\r\n\r\n").keep_alive);
  EXPECT_FALSE(parsed("GET / HTTP/1.0\r\n\r\n").keep_alive);
  EXPECT_TRUE(parsed("GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n").keep_alive);
}

TEST(ParseRequestHead, RefusesWhatItCannotServeWithItsStatus) {
  http_limits l;
  l.max_body_bytes = 100;
  EXPECT_EQ(refused_with("GET /\r\n\r\n"), 400);
  EXPECT_EQ(refused_with("GET  / HTTP/1.1\r\n\r\n"), 400);
  EXPECT_EQ(refused_with("GET x HTTP/1.1\r\n\r\n"), 400);
  EXPECT_EQ(refused_with("G(T / HTTP/1.1\r\n\r\n"), 400);
  EXPECT_EQ(refused_with("GET / HTTP/2.0\r\n\r\n"), 505);
  EXPECT_EQ(refused_with("GET / HTTP/1.1\r\nNo colon\r\n\r\n"), 400);
  EXPECT_EQ(refused_with("GET / HTTP/1.1\r\n folded: x\r\n\r\n"), 400);
  EXPECT_EQ(refused_with("POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n"), 400);
  EXPECT_EQ(refused_with("POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n"), 400);
  EXPECT_EQ(refused_with("POST / HTTP/1.1\r\nContent-Length: 101\r\n\r\n", l), 413);
  EXPECT_EQ(refused_with("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"), 411);
  EXPECT_EQ(refused_with("POST / HTTP/1.1\r\nExpect: magic\r\n\r\n"), 417);
}

TEST(ReplyWriter, FramesWholeAndChunkedReplies) {
  std::string out;
  httplib::Response r;
  r.status = 201;
  r.set_header("Content-Length", "999");  // the writer's own framing wins
  r.set_content("hello", "text/plain");
  reply_writer(out, true, false).whole(r);
  EXPECT_EQ(out,
            "HTTP/1.1 201 Created\r\nContent-Type: text/plain\r\nConnection: keep-alive\r\n"
            "Content-Length: 5\r\n\r\nhello");
  out.clear();
  reply_writer w(out, false, false);
  httplib::Response head;
  head.status = 200;
  head.set_header("Content-Type", "text/event-stream");
  w.begin(head);
  w.write("data: 1\n\n");
  w.write("");
  w.end();
  EXPECT_EQ(out,
            "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n"
            "Transfer-Encoding: chunked\r\n\r\n9\r\ndata: 1\n\n\r\n0\r\n\r\n");
  EXPECT_TRUE(w.ended());
}

std::string get(const std::string& path, const std::string& headers = "") {
  return absl::StrCat("GET ", path, " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n", headers,
                      "\r\n");
}

// A POST to /echo that says its body is `length` bytes and sends `sent` of them.
std::string post(size_t length, size_t sent) {
  return absl::StrCat("POST /echo HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: ",
                      length, "\r\n\r\n", std::string(sent, 'b'));
}

// A reply that streams `chunk` at every pull, without end, until it is abandoned.
class endless_source : public reply_source {
 public:
  explicit endless_source(std::promise<void>& abandoned) : abandoned_(abandoned) {}
  void attach(std::function<void()>) override {}
  bool pull(reply_writer& out) override {
    if (!out.begun()) {
      httplib::Response head;
      head.set_header("Content-Type", "text/plain");
      out.begin(head);
    }
    out.write(std::string(16 << 10, 'x'));
    pulled += 16 << 10;
    return false;
  }
  void abandoned() override { abandoned_.set_value(); }
  std::atomic<size_t> pulled{0};

 private:
  std::promise<void>& abandoned_;
};

class HttpServer : public ::testing::Test {
 protected:
  void start(http_limits limits, const std::function<void(http_server&)>& setup = nullptr) {
    server_ = std::make_unique<http_server>(limits, [this](int status, const std::string& message) {
      std::lock_guard lock(mu_);
      refusals_.push_back(status);
      return nlohmann::json{{"error", {{"message", message}}}}.dump();
    });
    server_->route("GET", "/ok", [](const httplib::Request&, httplib::Response& res) {
      res.set_content("ok", "text/plain");
    });
    server_->route("POST", "/echo", [](const httplib::Request& req, httplib::Response& res) {
      res.set_content(std::to_string(req.body.size()), "text/plain");
    });
    server_->route_deferred("GET", "/endless", [this](const httplib::Request&, httplib::Response&) {
      endless_ = std::make_shared<endless_source>(abandoned_);
      return endless_;
    });
    if (setup) setup(*server_);
    auto port = server_->start("127.0.0.1", 0);
    ASSERT_TRUE(port.ok()) << port.status();
    port_ = *port;
  }
  void TearDown() override { server_.reset(); }

  std::unique_ptr<http_server> server_;
  int port_ = 0;
  std::mutex mu_;
  std::vector<int> refusals_;
  std::promise<void> abandoned_;
  std::shared_ptr<endless_source> endless_;
};

TEST_F(HttpServer, AnswersEachSizeLimitWithItsStatus) {
  http_limits l;
  l.max_body_bytes = 1000;
  l.max_url_bytes = 200;
  l.max_header_bytes = 1000;
  start(l);

  raw_http_client body(port_);
  ASSERT_TRUE(body.send(post(2000, 2000)));
  const std::string answer = body.read_to_end();
  EXPECT_EQ(answer.substr(0, 12), "HTTP/1.1 413") << answer;
  EXPECT_NE(answer.find("serve.http.max_body_bytes"), std::string::npos) << answer;

  raw_http_client url(port_);
  ASSERT_TRUE(url.send(get(absl::StrCat("/", std::string(300, 'u')))));
  EXPECT_EQ(url.status(), 414);

  raw_http_client headers(port_);
  ASSERT_TRUE(headers.send(get("/ok", absl::StrCat("X-Big: ", std::string(2000, 'h'), "\r\n"))));
  EXPECT_EQ(headers.status(), 431);

  raw_http_client fine(port_);
  ASSERT_TRUE(fine.send(post(1000, 1000)));
  const std::string ok = fine.read_to_end();
  EXPECT_EQ(ok.substr(0, 12), "HTTP/1.1 200") << ok;
  EXPECT_EQ(ok.substr(ok.size() - 4), "1000");
}

TEST_F(HttpServer, ASlowlorisIsCutOffAtTheDeadlineAndFreesItsConnection) {
  http_limits l;
  l.read_timeout_s = 1;
  l.max_connections = 1;
  start(l);

  // A byte whenever 50 ms pass without an answer keeps any per-read timeout from firing; only the
  // request's own deadline (1 s, while the whole trickle would take 200 s) ends it.
  raw_http_client slow(port_);
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
  raw_http_client half_body(port_);
  ASSERT_TRUE(half_body.send(post(100, 10)));
  const std::string answer = half_body.read_to_end();
  EXPECT_EQ(answer.substr(0, 12), "HTTP/1.1 408") << answer;
  EXPECT_NE(answer.find("serve.http.read_timeout_s"), std::string::npos) << answer;

  // The one connection slot is free again.
  ASSERT_TRUE(testing::wait_until([&] { return server_->connections() == 0; }));
  raw_http_client next(port_);
  ASSERT_TRUE(next.send(get("/ok")));
  EXPECT_EQ(next.status(), 200);
}

TEST_F(HttpServer, ConnectionsPastTheLimitAre503WhileTheAdmittedOnesFinish) {
  http_limits l;
  l.max_connections = 2;
  start(l);

  // Two connections held open by construction: each has sent half its request.
  raw_http_client a(port_), b(port_);
  const std::string request = get("/ok");
  ASSERT_TRUE(a.send(request.substr(0, 10)));
  ASSERT_TRUE(b.send(request.substr(0, 10)));
  ASSERT_TRUE(testing::wait_until([&] { return server_->connections() == 2; }));

  raw_http_client third(port_);
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

TEST_F(HttpServer, AClientThatReadsNothingGetsBackPressureThenIsCutOff) {
  http_limits l;
  l.write_timeout_s = 0.5;
  l.max_connections = 1;
  l.reply_buffer_bytes = 32 << 10;
  start(l);
  auto abandoned = abandoned_.get_future();
  raw_http_client sink(port_);
  ASSERT_TRUE(sink.send(get("/endless")));  // and never reads
  ASSERT_EQ(abandoned.wait_for(seconds(60)), std::future_status::ready);
  // The server took from the source only what the sockets held, plus its own buffer and a pull:
  // not an endless stream.
  const size_t pulled = endless_->pulled.load();
  EXPECT_LT(pulled, size_t{64} << 20);
  ASSERT_TRUE(testing::wait_until([&] { return server_->connections() == 0; }));
  EXPECT_EQ(server_->buffered_bytes(), 0u);
  raw_http_client next(port_);
  ASSERT_TRUE(next.send(get("/ok")));
  EXPECT_EQ(next.status(), 200);
}

TEST_F(HttpServer, ServesHttpsAndCutsOffASilentHandshake) {
  testing::temp_dir dir;
  const std::string cert = dir.file("cert.pem"), key = dir.file("key.pem");
  testing::make_tls_certificate(cert, key);
  http_limits l;
  l.read_timeout_s = 1;
  l.max_connections = 1;
  {
    http_server refused(l, [](int, const std::string&) { return std::string(); });
    chmod(key.c_str(), 0644);
    const absl::Status open = refused.use_tls(cert, key);
    EXPECT_EQ(open.code(), absl::StatusCode::kPermissionDenied) << open;
    EXPECT_NE(open.message().find("chmod 600"), std::string::npos) << open;
    chmod(key.c_str(), 0600);
    EXPECT_EQ(refused.use_tls(key, key).code(), absl::StatusCode::kInvalidArgument);
  }
  start(l, [&](http_server& s) { ASSERT_TRUE(s.use_tls(cert, key).ok()); });

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
  raw_http_client silent(port_);
  ASSERT_TRUE(silent.connected());
  EXPECT_EQ(silent.read_to_end(), "");
  raw_http_client plain(port_);
  ASSERT_TRUE(plain.send(get("/ok")));
  EXPECT_EQ(plain.status(), -1);
  ASSERT_TRUE(testing::wait_until([&] { return server_->connections() == 0; }));
  auto again = https.Get("/ok");
  ASSERT_TRUE(again);
  EXPECT_EQ(again->status, 200);
}

TEST_F(HttpServer, KeepsAConnectionAliveAcrossRequests) {
  start({});
  raw_http_client c(port_);
  ASSERT_TRUE(
      c.send("GET /ok HTTP/1.1\r\nHost: x\r\n\r\nGET /ok HTTP/1.1\r\nHost: x\r\n"
             "Connection: close\r\n\r\n"));
  const std::string both = c.read_to_end();
  EXPECT_EQ(both.find("HTTP/1.1 200"), 0u) << both;
  EXPECT_NE(both.find("HTTP/1.1 200", 10), std::string::npos) << both;
}

TEST_F(HttpServer, AnswersExpectContinueThenTheRequest) {
  start({});
  raw_http_client c(port_);
  ASSERT_TRUE(
      c.send("POST /echo HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
             "Expect: 100-continue\r\nContent-Length: 5\r\n\r\n"));
  ASSERT_TRUE(c.answered(seconds(30)));
  ASSERT_TRUE(c.send("hello"));
  const std::string answer = c.read_to_end();
  EXPECT_EQ(answer.find("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK"), 0u) << answer;
  EXPECT_EQ(answer.substr(answer.size() - 1), "5");
}

TEST_F(HttpServer, AnswersHeadAsGetWithoutTheBodyAndUnknownPathsWith404) {
  start({});
  raw_http_client head(port_);
  ASSERT_TRUE(head.send("HEAD /ok HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"));
  const std::string answer = head.read_to_end();
  EXPECT_NE(answer.find("Content-Length: 2\r\n\r\n"), std::string::npos) << answer;
  EXPECT_EQ(answer.substr(answer.size() - 4), "\r\n\r\n") << answer;
  raw_http_client missing(port_);
  ASSERT_TRUE(missing.send(get("/nowhere")));
  const std::string not_found = missing.read_to_end();
  EXPECT_EQ(not_found.find("HTTP/1.1 404"), 0u) << not_found;
  EXPECT_NE(not_found.find("no route for GET /nowhere"), std::string::npos) << not_found;
}

// Two events, the first at once and the second when released; many clients share one.
struct two_events {
  std::mutex mu;
  bool released = false;
  std::vector<std::function<void()>> wakes;
  std::atomic<int> abandoned{0};

  void release() {
    std::vector<std::function<void()>> w;
    {
      std::lock_guard lock(mu);
      released = true;
      w = wakes;
    }
    for (auto& f : w)
      f();
  }
};

class two_event_source : public reply_source {
 public:
  explicit two_event_source(std::shared_ptr<two_events> shared) : shared_(std::move(shared)) {}
  void attach(std::function<void()> wake) override {
    std::lock_guard lock(shared_->mu);
    shared_->wakes.push_back(std::move(wake));
  }
  bool pull(reply_writer& out) override {
    if (!out.begun()) {
      httplib::Response head;
      head.set_header("Content-Type", "text/event-stream");
      out.begin(head);
      out.write("data: first\n\n");
    }
    std::lock_guard lock(shared_->mu);
    if (!shared_->released) return false;
    out.write("data: second\n\n");
    return true;
  }
  void abandoned() override { ++shared_->abandoned; }

 private:
  std::shared_ptr<two_events> shared_;
};

// 2,000 clients hold a stream each at once, by construction (the second event waits until all
// have the first): the server serves them on its own threads, no more, in bounded memory.
TEST_F(HttpServer, ServesTwoThousandStreamsAtOnceOnItsOwnThreads) {
  constexpr int clients = 2000;
  rlimit files{};
  ::getrlimit(RLIMIT_NOFILE, &files);
  if (files.rlim_max < 2 * clients + 200) {
    GTEST_SKIP() << "needs " << 2 * clients + 200 << " open files; the hard limit is "
                 << files.rlim_max;
  }
  auto shared = std::make_shared<two_events>();
  start({}, [&](http_server& s) {
    s.route_deferred("GET", "/events", [shared](const httplib::Request&, httplib::Response&) {
      return std::make_shared<two_event_source>(shared);
    });
  });
  const int threads = testing::thread_count();
  const int64_t rss_before = testing::resident_kib();
  std::vector<std::unique_ptr<raw_http_client>> c;
  for (int k = 0; k < clients; ++k) {
    c.push_back(std::make_unique<raw_http_client>(port_));
    ASSERT_TRUE(c.back()->send(get("/events")));
  }
  // Each client reads until it has the first event.
  for (auto& client : c) {
    const std::string first = client->read_until("data: first\n\n");
    ASSERT_NE(first.find("Transfer-Encoding: chunked"), std::string::npos) << first;
  }
  EXPECT_EQ(server_->connections(), clients);
  EXPECT_EQ(testing::thread_count(), threads) << "a thread per connection";
  const double kib_each = static_cast<double>(testing::resident_kib() - rss_before) / clients;
  std::cout << "{\"streams\": " << clients << ", \"threads\": " << threads
            << ", \"rss_kib_per_stream\": " << kib_each << "}" << std::endl;
  EXPECT_LT(kib_each, 64.0) << "both ends of a stream, in this process";
  shared->release();
  for (auto& client : c) {
    const std::string rest = client->read_to_end();
    EXPECT_NE(rest.find("data: second\n\n\r\n0\r\n\r\n"), std::string::npos) << rest;
  }
  EXPECT_EQ(shared->abandoned.load(), 0);
  ASSERT_TRUE(testing::wait_until([&] { return server_->connections() == 0; }));
}

// Waits for ever, until the server stops: then it answers 503.
class stop_answering_source : public reply_source {
 public:
  explicit stop_answering_source(std::atomic<int>& pulls) : pulls_(pulls) {}
  void attach(std::function<void()>) override {}
  bool pull(reply_writer& out) override {
    ++pulls_;
    if (!out.stopping()) return false;
    httplib::Response r;
    r.status = 503;
    r.set_content("stopping", "text/plain");
    out.whole(r);
    return true;
  }
  void abandoned() override { ADD_FAILURE() << "answered, not abandoned"; }

 private:
  std::atomic<int>& pulls_;
};

TEST_F(HttpServer, AStoppingServerGivesEachWaitingReplyALastPull) {
  std::atomic<int> pulls{0};
  start({}, [&](http_server& s) {
    s.route_deferred("GET", "/wait", [&](const httplib::Request&, httplib::Response&) {
      return std::make_shared<stop_answering_source>(pulls);
    });
  });
  raw_http_client c(port_);
  ASSERT_TRUE(c.send(get("/wait")));
  ASSERT_TRUE(testing::wait_until([&] { return pulls.load() > 0; }));  // its reply is waiting
  ASSERT_FALSE(c.answered(milliseconds(0)));
  server_.reset();
  const std::string answer = c.read_to_end();
  EXPECT_EQ(answer.find("HTTP/1.1 503"), 0u) << answer;
  EXPECT_EQ(answer.substr(answer.size() - 8), "stopping");
}

}  // namespace
}  // namespace troupe::http

#include "runtime/http/http_server.hpp"

#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "runtime/http/request_head.hpp"
#include "runtime/http/socket_transport.hpp"

namespace troupe::http {
namespace {

using clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

constexpr int requests_per_connection = 100;  // then the connection is closed
constexpr int handler_threads = 4;
constexpr int max_refusing = 64;    // connections past max_connections being answered 503 at once
constexpr auto sweep_every = 50ms;  // deadlines are kept to about this
constexpr auto pull_every = 1s;     // a source that does not wake the server is pulled this often
// After a closing reply the client's bytes are drained (so that closing does not reset the
// connection before the client has read the reply) until it has sent nothing for linger_for,
// or sent linger_bytes, or the body it announced (up to drain_bytes_most).
constexpr auto linger_for = 1s;
constexpr size_t linger_bytes = 1u << 20;
constexpr size_t drain_bytes_most = 64u << 20;
constexpr size_t read_size = 16u << 10;
constexpr int pulls_per_turn = 16;  // a source's pulls before the loop serves others

clock::duration duration_of(double s) {
  return std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(s));
}

// Allows this process at least `fds` open files, up to its hard limit.
void allow_open_files(rlim_t fds) {
  rlimit r{};
  if (::getrlimit(RLIMIT_NOFILE, &r) != 0 || r.rlim_cur >= fds) return;
  r.rlim_cur = std::min(fds, r.rlim_max);
  ::setrlimit(RLIMIT_NOFILE, &r);
}

}  // namespace

// The loop's parts, named so that http_server::loop may hold them.
namespace event_loop {

// What a connection is doing.
enum class phase {
  handshake,  // TLS, before its first request
  reading,    // waiting for (the rest of) a request
  handling,   // its route runs on a handler thread
  replying,   // its reply goes out, whole or pulled from a source
  lingering,  // its last reply sent, the client's remaining bytes drained before closing
};

struct connection {
  connection(uint64_t id, int fd, SSL_CTX* tls) : id(id), io(fd, tls) {}
  [[nodiscard]] size_t pending() const { return out.size() - out_sent; }

  const uint64_t id;
  socket_transport io;
  phase at = phase::handshake;
  bool admitted = true;              // under max_connections; else it is answered 503
  std::string in;                    // received and not yet part of a handled request
  std::optional<request_head> head;  // the request being read, once its head is in
  size_t head_bytes = 0;
  bool request_started = false;  // a byte of the next request has come
  bool sent_continue = false;
  int served = 0;          // replies completed
  bool keep_alive = true;  // of the reply being made
  bool head_only = false;
  std::string out;  // reply bytes from out_sent on are not yet sent
  size_t out_sent = 0;
  size_t accounted = 0;                // pending() as last counted in the server's buffered bytes
  std::optional<reply_writer> writer;  // of the reply being made
  std::shared_ptr<reply_source> source;
  bool reply_done = false;   // the whole reply is in `out`
  bool close_after = false;  // linger and close once it is sent
  bool write_shut = false;
  size_t linger_left = linger_bytes;                      // bytes still drained while lingering
  clock::time_point deadline = clock::time_point::max();  // handshake, reading, lingering
  clock::time_point last_write;                           // when `out` last moved (or filled)
  clock::time_point last_pull;
  socket_transport::wait read_wait = socket_transport::wait::readable;
  socket_transport::wait write_wait = socket_transport::wait::writable;
  uint32_t interest = 0;
};

// A route's answer, handed from a handler thread to the loop.
struct outcome {
  uint64_t connection;
  httplib::Response response;
  std::shared_ptr<reply_source> source;
};

struct route_entry {
  http_server::handler whole;
  http_server::deferred_handler deferred;
};

// What other threads hand the loop: woken sources and routes' answers. Outlives the server for
// the sources' wake functions, which do nothing once it is closed.
struct inbox {
  std::mutex mu;
  int fd = -1;  // eventfd the loop waits on
  bool closed = false;
  std::vector<uint64_t> woken;
  std::vector<outcome> done;

  void notify_locked() {
    if (woken.size() + done.size() == 1) {
      const uint64_t one = 1;
      (void)!::write(fd, &one, sizeof(one));
    }
  }
  void wake(uint64_t id) {
    std::lock_guard lock(mu);
    if (closed) return;
    woken.push_back(id);
    notify_locked();
  }
  void post(outcome o) {
    {
      std::lock_guard lock(mu);
      if (!closed) {
        done.push_back(std::move(o));
        notify_locked();
        return;
      }
    }
    if (o.source) o.source->abandoned();  // the server stopped while the route ran
  }
};

}  // namespace event_loop

using namespace event_loop;

struct http_server::loop {
  loop(http_limits l, refusal_body r) : limits(std::move(l)), refusal(std::move(r)) {}

  // --- set before start ---
  http_limits limits;
  refusal_body refusal;
  std::map<std::pair<std::string, std::string>, route_entry> routes;  // (method, path)
  pre_routing_handler pre_routing;
  handler not_found;
  std::shared_ptr<SSL_CTX> tls;

  // --- threads ---
  int listen_fd = -1;
  int epoll_fd = -1;
  std::shared_ptr<inbox> box = std::make_shared<inbox>();
  std::thread thread;
  std::atomic<bool> stopping{false};
  std::vector<std::thread> handlers;
  std::mutex task_mu;
  std::condition_variable task_added;
  std::deque<std::function<void()>> tasks;
  bool tasks_closed = false;
  std::atomic<int> admitted{0};
  std::atomic<size_t> buffered{0};

  // --- the loop thread's own ---
  std::unordered_map<int, std::unique_ptr<connection>> by_fd;
  std::unordered_map<uint64_t, connection*> by_id;
  uint64_t next_id = 1;
  int refusing = 0;
  bool accepting = true;
  clock::time_point now = clock::now();

  void run();
  void accept_all();
  void take_inbox();
  void sweep();
  bool drive(connection& c);
  bool receive(connection& c);
  void parse(connection& c);
  void dispatch(connection& c);
  void install(connection& c, outcome o);
  bool reply(connection& c);
  bool flush(connection& c);
  void finish(connection& c);
  void refuse(connection& c, int status, const std::string& message);
  void settle(connection& c);
  bool close(connection& c);
  void run_handlers();
  void handle(uint64_t id, const route_entry* route, const httplib::Request& req);
};

// ---------------------------------------------------------------- handler threads

void http_server::loop::run_handlers() {
  for (;;) {
    std::function<void()> task;
    {
      std::unique_lock lock(task_mu);
      task_added.wait(lock, [&] { return tasks_closed || !tasks.empty(); });
      if (tasks.empty()) return;
      task = std::move(tasks.front());
      tasks.pop_front();
    }
    task();
  }
}

void http_server::loop::handle(uint64_t id, const route_entry* route, const httplib::Request& req) {
  outcome o{id, {}, nullptr};
  httplib::Response& res = o.response;
  try {
    const bool answered = pre_routing && pre_routing(req, res);
    if (!answered && route == nullptr) {
      res.status = 404;
      if (not_found) {
        not_found(req, res);
      } else {
        res.set_content(refusal(404, absl::StrCat("no route for ", req.method, " ", req.path)),
                        "application/json");
      }
    } else if (!answered && route->whole) {
      route->whole(req, res);
    } else if (!answered) {
      o.source = route->deferred(req, res);
    }
  } catch (const std::exception& e) {
    o.source.reset();
    res = httplib::Response();
    res.status = 500;
    res.set_content(refusal(500, absl::StrCat("the server failed on this request: ", e.what())),
                    "application/json");
  }
  if (res.status < 0) res.status = 200;
  box->post(std::move(o));
}

// ---------------------------------------------------------------- the loop

void http_server::loop::run() {
  epoll_event events[256];
  auto next_sweep = clock::now() + sweep_every;
  while (!stopping) {
    const auto wait_ms = std::chrono::ceil<std::chrono::milliseconds>(next_sweep - clock::now());
    const int n = ::epoll_wait(epoll_fd, events, 256,
                               static_cast<int>(std::max<int64_t>(wait_ms.count(), 0)));
    now = clock::now();
    for (int k = 0; k < n; ++k) {
      const int fd = events[k].data.fd;
      if (fd == listen_fd) {
        accept_all();
      } else if (fd == box->fd) {
        uint64_t count = 0;
        (void)!::read(box->fd, &count, sizeof(count));
      } else if (auto it = by_fd.find(fd); it != by_fd.end()) {
        connection& c = *it->second;
        if ((events[k].events & EPOLLERR) != 0) {
          close(c);
        } else {
          drive(c);
        }
      }
    }
    take_inbox();
    if (now >= next_sweep) {
      sweep();
      next_sweep = now + sweep_every;
    }
  }
  // Each reply still being made gets a last pull, to answer that the server stops, and what
  // fits in the socket goes out.
  std::vector<connection*> replying;
  for (auto& [fd, c] : by_fd) {
    if (c->source && !c->reply_done) replying.push_back(c.get());
  }
  for (connection* c : replying) {
    c->writer->set_stopping();
    reply(*c);
  }
  while (!by_fd.empty())
    close(*by_fd.begin()->second);
}

void http_server::loop::accept_all() {
  while (accepting) {
    const int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        // Out of descriptors: the backlog waits until the next sweep rather than spinning.
        accepting = false;
        ::epoll_ctl(epoll_fd, EPOLL_CTL_DEL, listen_fd, nullptr);
      }
      return;
    }
    const bool admit = admitted.load() < limits.max_connections;
    if (!admit && refusing >= max_refusing) {
      ::close(fd);
      continue;
    }
    int yes = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &yes, sizeof(yes));  // tokens go out at once
    auto owned = std::make_unique<connection>(next_id++, fd, tls.get());
    connection& c = *owned;
    c.admitted = admit;
    admit ? ++admitted : ++refusing;
    c.deadline = now + duration_of(limits.read_timeout_s);  // the handshake, then the first byte
    c.at = tls ? phase::handshake : phase::reading;
    epoll_event e{};
    e.events = c.interest = EPOLLIN | EPOLLRDHUP;
    e.data.fd = fd;
    ::epoll_ctl(epoll_fd, EPOLL_CTL_ADD, fd, &e);
    by_id[c.id] = &c;
    by_fd[fd] = std::move(owned);
    if (!c.admitted && !tls) {
      refuse(c, 503,
             absl::StrCat("the server has ", limits.max_connections, " connections open",
                          limits.where("max_connections"), "; retry shortly"));
    }
    drive(c);
  }
}

void http_server::loop::take_inbox() {
  std::vector<uint64_t> woken;
  std::vector<outcome> done;
  {
    std::lock_guard lock(box->mu);
    woken.swap(box->woken);
    done.swap(box->done);
  }
  for (auto& o : done) {
    auto it = by_id.find(o.connection);
    if (it == by_id.end()) {
      if (o.source) o.source->abandoned();  // the client went away while its route ran
      continue;
    }
    install(*it->second, std::move(o));
  }
  for (const uint64_t id : woken) {
    if (auto it = by_id.find(id); it != by_id.end()) drive(*it->second);
  }
}

void http_server::loop::sweep() {
  if (!accepting) {  // descriptors may have been freed since
    accepting = true;
    epoll_event e{};
    e.events = EPOLLIN;
    e.data.fd = listen_fd;
    ::epoll_ctl(epoll_fd, EPOLL_CTL_ADD, listen_fd, &e);
  }
  std::vector<connection*> due;
  for (auto& [fd, c] : by_fd) {
    const bool stalled =
        c->pending() > 0 && now - c->last_write > duration_of(limits.write_timeout_s);
    const bool unpulled = c->source && !c->reply_done && now - c->last_pull >= pull_every;
    if (now >= c->deadline || stalled || unpulled) due.push_back(c.get());
  }
  for (connection* c : due) {
    if (c->pending() > 0 && now - c->last_write > duration_of(limits.write_timeout_s)) {
      close(*c);  // the client takes nothing: cut off, its reply abandoned
    } else if (now < c->deadline) {
      drive(*c);  // a source's periodic pull
    } else if (c->at == phase::reading && (c->request_started || c->served == 0)) {
      refuse(*c, 408,
             absl::StrCat("the request did not arrive within ", limits.read_timeout_s, " s",
                          limits.where("read_timeout_s")));
      drive(*c);
    } else {
      close(*c);  // a silent handshake, an idle kept-alive connection, a linger's end
    }
  }
}

// Everything a connection can do now without waiting, then what it waits for. False once closed.
bool http_server::loop::drive(connection& c) {
  if (c.at == phase::handshake) {
    socket_transport::result r;
    if (!c.io.handshake(r)) {
      if (r.closed) return close(c);
      c.read_wait = r.blocked;
      settle(c);
      return true;
    }
    c.at = phase::reading;
    c.read_wait = socket_transport::wait::readable;
    if (!c.admitted) {
      refuse(c, 503,
             absl::StrCat("the server has ", limits.max_connections, " connections open",
                          limits.where("max_connections"), "; retry shortly"));
    }
  }
  // A finished reply lets the next request (perhaps already received) in.
  for (int round = 0; round < requests_per_connection; ++round) {
    if (!receive(c)) return false;
    if (c.at == phase::reading) parse(c);
    if (c.at == phase::replying) {
      if (!reply(c)) return false;
    } else if (c.pending() > 0 && !flush(c)) {  // 100 Continue
      return false;
    }
    if (c.at != phase::replying || !c.reply_done || c.pending() > 0) break;
    finish(c);
  }
  if (c.at == phase::lingering && c.pending() == 0 && !c.write_shut) {
    c.io.shutdown_write();
    c.write_shut = true;
  }
  settle(c);
  return true;
}

bool http_server::loop::receive(connection& c) {
  const size_t cap = limits.max_header_bytes + limits.max_body_bytes;
  char buf[read_size];
  const auto draining = [&] { return c.at == phase::lingering || c.close_after; };
  while (draining() || c.in.size() < cap) {
    const socket_transport::result r = c.io.read(buf, sizeof(buf));
    if (r.closed) return close(c);  // the client went away (or, lingering, read its answer)
    if (r.bytes == 0) {
      c.read_wait = r.blocked;
      return true;
    }
    c.read_wait = socket_transport::wait::readable;
    if (draining()) {  // what follows a refused request is dropped
      if (r.bytes >= c.linger_left) return close(c);
      c.linger_left -= r.bytes;
      if (c.at == phase::lingering) c.deadline = now + linger_for;
      continue;
    }
    if (c.at == phase::reading && !c.request_started) {
      c.request_started = true;
      c.deadline = now + duration_of(limits.read_timeout_s);
    }
    c.in.append(buf, r.bytes);
  }
  return true;
}

void http_server::loop::parse(connection& c) {
  if (c.in.empty()) return;
  if (!c.head) {
    switch (scan_request_head(c.in, limits, &c.head_bytes)) {
      case head_scan::incomplete:
        return;
      case head_scan::url_too_long:
        return refuse(c, 414,
                      absl::StrCat("the request line is over ", limits.max_url_bytes, " bytes",
                                   limits.where("max_url_bytes")));
      case head_scan::headers_too_large:
        return refuse(c, 431,
                      absl::StrCat("the request headers are over ", limits.max_header_bytes,
                                   " bytes", limits.where("max_header_bytes")));
      case head_scan::complete:
        break;
    }
    auto parsed = parse_request_head(absl::string_view(c.in).substr(0, c.head_bytes), limits);
    if (auto* e = std::get_if<head_error>(&parsed)) {
      // A refused body may still be on its way: it is drained, as far as drain_bytes_most.
      const size_t arrived = c.in.size() - c.head_bytes;
      c.linger_left = std::max(linger_bytes, std::min(e->body_bytes, drain_bytes_most) -
                                                 std::min(e->body_bytes, arrived));
      return refuse(c, e->status, e->message);
    }
    c.head = std::get<request_head>(std::move(parsed));
  }
  const size_t whole = c.head_bytes + c.head->body_bytes;
  if (c.in.size() < whole) {
    if (c.head->expects_continue && !c.sent_continue) {
      c.out += "HTTP/1.1 100 Continue\r\n\r\n";
      c.last_write = now;
      c.sent_continue = true;
    }
    return;
  }
  dispatch(c);
}

void http_server::loop::dispatch(connection& c) {
  request_head head = std::move(*c.head);
  c.head.reset();
  httplib::Request req = std::move(head.request);
  req.body = c.in.substr(c.head_bytes, head.body_bytes);
  c.in.erase(0, c.head_bytes + head.body_bytes);
  c.io.peer(req.remote_addr, req.remote_port);
  c.at = phase::handling;
  c.deadline = clock::time_point::max();
  c.keep_alive = head.keep_alive && c.served + 1 < requests_per_connection && !stopping;
  c.head_only = req.method == "HEAD";
  const auto it = routes.find({c.head_only ? "GET" : req.method, req.path});
  const route_entry* route = it == routes.end() ? nullptr : &it->second;
  {
    std::lock_guard lock(task_mu);
    tasks.push_back([this, id = c.id, route, req = std::move(req)] { handle(id, route, req); });
  }
  task_added.notify_one();
}

void http_server::loop::install(connection& c, outcome o) {
  c.at = phase::replying;
  c.writer.emplace(c.out, c.keep_alive, c.head_only);
  c.reply_done = false;
  c.last_pull = now;
  if (o.source) {
    c.source = std::move(o.source);
    c.source->attach([box = box, id = c.id] { box->wake(id); });
  } else {
    c.writer->whole(o.response);
    c.reply_done = true;
    c.last_write = now;
  }
  drive(c);
}

// Pulls the reply's source while the client keeps up, and sends. False once closed.
bool http_server::loop::reply(connection& c) {
  for (int pulls = 0;; ++pulls) {
    const size_t before = c.pending();
    bool pulled = false;
    if (c.source && !c.reply_done && before < limits.reply_buffer_bytes) {
      if (pulls == pulls_per_turn) {
        box->wake(c.id);  // a source that always has more: the other connections go first
        return flush(c);
      }
      c.last_pull = now;
      if (c.source->pull(*c.writer)) {
        if (!c.writer->begun()) {
          httplib::Response r;
          r.status = 500;
          r.set_content(refusal(500, "the reply ended before it began"), "application/json");
          c.writer->whole(r);
        } else if (!c.writer->ended()) {
          c.writer->end();
        }
        c.reply_done = true;
        c.source.reset();
      }
      pulled = c.pending() > before || c.reply_done;
      if (before == 0 && c.pending() > 0) c.last_write = now;
    }
    if (!flush(c)) return false;
    // Pull again only if this pull gave something and all of it went out.
    if (!pulled || c.pending() > 0 || c.reply_done) return true;
  }
}

bool http_server::loop::flush(connection& c) {
  while (c.pending() > 0) {
    const socket_transport::result r = c.io.write(c.out.data() + c.out_sent, c.pending());
    if (r.closed) return close(c);
    if (r.bytes == 0) {
      c.write_wait = r.blocked;
      break;
    }
    c.write_wait = socket_transport::wait::writable;
    c.out_sent += r.bytes;
    c.last_write = now;
  }
  if (c.pending() == 0) {
    c.out.clear();
    c.out_sent = 0;
  } else if (c.out_sent > (64u << 10)) {
    c.out.erase(0, c.out_sent);
    c.out_sent = 0;
  }
  return true;
}

void http_server::loop::finish(connection& c) {
  ++c.served;
  c.writer.reset();
  c.sent_continue = false;
  if (c.close_after || !c.keep_alive) {
    c.at = phase::lingering;
    c.deadline = now + linger_for;
    c.in.clear();
    return;
  }
  c.at = phase::reading;
  c.request_started = !c.in.empty();
  c.deadline =
      now + duration_of(c.request_started ? limits.read_timeout_s : limits.keep_alive_timeout_s);
}

void http_server::loop::refuse(connection& c, int status, const std::string& message) {
  httplib::Response r;
  r.status = status;
  if (status == 503) r.set_header("Retry-After", "1");
  r.set_content(refusal(status, message), "application/json");
  if (c.source) std::exchange(c.source, nullptr)->abandoned();
  c.head.reset();
  c.in.clear();
  c.at = phase::replying;
  c.keep_alive = false;
  c.close_after = true;
  c.writer.emplace(c.out, false, false);
  c.writer->whole(r);
  c.reply_done = true;
  c.last_write = now;
  c.deadline = clock::time_point::max();
}

void http_server::loop::settle(connection& c) {
  using wait = socket_transport::wait;
  uint32_t want = 0;
  const auto on = [](wait w) { return w == wait::writable ? EPOLLOUT : EPOLLIN; };
  if (c.at == phase::handshake) {
    want = on(c.read_wait);
  } else {
    const size_t cap = limits.max_header_bytes + limits.max_body_bytes;
    if (c.at == phase::lingering || c.close_after || c.in.size() < cap) {
      want |= on(c.read_wait) | EPOLLRDHUP;
    }
    if (c.pending() > 0) want |= c.write_wait == wait::readable ? EPOLLIN : EPOLLOUT;
  }
  if (want != c.interest) {
    epoll_event e{};
    e.events = c.interest = want;
    e.data.fd = c.io.fd();
    ::epoll_ctl(epoll_fd, EPOLL_CTL_MOD, c.io.fd(), &e);
  }
  const size_t pending = c.pending();
  if (pending >= c.accounted) {
    buffered += pending - c.accounted;
  } else {
    buffered -= c.accounted - pending;
  }
  c.accounted = pending;
}

bool http_server::loop::close(connection& c) {
  if (c.source && !c.reply_done) std::exchange(c.source, nullptr)->abandoned();
  ::epoll_ctl(epoll_fd, EPOLL_CTL_DEL, c.io.fd(), nullptr);
  buffered -= c.accounted;
  c.admitted ? --admitted : --refusing;
  by_id.erase(c.id);
  by_fd.erase(c.io.fd());  // closes the socket
  return false;
}

// ---------------------------------------------------------------- the server

http_server::http_server(http_limits limits, refusal_body refusal)
    : loop_(std::make_unique<loop>(std::move(limits), std::move(refusal))) {}

http_server::~http_server() {
  loop& l = *loop_;
  if (l.thread.joinable()) {
    l.stopping = true;
    {
      std::lock_guard lock(l.box->mu);
      const uint64_t one = 1;
      (void)!::write(l.box->fd, &one, sizeof(one));
    }
    l.thread.join();  // every connection closed, every source abandoned
  }
  {
    std::lock_guard lock(l.box->mu);
    l.box->closed = true;
    for (auto& o : l.box->done) {
      if (o.source) o.source->abandoned();
    }
    l.box->done.clear();
  }
  {
    std::lock_guard lock(l.task_mu);
    l.tasks_closed = true;
    l.tasks.clear();  // routes not yet begun are not run
  }
  l.task_added.notify_all();
  for (auto& t : l.handlers)
    t.join();
  if (l.box->fd >= 0) ::close(l.box->fd);
  if (l.epoll_fd >= 0) ::close(l.epoll_fd);
  if (l.listen_fd >= 0) ::close(l.listen_fd);
}

void http_server::route(const std::string& method, const std::string& path, handler h) {
  loop_->routes[{method, path}] = route_entry{std::move(h), nullptr};
}

void http_server::route_deferred(const std::string& method, const std::string& path,
                                 deferred_handler h) {
  loop_->routes[{method, path}] = route_entry{nullptr, std::move(h)};
}

void http_server::set_pre_routing(pre_routing_handler h) {
  loop_->pre_routing = std::move(h);
}

void http_server::set_not_found(handler h) {
  loop_->not_found = std::move(h);
}

absl::Status http_server::use_tls(const std::string& cert, const std::string& key) {
  auto ctx = tls_server_context(cert, key);
  if (!ctx.ok()) return ctx.status();
  loop_->tls = *std::move(ctx);
  return absl::OkStatus();
}

int http_server::connections() const {
  return loop_->admitted.load();
}

size_t http_server::buffered_bytes() const {
  return loop_->buffered.load();
}

absl::StatusOr<int> http_server::start(const std::string& host, int port) {
  loop& l = *loop_;
  const auto failed = [&](const std::string& why) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", host, ":", port, ": ", why,
                                               " (in use? port 0 picks a free one)"));
  };
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* found = nullptr;
  if (const int e = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found);
      e != 0) {
    return failed(gai_strerror(e));
  }
  std::unique_ptr<addrinfo, void (*)(addrinfo*)> addresses(found, ::freeaddrinfo);
  int error = 0;
  for (addrinfo* a = found; a != nullptr && l.listen_fd < 0; a = a->ai_next) {
    const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) continue;
    int yes = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
    if (::bind(fd, a->ai_addr, a->ai_addrlen) == 0 && ::listen(fd, SOMAXCONN) == 0) {
      l.listen_fd = fd;
    } else {
      error = errno;
      ::close(fd);
    }
  }
  if (l.listen_fd < 0) return failed(std::strerror(error));
  sockaddr_storage bound{};
  socklen_t len = sizeof(bound);
  ::getsockname(l.listen_fd, reinterpret_cast<sockaddr*>(&bound), &len);
  const int bound_port =
      ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6&>(bound).sin6_port
                                        : reinterpret_cast<sockaddr_in&>(bound).sin_port);

  allow_open_files(static_cast<rlim_t>(l.limits.max_connections) + max_refusing + 1024);
  l.epoll_fd = ::epoll_create1(EPOLL_CLOEXEC);
  l.box->fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (l.epoll_fd < 0 || l.box->fd < 0) return failed(std::strerror(errno));
  for (const int fd : {l.listen_fd, l.box->fd}) {
    epoll_event e{};
    e.events = EPOLLIN;
    e.data.fd = fd;
    ::epoll_ctl(l.epoll_fd, EPOLL_CTL_ADD, fd, &e);
  }
  for (int k = 0; k < handler_threads; ++k)
    l.handlers.emplace_back([&l] { l.run_handlers(); });
  l.thread = std::thread([&l] { l.run(); });
  return bound_port;
}

}  // namespace troupe::http

// The serving API's HTTP server with thousands of streaming clients (docs/reliability.md):
// troupe's event loop (runtime/http/http_server) against cpp-httplib's own server with a thread
// per connection (what troupe's front end was, and what cpp-httplib users run), on the same
// workload, in the same run. Each server runs in a child process of its own; this process is the
// clients, on raw sockets.
//
// N clients each hold a stream (GET /events, Server-Sent Events). Once all have their first
// event, a tick (POST /tick) sends every stream one more event, as one engine step sends each
// request a token; the next tick goes once every client has the last one.
//
//   http_bench [--streams 2000] [--ticks 50]
//
// JSON lines (troupe's value, the baseline's, their ratio > 1 when troupe is better):
//   rss_kib_per_stream   the server's resident memory grown per stream held
//   threads              the server's threads with every stream held
//   tick_fanout_ms       from a tick to the last client's event, p50 and p99 over the ticks
//   events_per_s         events delivered over all streams by the ticks, one after the other

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "bench/bench_report.hpp"
#include "httplib.h"
#include "runtime/http/http_server.hpp"
#include "tests/support/proc_state.hpp"
#include "tests/support/raw_http_client.hpp"

namespace {

using clock_type = std::chrono::steady_clock;
using troupe::testing::raw_http_client;

// The ticks so far, and who waits for the next.
struct ticker {
  std::mutex mu;
  std::condition_variable ticked;
  int ticks = 0;
  std::vector<std::weak_ptr<const std::function<void()>>> watchers;

  void tick() {
    std::vector<std::shared_ptr<const std::function<void()>>> wake;
    {
      std::lock_guard lock(mu);
      ++ticks;
      for (auto& w : watchers) {
        if (auto f = w.lock()) wake.push_back(std::move(f));
      }
    }
    ticked.notify_all();
    for (auto& f : wake)
      (*f)();
  }
  int now() {
    std::lock_guard lock(mu);
    return ticks;
  }
};

std::string event(int tick) {
  return absl::StrCat("data: tick ", tick, "\n\n");
}

// troupe's stream: an event per tick, pulled by the event loop when the ticker wakes it.
class tick_source : public troupe::http::reply_source {
 public:
  explicit tick_source(ticker& t) : ticker_(t), seen_(t.now()) {}
  void attach(std::function<void()> wake) override {
    wake_ = std::make_shared<const std::function<void()>>(std::move(wake));
    std::lock_guard lock(ticker_.mu);
    ticker_.watchers.push_back(wake_);
  }
  bool pull(troupe::http::reply_writer& out) override {
    if (!out.begun()) {
      httplib::Response head;
      head.set_header("Content-Type", "text/event-stream");
      out.begin(head);
      out.write(event(seen_));
    }
    for (const int now = ticker_.now(); seen_ < now;)
      out.write(event(++seen_));
    return false;
  }
  void abandoned() override {}

 private:
  ticker& ticker_;
  int seen_;
  std::shared_ptr<const std::function<void()>> wake_;
};

[[noreturn]] void serve_troupe(int streams, int port_pipe) {
  ticker t;
  troupe::http::http_limits limits;
  limits.max_connections = streams + 64;
  troupe::http::http_server server(limits, [](int, const std::string& m) { return m; });
  server.route_deferred("GET", "/events", [&t](const httplib::Request&, httplib::Response&) {
    return std::make_shared<tick_source>(t);
  });
  server.route("POST", "/tick", [&t](const httplib::Request&, httplib::Response& res) {
    t.tick();
    res.set_content("ok", "text/plain");
  });
  const int port = server.start("127.0.0.1", 0).value();
  (void)!::write(port_pipe, &port, sizeof(port));
  for (;;)
    ::pause();
}

[[noreturn]] void serve_httplib(int streams, int port_pipe) {
  ticker t;
  httplib::Server server;
  server.new_task_queue = [streams] { return new httplib::ThreadPool(streams + 64); };
  server.Get("/events", [&t](const httplib::Request&, httplib::Response& res) {
    auto seen = std::make_shared<int>(-1);
    res.set_chunked_content_provider(
        "text/event-stream", [&t, seen](size_t, httplib::DataSink& sink) {
          std::unique_lock lock(t.mu);
          if (*seen >= 0)
            t.ticked.wait_for(lock, std::chrono::seconds(1), [&] { return t.ticks > *seen; });
          const int now = t.ticks;
          lock.unlock();
          std::string chunk;
          for (*seen = std::max(*seen, now - 1); *seen < now;)
            chunk += event(++*seen);
          return chunk.empty() || sink.write(chunk.data(), chunk.size());
        });
  });
  server.Post("/tick", [&t](const httplib::Request&, httplib::Response& res) {
    t.tick();
    res.set_content("ok", "text/plain");
  });
  // cpp-httplib listens with a backlog of 5; a burst of clients needs the system's maximum.
  int listening = -1;
  server.set_socket_options([&listening](socket_t fd) {
    int yes = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
    listening = fd;
  });
  const int port = server.bind_to_any_port("127.0.0.1");
  ::listen(listening, SOMAXCONN);
  (void)!::write(port_pipe, &port, sizeof(port));
  server.listen_after_bind();
  std::_Exit(0);
}

struct figures {
  double rss_kib_per_stream = 0;
  int threads = 0;
  std::vector<double> fanout_ms;
  double events_per_s = 0;
  bool complete = false;
};

// Reads every client's socket until each has `marker`; false if one does not within 60 s.
bool all_received(std::vector<std::unique_ptr<raw_http_client>>& clients,
                  std::vector<std::string>& received, const std::string& marker) {
  const int ep = ::epoll_create1(0);
  int waiting = 0;
  for (size_t i = 0; i < clients.size(); ++i) {
    if (received[i].find(marker) != std::string::npos) continue;
    epoll_event e{};
    e.events = EPOLLIN;
    e.data.u64 = i;
    ::epoll_ctl(ep, EPOLL_CTL_ADD, clients[i]->fd(), &e);
    ++waiting;
  }
  const auto until = clock_type::now() + std::chrono::seconds(60);
  epoll_event events[256];
  char buf[4096];
  while (waiting > 0 && clock_type::now() < until) {
    const int n = ::epoll_wait(ep, events, 256, 100);
    for (int k = 0; k < n; ++k) {
      const size_t i = events[k].data.u64;
      const ssize_t got = ::recv(clients[i]->fd(), buf, sizeof(buf), MSG_DONTWAIT);
      if (got <= 0) continue;
      received[i].append(buf, static_cast<size_t>(got));
      if (received[i].find(marker) != std::string::npos) {
        ::epoll_ctl(ep, EPOLL_CTL_DEL, clients[i]->fd(), nullptr);
        --waiting;
        received[i].clear();  // only what comes after matters from now on
      }
    }
  }
  ::close(ep);
  return waiting == 0;
}

figures measure(bool troupe_server, int streams, int ticks) {
  int pipe_fds[2];
  if (::pipe(pipe_fds) != 0) std::abort();
  const pid_t child = ::fork();
  if (child == 0) {
    ::close(pipe_fds[0]);
    troupe_server ? serve_troupe(streams, pipe_fds[1]) : serve_httplib(streams, pipe_fds[1]);
  }
  ::close(pipe_fds[1]);
  int port = 0;
  figures f;
  if (::read(pipe_fds[0], &port, sizeof(port)) != sizeof(port)) return f;
  ::close(pipe_fds[0]);

  const int64_t rss_before = troupe::testing::resident_kib(child);
  std::vector<std::unique_ptr<raw_http_client>> clients;
  std::vector<std::string> received(streams);
  for (int i = 0; i < streams; ++i) {
    clients.push_back(std::make_unique<raw_http_client>(port));
    clients.back()->send("GET /events HTTP/1.1\r\nHost: x\r\n\r\n");
  }
  f.complete = all_received(clients, received, event(0));
  f.rss_kib_per_stream =
      static_cast<double>(troupe::testing::resident_kib(child) - rss_before) / streams;
  f.threads = troupe::testing::thread_count(child);
  const auto first = clock_type::now();
  for (int k = 1; k <= ticks && f.complete; ++k) {
    const auto start = clock_type::now();
    httplib::Client control("127.0.0.1", port);
    f.complete =
        control.Post("/tick", "", "text/plain") && all_received(clients, received, event(k));
    f.fanout_ms.push_back(
        std::chrono::duration<double, std::milli>(clock_type::now() - start).count());
  }
  f.events_per_s = static_cast<double>(streams) * ticks /
                   std::chrono::duration<double>(clock_type::now() - first).count();
  clients.clear();
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  return f;
}

}  // namespace

int main(int argc, char** argv) {
  int streams = 2000, ticks = 50;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--streams" && i + 1 < argc) {
      streams = std::stoi(argv[++i]);
    } else if (a == "--ticks" && i + 1 < argc) {
      ticks = std::stoi(argv[++i]);
    } else {
      return troupe::bench::unknown_argument("http_bench", a);
    }
  }
  rlimit files{};
  ::getrlimit(RLIMIT_NOFILE, &files);
  files.rlim_cur = files.rlim_max;
  ::setrlimit(RLIMIT_NOFILE, &files);
  if (files.rlim_max < static_cast<rlim_t>(streams) + 256) {
    std::fprintf(stderr, "http_bench: %d streams need %d open files; the hard limit is %ld\n",
                 streams, streams + 256, static_cast<long>(files.rlim_max));
    return 1;
  }
  const figures ours = measure(true, streams, ticks);
  const figures theirs = measure(false, streams, ticks);
  if (!ours.complete || !theirs.complete) {
    std::fprintf(stderr, "http_bench: a stream missed an event (troupe %d, cpp-httplib %d)\n",
                 ours.complete, theirs.complete);
    return 1;
  }
  using troupe::bench::better;
  using troupe::bench::report;
  const nlohmann::json extra = {{"streams", streams}, {"ticks", ticks}};
  const std::string baseline = "cpp-httplib, a thread per connection";
  report("http_bench", "rss_kib_per_stream", {ours.rss_kib_per_stream}, "KiB", baseline,
         {theirs.rss_kib_per_stream}, better::lower, extra);
  report("http_bench", "threads", {static_cast<double>(ours.threads)}, "threads", baseline,
         {static_cast<double>(theirs.threads)}, better::lower, extra);
  const auto pct = [](std::vector<double> v, double p) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0.0 : v[std::min(v.size() - 1, static_cast<size_t>(p * v.size()))];
  };
  report("http_bench", "tick_fanout_ms_p50", {pct(ours.fanout_ms, 0.5)}, "ms", baseline,
         {pct(theirs.fanout_ms, 0.5)}, better::lower, extra);
  report("http_bench", "tick_fanout_ms_p99", {pct(ours.fanout_ms, 0.99)}, "ms", baseline,
         {pct(theirs.fanout_ms, 0.99)}, better::lower, extra);
  report("http_bench", "events_per_s", {ours.events_per_s}, "events/s", baseline,
         {theirs.events_per_s}, better::higher, extra);
  return 0;
}

// The head at scale, simulated (docs/cluster.md "How many members"): the real `troupe head`
// process against 1,000 to 10,000 simulated members, lightweight clients spread over a few
// processes. Each member is one DEALER socket that speaks the control protocol
// (docs/protocol.md) as a worker's node agent does: it joins, heartbeats at the default interval
// with a metrics text of a real worker's size, and takes the head's membership pushes.
//
//   head_scale_bench [--members 1000,5000,10000] [--processes 4] [--seconds 10]
//                    [--metrics-bytes 4096] [--wave W]
//
// Per member count it prints JSON lines:
//   join_storm_s           every member joins at once; until the last has its `joined`
//                          (with --wave W, join_in_waves_s: each process joins W members at a
//                          time, the next W once they have their replies)
//   heartbeat_p50_ms/p99   heartbeat to `heartbeat.ok`, steady state; the baseline is a raw
//                          ZeroMQ ROUTER that answers each frame unread, with the same members
//   dead_detection_s       a member goes silent; until another member's push says it is dead,
//                          against the bound (interval x misses) + 0.5 s
//   declared_dead_by_mistake  members that kept heartbeating but whose heartbeats the head
//                          refused by then (declared dead: their heartbeats came too late)
//   status_ms, status_bytes  `status` (every member) as `troupe status` asks it
//   rendezvous_s           every member sets its address, counts itself in, and waits for the
//                          last one's "done" key (kv.set, kv.add, kv.wait)
//   head_cores, head_rss_mb  the head's CPU (user + system over wall time) in the steady state,
//                          and its peak resident memory
//   push_mb_per_member     membership pushes received per member during the run
//
// The member processes share the machine with the head, so on a small machine the latencies
// include their scheduling too; the raw ROUTER's figures show that floor.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <queue>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/wait.h>
#include <unistd.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "bench/bench_report.hpp"
#include "runtime/cluster/envelope.hpp"
#include "runtime/cluster/msgpack_view.hpp"
#include "zmq.hpp"

namespace troupe::bench {
namespace {

using clock_type = std::chrono::steady_clock;
using cluster::envelope;
using cluster::map_builder;
using cluster::map_view;

constexpr const char* token = "head-scale-bench";
constexpr int heartbeat_ms = 500;  // the default cluster.heartbeat_interval_ms
constexpr int heartbeat_misses = 4;

double since(clock_type::time_point t0, clock_type::time_point t) {
  return std::chrono::duration<double>(t - t0).count();
}

// ---- the parent's side of a member process: a pipe each way, lines of text ----------------

struct member_process {
  pid_t pid = -1;
  int to_child = -1;
  int from_child = -1;
  std::string buffered;

  void say(const std::string& line) const {
    const std::string l = line + "\n";
    (void)!write(to_child, l.data(), l.size());
  }
  // The next line from the child, waiting up to `limit`; empty when none came.
  std::string hear(std::chrono::milliseconds limit) {
    const auto deadline = clock_type::now() + limit;
    while (buffered.find('\n') == std::string::npos) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock_type::now());
      if (left.count() <= 0) return {};
      pollfd p{from_child, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
      char buf[65536];
      const ssize_t n = read(from_child, buf, sizeof buf);
      if (n <= 0) return {};
      buffered.append(buf, static_cast<size_t>(n));
    }
    const size_t nl = buffered.find('\n');
    std::string line = buffered.substr(0, nl);
    buffered.erase(0, nl + 1);
    return line;
  }
};

// ---- one member process ----------------------------------------------------------------------

// What a member process is told: which members it runs, where the head is.
struct member_plan {
  std::string endpoint;
  int first = 0;  // the global index of its first member
  int count = 0;
  int total = 0;
  bool observer = false;  // runs member 0, which goes silent, and member 1, which watches
  size_t metrics_bytes = 4096;
};

class member_swarm {
 public:
  member_swarm(const member_plan& plan, int control_in, int control_out)
      : plan_(plan), in_(control_in), out_(control_out) {
    context_.set(zmq::ctxopt::max_sockets, plan.count + 64);
    metrics_text_ = fake_metrics(plan.metrics_bytes);
    for (int i = 0; i < plan.count; ++i) {
      sockets_.emplace_back(context_, zmq::socket_type::dealer);
      sockets_.back().set(zmq::sockopt::linger, 0);
      sockets_.back().set(zmq::sockopt::rcvhwm, 0);
      sockets_.back().connect(plan.endpoint);
    }
    epoll_ = epoll_create1(EPOLL_CLOEXEC);
    for (int i = 0; i < plan.count; ++i) {
      epoll_event e{};
      e.events = EPOLLIN;
      e.data.u32 = static_cast<uint32_t>(i);
      epoll_ctl(epoll_, EPOLL_CTL_ADD, sockets_[i].get(zmq::sockopt::fd), &e);
    }
    epoll_event c{};
    c.events = EPOLLIN;
    c.data.u32 = control_slot;
    epoll_ctl(epoll_, EPOLL_CTL_ADD, in_, &c);
    nodes_.resize(plan.count);
    sent_at_.resize(plan.count);
    rdzv_done_.resize(plan.count, false);
  }

  // Serves the parent's commands until "stop"; every reply is one line.
  void run() {
    std::string command;
    while (true) {
      if (!read_command(command)) return;
      if (command.starts_with("join ")) {
        join(std::stoi(command.substr(5)));
      } else if (command.starts_with("heartbeat ")) {
        heartbeat_until(std::stod(command.substr(10)));
      } else if (command.starts_with("silence ")) {
        silence(std::stod(command.substr(8)));
      } else if (command == "rendezvous") {
        rendezvous();
      } else if (command == "stop") {
        nlohmann::json out{{"push_bytes", push_bytes_}, {"pushes", pushes_}};
        say(out.dump());
        return;
      }
    }
  }

 private:
  static std::string fake_metrics(size_t bytes) {
    std::string text;
    for (int i = 0; text.size() < bytes; ++i)
      text += absl::StrCat("troupe_sim_series_", i, "{actor=\"worker/", i % 7, "\"} ", i, "\n");
    return text;
  }

  // One control line from the parent, serving the sockets meanwhile.
  bool read_command(std::string& line) {
    while (control_.find('\n') == std::string::npos) {
      pump(std::chrono::milliseconds(20), true);
      if (control_closed_) return false;
    }
    const size_t nl = control_.find('\n');
    line = control_.substr(0, nl);
    control_.erase(0, nl + 1);
    return true;
  }

  void say(const std::string& line) const {
    const std::string l = line + "\n";
    (void)!write(out_, l.data(), l.size());
  }

  void send(int i, const std::string& type, const std::string& payload) {
    envelope h{.type = type, .src = nodes_[i].empty() ? "sim" : nodes_[i], .corr = ++corr_};
    const std::string frame = cluster::encode(h, payload);
    (void)sockets_[i].send(zmq::buffer(frame), zmq::send_flags::dontwait);
    sent_on_.push_back(i);  // a send may take the edge that announces a frame: look again
  }

  // Waits up to `wait` for frames (and, with `control`, the parent's commands), handles them,
  // and sends the heartbeats due. Thousands of sockets: an epoll set of their ZMQ_FDs, so a turn
  // costs what is ready, not the number of sockets (zmq_poll would look at every one).
  void pump(std::chrono::milliseconds wait, bool control) {
    epoll_event ready[256];
    const auto now0 = clock_type::now();
    if (!due_.empty()) {
      const auto until =
          std::chrono::duration_cast<std::chrono::milliseconds>(due_.top().first - now0);
      wait = std::clamp(until, std::chrono::milliseconds(0), wait);
    }
    const int n = epoll_wait(epoll_, ready, 256, static_cast<int>(wait.count()));
    for (int k = 0; k < n; ++k) {
      const int i = static_cast<int>(ready[k].data.u32);
      if (i == control_slot) {
        if (!control) continue;
        char buf[4096];
        const ssize_t got = read(in_, buf, sizeof buf);
        if (got <= 0) {
          control_closed_ = true;
        } else {
          control_.append(buf, static_cast<size_t>(got));
        }
        continue;
      }
      drain(i);
    }
    const auto now = clock_type::now();
    while (!due_.empty() && due_.top().first <= now) {
      const int i = due_.top().second;
      due_.pop();
      if (silent_ && i == 0) continue;
      sent_at_[i] = now;
      send(i, "heartbeat", map_builder().add("metrics", metrics_text_).bytes());
      due_.emplace(now + std::chrono::milliseconds(heartbeat_ms), i);
      if (i == 0) last_victim_heartbeat_ = now;
    }
    while (!sent_on_.empty()) {
      for (int i : std::exchange(sent_on_, {}))
        drain(i);
    }
  }

  // Handles every frame waiting on member `i`'s socket.
  void drain(int i) {
    zmq::message_t msg;
    while (sockets_[i].get(zmq::sockopt::events) & ZMQ_POLLIN) {
      if (!sockets_[i].recv(msg, zmq::recv_flags::dontwait)) break;
      handle(i, msg);
    }
  }

  void handle(int i, const zmq::message_t& msg) {
    const auto now = clock_type::now();
    auto env = cluster::decode(static_cast<const char*>(msg.data()), msg.size(), 1u << 30);
    if (!env.ok()) return;
    const std::string& type = env->header.type;
    if (type == "joined") {
      auto map = map_view::of(env->payload, "joined");
      if (map.ok()) nodes_[i] = map->get_string("node", "").value_or("");
      ++joined_;
      last_joined_ = now;
      // Heartbeats start at once, as a node agent's do, spread over the interval by index.
      due_.emplace(now + std::chrono::microseconds(int64_t{heartbeat_ms} * 1000 *
                                                   (plan_.first + i) / plan_.total),
                   i);
    } else if (type == "error") {
      // The head refuses the heartbeats of a member it declared dead (FAILED_PRECONDITION): one
      // that was not silent was declared dead by mistake (its heartbeats came too late).
      auto map = map_view::of(env->payload, "error");
      if (map.ok() && map->get_string("code", "").value_or("") == "FAILED_PRECONDITION" &&
          !(silent_ && i == 0)) {
        mistaken_dead_.insert(i);
      }
    } else if (type == "heartbeat.ok") {
      if (measuring_) latencies_ms_.push_back(since(sent_at_[i], now) * 1000);
    } else if (type == "members") {
      ++pushes_;
      push_bytes_ += msg.size();
      if (plan_.observer && i == 1 && silent_ && !detected_) watch_for_death(*env, now);
    } else if (type == "kv.count") {
      auto map = map_view::of(env->payload, "kv.count");
      // Member 0 is dead by then (silence): the others are the ranks.
      if (map.ok() && map->get_int("value", 0).value_or(0) == plan_.total - 1) {
        send(i, "kv.set",
             map_builder().add("key", std::string("rdzv/done")).add_bin("value", "1").bytes());
      }
    } else if (type == "kv.value") {
      if (!rdzv_done_[i]) {
        rdzv_done_[i] = true;
        ++rdzv_finished_;
        last_rdzv_ = now;
      }
    }
  }

  // Whether member 0's record in a push says it is dead.
  void watch_for_death(const cluster::received_envelope& env, clock_type::time_point now) {
    auto map = map_view::of(env.payload, "members");
    if (!map.ok()) return;
    const msgpack::object* list = map->find("members");
    if (list == nullptr || list->type != msgpack::type::ARRAY) return;
    for (uint32_t k = 0; k < list->via.array.size; ++k) {
      auto m = map_view::of(list->via.array.ptr[k], "member");
      if (!m.ok() || m->get_string("node", "").value_or("") != nodes_[0]) continue;
      if (m->get_string("state", "").value_or("") == "dead") {
        detected_ = true;
        detected_at_ = now;
      }
    }
  }

  // Joins every member: all at once (`wave` 0: the storm), or `wave` at a time, each wave
  // once the previous one has its replies.
  void join(int wave) {
    const auto t0 = clock_type::now();
    const auto deadline = t0 + std::chrono::seconds(600);
    const int step = wave > 0 ? wave : plan_.count;
    for (int first = 0; first < plan_.count; first += step) {
      const int last = std::min(plan_.count, first + step);
      for (int i = first; i < last; ++i) {
        send(i, "join",
             map_builder()
                 .add("token", std::string(token))
                 .add("endpoint", absl::StrCat("tcp://127.0.0.1:", 20000 + plan_.first + i))
                 .add("host", std::string("sim"))
                 .add("pid", static_cast<int64_t>(getpid()))
                 .bytes());
      }
      while (joined_ < last && clock_type::now() < deadline)
        pump(std::chrono::milliseconds(5), false);
    }
    say(nlohmann::json{{"joined", joined_}, {"last_s", since(t0, last_joined_)}}.dump());
  }

  void heartbeat_until(double seconds) {
    measuring_ = true;
    const auto end = clock_type::now() + std::chrono::duration<double>(seconds);
    while (clock_type::now() < end)
      pump(std::chrono::milliseconds(5), false);
    measuring_ = false;
    std::sort(latencies_ms_.begin(), latencies_ms_.end());
    nlohmann::json out{{"count", latencies_ms_.size()}};
    // A sample of 200 quantiles: the parent merges the processes' distributions from them.
    std::vector<double> q;
    for (int k = 0; k < 200 && !latencies_ms_.empty(); ++k)
      q.push_back(latencies_ms_[latencies_ms_.size() * k / 200]);
    if (!latencies_ms_.empty()) q.push_back(latencies_ms_.back());
    out["quantiles"] = q;
    latencies_ms_.clear();
    say(out.dump());
  }

  // Member 0 stops heartbeating; member 1 watches the pushes for its death (observer only).
  void silence(double limit_s) {
    silent_ = plan_.observer;
    const auto end = clock_type::now() + std::chrono::duration<double>(limit_s);
    while (!detected_ && clock_type::now() < end)
      pump(std::chrono::milliseconds(2), false);
    nlohmann::json out{{"detected", detected_}, {"mistaken_dead", mistaken_dead_.size()}};
    if (detected_) out["after_s"] = since(last_victim_heartbeat_, detected_at_);
    say(out.dump());
  }

  void rendezvous() {
    const auto t0 = clock_type::now();
    for (int i = 0; i < plan_.count; ++i) {
      if (silent_ && i == 0) {
        rdzv_done_[i] = true;  // the silent member is dead: it takes no part
        ++rdzv_finished_;
        continue;
      }
      const int rank = plan_.first + i;
      send(i, "kv.set",
           map_builder()
               .add("key", absl::StrCat("rdzv/addr/", rank))
               .add_bin("value", absl::StrCat("tcp://127.0.0.1:", 30000 + rank))
               .bytes());
      send(i, "kv.add",
           map_builder().add("key", std::string("rdzv/count")).add("delta", int64_t{1}).bytes());
      send(i, "kv.wait",
           map_builder()
               .add("key", std::string("rdzv/done"))
               .add("timeout_ms", uint64_t{600000})
               .bytes());
    }
    const auto deadline = t0 + std::chrono::seconds(600);
    while (rdzv_finished_ < plan_.count && clock_type::now() < deadline)
      pump(std::chrono::milliseconds(2), false);
    say(nlohmann::json{{"finished", rdzv_finished_}, {"last_s", since(t0, last_rdzv_)}}.dump());
  }

  member_plan plan_;
  int in_, out_;
  zmq::context_t context_;
  std::vector<zmq::socket_t> sockets_;
  std::vector<std::string> nodes_;
  static constexpr int control_slot = -1;
  int epoll_ = -1;
  // (when, member): the heartbeats to send, soonest first.
  std::priority_queue<std::pair<clock_type::time_point, int>,
                      std::vector<std::pair<clock_type::time_point, int>>, std::greater<>>
      due_;
  std::vector<clock_type::time_point> sent_at_;
  std::vector<int> sent_on_;  // sockets sent on since the last look at their frames
  std::vector<bool> rdzv_done_;
  std::string metrics_text_;
  std::string control_;
  bool control_closed_ = false;
  uint64_t corr_ = 0;
  int joined_ = 0, rdzv_finished_ = 0;
  clock_type::time_point last_joined_, last_rdzv_, last_victim_heartbeat_, detected_at_;
  bool measuring_ = false, silent_ = false, detected_ = false;
  std::set<int> mistaken_dead_;  // members whose heartbeats the head refused
  std::vector<double> latencies_ms_;
  uint64_t push_bytes_ = 0, pushes_ = 0;
};

member_process fork_members(const member_plan& plan) {
  int down[2], up[2];
  if (pipe(down) != 0 || pipe(up) != 0) return {};
  const pid_t pid = fork();
  if (pid == 0) {
    close(down[1]);
    close(up[0]);
    {
      member_swarm swarm(plan, down[0], up[1]);
      swarm.run();
    }
    _exit(0);
  }
  close(down[0]);
  close(up[1]);
  return {pid, down[1], up[0], {}};
}

// ---- the head (or the raw baseline) ----------------------------------------------------------

struct head_process {
  pid_t pid = -1;
  std::string endpoint;
};

// Starts `troupe head` on a free loopback port; its endpoint from its first line.
head_process start_head(const std::string& troupe) {
  int out[2];
  if (pipe(out) != 0) return {};
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(out[1], STDERR_FILENO);
    const int null_fd = open("/dev/null", O_WRONLY);
    dup2(null_fd, STDOUT_FILENO);
    setenv("TROUPE_CLUSTER_TOKEN", token, 1);
    execl(troupe.c_str(), troupe.c_str(), "head", "--listen", "tcp://127.0.0.1:0", "--http", "off",
          static_cast<char*>(nullptr));
    _exit(127);
  }
  close(out[1]);
  member_process reader{-1, -1, out[0], {}};
  head_process h{pid, {}};
  for (int i = 0; i < 20 && h.endpoint.empty(); ++i) {
    const std::string line = reader.hear(std::chrono::seconds(10));
    const size_t at = line.find("listening on ");
    if (at != std::string::npos) h.endpoint = line.substr(at + 13);
    if (line.empty()) break;
  }
  // The head keeps writing (joins, deaths): drain its output so that it never blocks.
  std::thread([fd = out[0]] {
    char buf[65536];
    while (read(fd, buf, sizeof buf) > 0) {
    }
    close(fd);
  }).detach();
  return h;
}

// A raw ZeroMQ ROUTER that answers joins with a node id and every other frame with an empty
// reply of the type the head would use: the transport's floor for the same members.
class raw_router {
 public:
  raw_router() : socket_(context_, zmq::socket_type::router) {
    socket_.set(zmq::sockopt::linger, 0);
    socket_.set(zmq::sockopt::sndhwm, 0);
    socket_.set(zmq::sockopt::rcvhwm, 0);
    socket_.set(zmq::sockopt::backlog, 65535);  // as the head's (head_server.cpp)
    socket_.bind("tcp://127.0.0.1:0");
    endpoint_ = socket_.get(zmq::sockopt::last_endpoint);
    thread_ = std::thread([this] { loop(); });
  }
  ~raw_router() {
    stop_ = true;
    thread_.join();
  }
  const std::string& endpoint() const { return endpoint_; }

 private:
  void loop() {
    int next = 0;
    while (!stop_) {
      zmq::pollitem_t item{socket_.handle(), 0, ZMQ_POLLIN, 0};
      zmq::poll(&item, 1, std::chrono::milliseconds(20));
      zmq::message_t id, body;
      while (socket_.recv(id, zmq::recv_flags::dontwait)) {
        (void)socket_.recv(body, zmq::recv_flags::none);
        auto env = cluster::decode(static_cast<const char*>(body.data()), body.size(), 1u << 30);
        if (!env.ok()) continue;
        envelope h{.type = env->header.type == "join" ? "joined" : "heartbeat.ok",
                   .src = "head",
                   .corr = env->header.corr};
        const std::string reply =
            env->header.type == "join"
                ? cluster::encode(h, map_builder().add("node", absl::StrCat("w", ++next)).bytes())
                : cluster::encode(h);
        socket_.send(id, zmq::send_flags::sndmore);
        socket_.send(zmq::buffer(reply), zmq::send_flags::dontwait);
      }
    }
  }

  zmq::context_t context_;
  zmq::socket_t socket_;
  std::string endpoint_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// User + system CPU seconds of `pid`, and its peak resident memory (MB).
double cpu_seconds(pid_t pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/stat"));
  std::string text((std::istreambuf_iterator<char>(in)), {});
  const size_t close_paren = text.rfind(')');
  if (close_paren == std::string::npos) return 0;
  std::vector<std::string> f = absl::StrSplit(text.substr(close_paren + 2), ' ');
  double utime = 0, stime = 0;
  if (f.size() < 13 || !absl::SimpleAtod(f[11], &utime) || !absl::SimpleAtod(f[12], &stime)) {
    return 0;
  }
  return (utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

double peak_rss_mb(pid_t pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/status"));
  for (std::string line; std::getline(in, line);) {
    if (line.starts_with("VmHWM:")) return std::stod(line.substr(6)) / 1024.0;
  }
  return 0;
}

// `status`, as `troupe status` asks it: (milliseconds, reply bytes).
std::pair<double, size_t> ask_status(const std::string& endpoint) {
  zmq::context_t context;
  zmq::socket_t s(context, zmq::socket_type::dealer);
  s.set(zmq::sockopt::linger, 0);
  s.connect(endpoint);
  const auto t0 = clock_type::now();
  const std::string frame = cluster::encode(envelope{.type = "status", .src = "bench", .corr = 1},
                                            map_builder().add("token", std::string(token)).bytes());
  s.send(zmq::buffer(frame));
  zmq::message_t reply;
  zmq::pollitem_t item{s.handle(), 0, ZMQ_POLLIN, 0};
  if (zmq::poll(&item, 1, std::chrono::seconds(30)) <= 0 || !s.recv(reply)) return {-1, 0};
  return {since(t0, clock_type::now()) * 1000, reply.size()};
}

struct swarm {
  std::vector<member_process> processes;

  swarm(const std::string& endpoint, int members, int count, size_t metrics_bytes) {
    for (int p = 0; p < count; ++p) {
      const int first = members * p / count;
      const int last = members * (p + 1) / count;
      processes.push_back(
          fork_members({endpoint, first, last - first, members, p == 0, metrics_bytes}));
    }
  }
  // Sends `command` to every process, and collects one JSON line from each.
  std::vector<nlohmann::json> all(const std::string& command, std::chrono::seconds limit) {
    for (auto& p : processes)
      p.say(command);
    std::vector<nlohmann::json> out;
    for (auto& p : processes)
      out.push_back(nlohmann::json::parse(p.hear(limit), nullptr, false));
    return out;
  }
  ~swarm() {
    for (auto& p : processes) {
      close(p.to_child);
      close(p.from_child);
      kill(p.pid, SIGKILL);
      waitpid(p.pid, nullptr, 0);
    }
  }
};

// The p-th quantile (0..1) of the latencies the processes sampled, weighted by their counts.
double merged_quantile(const std::vector<nlohmann::json>& parts, double p) {
  std::vector<std::pair<double, double>> weighted;  // (value, weight)
  double total = 0;
  for (const auto& part : parts) {
    // A process that did not answer in time (or a late answer to the previous command).
    if (!part.is_object() || !part.contains("count") || !part.contains("quantiles")) continue;
    const auto& q = part["quantiles"];
    const double n = part["count"].get<double>();
    if (q.empty()) continue;
    for (size_t k = 0; k < q.size(); ++k) {
      weighted.emplace_back(q[k].get<double>(), n / static_cast<double>(q.size()));
      total += n / static_cast<double>(q.size());
    }
  }
  std::sort(weighted.begin(), weighted.end());
  double seen = 0;
  for (const auto& [v, w] : weighted) {
    seen += w;
    if (seen >= p * total) return v;
  }
  return weighted.empty() ? -1 : weighted.back().first;
}

void emit(int members, const std::string& metric, double value, const std::string& unit,
          nlohmann::json extra = nlohmann::json::object()) {
  extra["bench"] = "head_scale_bench";
  extra["members"] = members;
  extra["metric"] = metric;
  extra["value"] = value;
  extra["unit"] = unit;
  std::printf("%s\n", extra.dump().c_str());
  std::fflush(stdout);
}

// The raw ROUTER's heartbeat latencies for `members` members.
std::pair<double, double> raw_baseline(int members, int processes, double seconds,
                                       size_t metrics_bytes, int wave) {
  raw_router router;
  swarm s(router.endpoint(), members, processes, metrics_bytes);
  s.all(absl::StrCat("join ", wave), std::chrono::seconds(600));
  auto parts = s.all(absl::StrCat("heartbeat ", seconds), std::chrono::seconds(600));
  s.all("stop", std::chrono::seconds(60));
  return {merged_quantile(parts, 0.5), merged_quantile(parts, 0.99)};
}

void measure(const std::string& troupe, int members, int processes, double seconds,
             size_t metrics_bytes, int wave) {
  // The baseline first, on its own: its members beside the head's would double the load.
  const auto [raw50, raw99] = raw_baseline(members, processes, seconds, metrics_bytes, wave);
  const head_process head = start_head(troupe);
  if (head.endpoint.empty()) {
    std::fprintf(stderr, "head_scale_bench: cannot start %s head\n", troupe.c_str());
    std::exit(1);
  }
  {
    swarm s(head.endpoint, members, processes, metrics_bytes);
    // The join storm: every member at once.
    const double cpu0 = cpu_seconds(head.pid);
    const auto t0 = clock_type::now();
    auto joined = s.all(absl::StrCat("join ", wave), std::chrono::seconds(900));
    double storm_s = 0;
    int count = 0;
    for (const auto& j : joined) {
      if (!j.is_object()) continue;
      storm_s = std::max(storm_s, j["last_s"].get<double>());
      count += j["joined"].get<int>();
    }
    const double storm_wall = since(t0, clock_type::now());
    emit(members, wave == 0 ? "join_storm_s" : "join_in_waves_s", storm_s, "s",
         {{"joined", count},
          {"wave", wave * processes},
          {"head_cores", (cpu_seconds(head.pid) - cpu0) / storm_wall}});
    // The steady state: heartbeats, and `status` asked now and then.
    const double cpu1 = cpu_seconds(head.pid);
    const auto t1 = clock_type::now();
    std::vector<double> status_ms;
    size_t status_bytes = 0;
    std::thread asker([&] {
      for (int k = 0; k < 5; ++k) {
        std::this_thread::sleep_for(std::chrono::duration<double>(seconds / 6));
        auto [ms, bytes] = ask_status(head.endpoint);
        if (ms >= 0) status_ms.push_back(ms);
        status_bytes = bytes;
      }
    });
    auto parts = s.all(absl::StrCat("heartbeat ", seconds), std::chrono::seconds(900));
    asker.join();
    const double head_cores = (cpu_seconds(head.pid) - cpu1) / since(t1, clock_type::now());
    const double p50 = merged_quantile(parts, 0.5), p99 = merged_quantile(parts, 0.99);
    emit(members, "heartbeat_p50_ms", p50, "ms",
         {{"baseline", "raw ZeroMQ ROUTER"}, {"baseline_value", raw50}, {"ratio", raw50 / p50}});
    emit(members, "heartbeat_p99_ms", p99, "ms",
         {{"baseline", "raw ZeroMQ ROUTER"},
          {"baseline_value", raw99},
          {"ratio", raw99 / p99},
          {"target_ms", 50}});
    emit(members, "head_cores", head_cores, "cores", {{"target", 1.0}});
    emit(members, "status_ms", median(status_ms), "ms", {{"bytes", status_bytes}});
    // A member goes silent: how long until the others hear it is dead.
    const double bound_s = heartbeat_ms * heartbeat_misses / 1000.0;
    auto silence = s.all(absl::StrCat("silence ", bound_s + 30), std::chrono::seconds(120));
    const auto& watched = silence.front();
    emit(members, "dead_detection_s",
         watched.is_object() && watched.value("detected", false) ? watched["after_s"].get<double>()
                                                                 : -1,
         "s", {{"bound_s", bound_s}, {"target_s", bound_s + 0.5}});
    // Members that kept heartbeating but were declared dead by then (their heartbeats came too
    // late): the head refused their heartbeats.
    int mistaken_dead = 0;
    for (const auto& part : silence) {
      if (part.is_object()) mistaken_dead += part.value("mistaken_dead", 0);
    }
    emit(members, "declared_dead_by_mistake", mistaken_dead, "members", {{"target", 0}});
    // Every member through the key-value store at once.
    auto rdzv = s.all("rendezvous", std::chrono::seconds(900));
    double rdzv_s = 0;
    for (const auto& r : rdzv) {
      if (r.is_object()) rdzv_s = std::max(rdzv_s, r["last_s"].get<double>());
    }
    emit(members, "rendezvous_s", rdzv_s, "s", {{"ranks", members - 1}});
    auto ends = s.all("stop", std::chrono::seconds(60));
    double push_bytes = 0;
    for (const auto& e : ends) {
      if (e.is_object()) push_bytes += e["push_bytes"].get<double>();
    }
    emit(members, "push_mb_per_member", push_bytes / members / 1e6, "MB");
    emit(members, "head_rss_mb", peak_rss_mb(head.pid), "MB");
  }
  kill(head.pid, SIGTERM);
  waitpid(head.pid, nullptr, 0);
}

}  // namespace
}  // namespace troupe::bench

int main(int argc, char** argv) {
  std::vector<int> members = {1000, 5000, 10000};
  int processes = 4;
  double seconds = 10;
  size_t metrics_bytes = 4096;
  int wave = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--members" && i + 1 < argc) {
      members.clear();
      for (auto part : absl::StrSplit(argv[++i], ','))
        members.push_back(std::stoi(std::string(part)));
    } else if (a == "--processes" && i + 1 < argc) {
      processes = std::stoi(argv[++i]);
    } else if (a == "--seconds" && i + 1 < argc) {
      seconds = std::stod(argv[++i]);
    } else if (a == "--wave" && i + 1 < argc) {
      wave = std::stoi(argv[++i]);
    } else if (a == "--metrics-bytes" && i + 1 < argc) {
      metrics_bytes = std::stoul(argv[++i]);
    } else {
      return troupe::bench::unknown_argument("head_scale_bench", a);
    }
  }
  signal(SIGPIPE, SIG_IGN);
  for (int n : members)
    troupe::bench::measure(TROUPE_BINARY, n, processes, seconds, metrics_bytes, wave);
  return 0;
}

// In-process actor messaging through troupe's actor API (instrumented role actors spawned with
// role_context) against raw CAF actors doing exactly the same, in the same run:
//
//   ping_pong            two actors send (ping, int32) back and forth; us per round trip
//   request_response     a client awaits each request's response before the next; us per call
//   one_way              a sender fires messages at a receiver; messages per second
//
// Usage: actor_bench [--repeats N] [--round-trips N] [--messages N]

#include <chrono>
#include <cstring>
#include <future>
#include <string>

#include "bench/bench_report.hpp"
#include "runtime/actor/messages.hpp"
#include "runtime/actor/role_context.hpp"
#include "runtime/actor/system_config.hpp"
#include "runtime/app/app_plan.hpp"

namespace troupe::bench {
namespace {

using clock = std::chrono::steady_clock;
using actor::ping_atom;
using actor::ping_atom_v;

// The peer of every test: answers a ping with the next number.
using echo_actor = caf::typed_actor<caf::replies_to<ping_atom, int32_t>::with<int32_t>>;
// Receives pings without answering.
using sink_actor = caf::typed_actor<caf::reacts_to<ping_atom, int32_t>>;
// Drives a test: started once, reports when done through a promise.
using driver_actor = caf::typed_actor<caf::reacts_to<int32_t>>;

echo_actor::behavior_type echo_behavior() {
  return {[](ping_atom, int32_t x) { return x + 1; }};
}

// Everything a benchmark spawns, in one of two flavours.
class spawner {
 public:
  virtual ~spawner() = default;
  virtual echo_actor echo() = 0;
  virtual sink_actor sink(int32_t expected, std::promise<void>* done) = 0;
  virtual driver_actor ping_pong(echo_actor peer, int32_t n, std::promise<void>* done) = 0;
  virtual driver_actor requester(echo_actor peer, int32_t n, std::promise<void>* done) = 0;
  virtual driver_actor firehose(sink_actor peer, int32_t n) = 0;
};

// Behaviors shared by both flavours; `Self` is the CAF or the troupe self pointer.
template <class Self>
driver_actor::behavior_type ping_pong_behavior(Self self, echo_actor peer, int32_t n,
                                               std::promise<void>* done) {
  return {[=](int32_t x) {
    if (x >= n) {
      done->set_value();
      self->quit();
      return;
    }
    // Answers arrive as plain int32 messages: a send-based ping-pong, as in ANCHORS.md.
    self->send(peer, ping_atom_v, x);
  }};
}

template <class Self>
void request_loop(Self self, echo_actor peer, int32_t i, int32_t n, std::promise<void>* done) {
  if (i >= n) {
    done->set_value();
    self->quit();
    return;
  }
  self->request(peer, caf::infinite, ping_atom_v, i).then([=](int32_t next) {
    request_loop(self, peer, next, n, done);
  });
}

template <class Self>
sink_actor::behavior_type sink_behavior(Self self, int32_t expected, std::promise<void>* done) {
  auto count = std::make_shared<int32_t>(0);
  return {[=](ping_atom, int32_t) {
    if (++*count == expected) {
      done->set_value();
      self->quit();
    }
  }};
}

class raw_caf : public spawner {
 public:
  explicit raw_caf(caf::actor_system& sys) : sys_(sys) {}
  echo_actor echo() override {
    return sys_.spawn([](echo_actor::pointer) { return echo_behavior(); });
  }
  sink_actor sink(int32_t expected, std::promise<void>* done) override {
    return sys_.spawn(
        [=](sink_actor::pointer self) { return sink_behavior(self, expected, done); });
  }
  driver_actor ping_pong(echo_actor peer, int32_t n, std::promise<void>* done) override {
    return sys_.spawn(
        [=](driver_actor::pointer self) { return ping_pong_behavior(self, peer, n, done); });
  }
  driver_actor requester(echo_actor peer, int32_t n, std::promise<void>* done) override {
    return sys_.spawn([=](driver_actor::pointer self) -> driver_actor::behavior_type {
      return {[=](int32_t start) { request_loop(self, peer, start, n, done); }};
    });
  }
  driver_actor firehose(sink_actor peer, int32_t n) override {
    return sys_.spawn([=](driver_actor::pointer self) -> driver_actor::behavior_type {
      return {[=](int32_t) {
        for (int32_t i = 0; i < n; ++i)
          self->send(peer, ping_atom_v, i);
        self->quit();
      }};
    });
  }

 private:
  caf::actor_system& sys_;
};

class troupe_actors : public spawner {
 public:
  troupe_actors(caf::actor_system& sys, actor::role_context& ctx) : sys_(sys), ctx_(ctx) {}
  echo_actor echo() override {
    return ctx_.spawn<echo_actor>([](actor::role_pointer<echo_actor>) { return echo_behavior(); });
  }
  sink_actor sink(int32_t expected, std::promise<void>* done) override {
    return ctx_.spawn<sink_actor>(
        [=](actor::role_pointer<sink_actor> self) { return sink_behavior(self, expected, done); });
  }
  driver_actor ping_pong(echo_actor peer, int32_t n, std::promise<void>* done) override {
    return ctx_.spawn<driver_actor>([=](actor::role_pointer<driver_actor> self) {
      return ping_pong_behavior(self, peer, n, done);
    });
  }
  driver_actor requester(echo_actor peer, int32_t n, std::promise<void>* done) override {
    return ctx_.spawn<driver_actor>(
        [=](actor::role_pointer<driver_actor> self) -> driver_actor::behavior_type {
          return {[=](int32_t start) { request_loop(self, peer, start, n, done); }};
        });
  }
  driver_actor firehose(sink_actor peer, int32_t n) override {
    return ctx_.spawn<driver_actor>(
        [=](actor::role_pointer<driver_actor> self) -> driver_actor::behavior_type {
          return {[=](int32_t) {
            for (int32_t i = 0; i < n; ++i)
              self->send(peer, ping_atom_v, i);
            self->quit();
          }};
        });
  }

 private:
  caf::actor_system& sys_;
  actor::role_context& ctx_;
};

double seconds_since(clock::time_point t0) {
  return std::chrono::duration<double>(clock::now() - t0).count();
}

// Microseconds per round trip of a send-based ping-pong.
double ping_pong_us(spawner& s, int32_t n) {
  std::promise<void> done;
  auto peer = s.echo();
  auto t0 = clock::now();
  auto driver = s.ping_pong(peer, n, &done);
  caf::anon_send(driver, int32_t{0});
  done.get_future().wait();
  const double us = seconds_since(t0) * 1e6 / n;
  caf::anon_send_exit(peer, caf::exit_reason::user_shutdown);
  return us;
}

// Microseconds per request/response with one request outstanding.
double request_response_us(spawner& s, int32_t n) {
  std::promise<void> done;
  auto peer = s.echo();
  auto driver = s.requester(peer, n, &done);
  auto t0 = clock::now();
  caf::anon_send(driver, int32_t{0});
  done.get_future().wait();
  const double us = seconds_since(t0) * 1e6 / n;
  caf::anon_send_exit(peer, caf::exit_reason::user_shutdown);
  return us;
}

// One-way messages per second from one sender to one receiver.
double one_way_per_s(spawner& s, int32_t n) {
  std::promise<void> done;
  auto sink = s.sink(n, &done);
  auto driver = s.firehose(sink, n);
  auto t0 = clock::now();
  caf::anon_send(driver, int32_t{0});
  done.get_future().wait();
  return n / seconds_since(t0);
}

int arg(int argc, char** argv, const char* name, int fallback) {
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], name) == 0) return std::atoi(argv[i + 1]);
  }
  return fallback;
}

}  // namespace
}  // namespace troupe::bench

int main(int argc, char** argv) {
  using namespace troupe;
  using namespace troupe::bench;
  const int repeats = arg(argc, argv, "--repeats", 7);
  const int round_trips = arg(argc, argv, "--round-trips", 200000);
  const int messages = arg(argc, argv, "--messages", 1000000);

  auto cfg = actor::make_system_config({.scheduler_threads = 2});
  caf::actor_system system{*cfg};
  metrics::registry metrics;
  run::event_log events;
  app::app_plan plan;
  actor::role_context ctx{system, metrics, events, plan, "bench", 0};
  raw_caf raw(system);
  troupe_actors ours(system, ctx);

  struct series {
    const char* metric;
    const char* unit;
    better direction;
    double (*run)(spawner&, int32_t);
    int32_t n;
    std::vector<double> raw, troupe;
  };
  std::vector<series> all = {
      {"ping_pong_latency", "us", better::lower, ping_pong_us, round_trips, {}, {}},
      {"request_response_latency", "us", better::lower, request_response_us, round_trips, {}, {}},
      {"one_way_throughput", "msg/s", better::higher, one_way_per_s, messages, {}, {}},
  };
  for (auto& s : all)
    (void)s.run(ours, s.n / 10);  // warm up
  // Interleave the two flavours so that machine noise hits both alike.
  for (int r = 0; r < repeats; ++r) {
    for (auto& s : all) {
      s.raw.push_back(s.run(raw, s.n));
      s.troupe.push_back(s.run(ours, s.n));
    }
  }
  for (auto& s : all) {
    report("actor_bench", s.metric, s.troupe, s.unit, "raw_caf", s.raw, s.direction,
           {{"n", s.n}, {"scheduler_threads", 2}});
  }
  return 0;
}

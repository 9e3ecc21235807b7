// In-process actor messaging through troupe's actor API (instrumented actors spawned with
// role_context, on troupe's scheduler) against raw CAF actors running the same behaviors on a
// stock CAF actor system (default configuration, as many threads), in the same run:
//
//   ping_pong_latency         two actors send (ping, int32) back and forth; us per round trip
//   request_response_latency  a client awaits each response before the next request; us
//   one_way_throughput        a sender fires messages at a receiver; messages per second
//
// Each metric's second line ("<metric>.scheduler_only") runs plain CAF actors on troupe's actor
// system, against the same baseline: what troupe's scheduler costs or saves, without the actors'
// instrumentation (the first line has both).
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

// Answers a ping with the next number.
using echo_actor = caf::typed_actor<caf::replies_to<ping_atom, int32_t>::with<int32_t>>;
// Receives pings without answering.
using sink_actor = caf::typed_actor<caf::reacts_to<ping_atom, int32_t>>;
// Drives a test once started with an int32.
using driver_actor = caf::typed_actor<caf::reacts_to<int32_t>>;

// The two flavours under test differ only in how an actor is spawned; `make_behavior` gets the
// flavour's self pointer.
struct raw_caf {
  caf::actor_system& system;
  template <class Handle, class F>
  Handle spawn(F make_behavior) {
    return system.spawn([make_behavior](typename Handle::pointer self) ->
                        typename Handle::behavior_type { return make_behavior(self); });
  }
};

struct troupe_api {
  actor::role_context& ctx;
  template <class Handle, class F>
  Handle spawn(F make_behavior) {
    return ctx.spawn<Handle>([make_behavior](actor::role_pointer<Handle> self) ->
                             typename Handle::behavior_type { return make_behavior(self); });
  }
};

template <class Flavour>
echo_actor spawn_echo(Flavour& flavour) {
  return flavour.template spawn<echo_actor>([](auto) -> echo_actor::behavior_type {
    return {[](ping_atom, int32_t x) { return x + 1; }};
  });
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

// Starts `driver` and returns the seconds until it reports `done`.
double run_driver(const driver_actor& driver, std::promise<void>& done) {
  const auto t0 = clock::now();
  caf::anon_send(driver, int32_t{0});
  done.get_future().wait();
  return std::chrono::duration<double>(clock::now() - t0).count();
}

// Microseconds per round trip of a send-based ping-pong (as in ANCHORS.md).
template <class Flavour>
double ping_pong_us(Flavour flavour, int32_t n) {
  std::promise<void> done;
  auto peer = spawn_echo(flavour);
  auto driver = flavour.template spawn<driver_actor>([&](auto self) -> driver_actor::behavior_type {
    return {[self, peer, n, d = &done](int32_t x) {
      if (x >= n) {
        d->set_value();
        self->quit();
        return;
      }
      self->send(peer, ping_atom_v, x);  // the answer comes back as a plain int32
    }};
  });
  const double us = run_driver(driver, done) * 1e6 / n;
  caf::anon_send_exit(peer, caf::exit_reason::user_shutdown);
  return us;
}

// Microseconds per request/response with one request outstanding.
template <class Flavour>
double request_response_us(Flavour flavour, int32_t n) {
  std::promise<void> done;
  auto peer = spawn_echo(flavour);
  auto driver = flavour.template spawn<driver_actor>([&](auto self) -> driver_actor::behavior_type {
    return {[self, peer, n, d = &done](int32_t start) { request_loop(self, peer, start, n, d); }};
  });
  const double us = run_driver(driver, done) * 1e6 / n;
  caf::anon_send_exit(peer, caf::exit_reason::user_shutdown);
  return us;
}

// One-way messages per second from one sender to one receiver.
template <class Flavour>
double one_way_per_s(Flavour flavour, int32_t n) {
  std::promise<void> done;
  auto sink = flavour.template spawn<sink_actor>([&](auto self) -> sink_actor::behavior_type {
    return {[self, n, d = &done, count = int32_t{0}](ping_atom, int32_t) mutable {
      if (++count == n) {
        d->set_value();
        self->quit();
      }
    }};
  });
  auto driver = flavour.template spawn<driver_actor>([&](auto self) -> driver_actor::behavior_type {
    return {[self, sink, n](int32_t) {
      for (int32_t i = 0; i < n; ++i)
        self->send(sink, ping_atom_v, i);
      self->quit();
    }};
  });
  return n / run_driver(driver, done);
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
  caf::actor_system_config stock_cfg;
  stock_cfg.set("scheduler.max-threads", size_t{2});
  caf::actor_system stock{stock_cfg};
  const raw_caf raw{stock};
  const troupe_api ours{ctx};
  const raw_caf plain_on_ours{system};

  struct series {
    const char* metric;
    const char* unit;
    better direction;
    double (*run_raw)(raw_caf, int32_t);
    double (*run_ours)(troupe_api, int32_t);
    int32_t n;
    std::vector<double> raw, troupe, scheduler_only;
  };
  std::vector<series> all = {
      {"ping_pong_latency", "us", better::lower, ping_pong_us<raw_caf>, ping_pong_us<troupe_api>,
       round_trips},
      {"request_response_latency", "us", better::lower, request_response_us<raw_caf>,
       request_response_us<troupe_api>, round_trips},
      {"one_way_throughput", "msg/s", better::higher, one_way_per_s<raw_caf>,
       one_way_per_s<troupe_api>, messages},
  };
  for (auto& s : all)
    (void)s.run_ours(ours, s.n / 10);  // warm up
  // Interleave the two flavours so that machine noise hits both alike.
  for (int r = 0; r < repeats; ++r) {
    for (auto& s : all) {
      s.raw.push_back(s.run_raw(raw, s.n));
      s.troupe.push_back(s.run_ours(ours, s.n));
      s.scheduler_only.push_back(s.run_raw(plain_on_ours, s.n));
    }
  }
  for (auto& s : all) {
    report("actor_bench", s.metric, s.troupe, s.unit, "raw_caf", s.raw, s.direction,
           {{"n", s.n}, {"scheduler_threads", 2}});
    report("actor_bench", std::string(s.metric) + ".scheduler_only", s.scheduler_only, s.unit,
           "raw_caf", s.raw, s.direction, {{"n", s.n}, {"scheduler_threads", 2}});
  }
  return 0;
}

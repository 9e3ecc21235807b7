// Cross-process request/response through troupe (an actor calling an actor in another process
// through the control plane) against two baselines doing the same, in the same run, between the
// same two processes: raw ZeroMQ DEALER/ROUTER + msgpack, and CAF's own remote actors
// (caf::io::middleman, BASP over TCP: publish / remote_actor):
//
//   one_outstanding   a call waits for its answer before the next: calls per second
//   64_in_flight      64 calls outstanding at all times: calls per second
//
// The benchmark forks: the parent runs the head and the calling side, the child joins as a
// worker and answers (an echo actor, published to troupe and through CAF's middleman, and a raw
// ROUTER echo thread).
//
// Usage: remote_bench [--repeats N] [--calls N] [--window N] [--only troupe|raw|caf]
//   --window N runs only that window, --only one side (for profiling).

#include <chrono>
#include <cstdio>
#include <cstring>
#include <future>
#include <string>
#include <thread>

#include <sys/wait.h>
#include <unistd.h>

#include "bench/bench_report.hpp"
#include "caf/io/all.hpp"
#include "runtime/actor/messages.hpp"
#include "runtime/actor/system_config.hpp"
#include "runtime/cluster/head_server.hpp"
#include "runtime/cluster/node_agent.hpp"
#include "runtime/cluster/zmq_util.hpp"

namespace troupe::bench {
namespace {

using clock = std::chrono::steady_clock;
using echo_actor = caf::typed_actor<caf::replies_to<actor::ping_atom, int32_t>::with<int32_t>>;
using driver_actor = caf::typed_actor<caf::reacts_to<int32_t>>;
constexpr const char* token = "bench";
constexpr size_t max_frame = 1 << 20;

// -- the answering process ----------------------------------------------------------------------

// A raw ROUTER that answers msgpack [seq, "ping"] with [seq, "pong"].
void raw_echo(zmq::context_t& context, int report_fd, std::atomic<bool>& stop) {
  zmq::socket_t router(context, zmq::socket_type::router);
  cluster::configure_socket(router, max_frame);
  auto endpoint = cluster::bind_socket(router, "tcp://127.0.0.1:0");
  const std::string line = endpoint.value_or("") + "\n";
  (void)!write(report_fd, line.data(), line.size());  // one write: a pipe delivers it whole
  zmq::pollitem_t item{router.handle(), 0, ZMQ_POLLIN, 0};
  while (!stop.load()) {
    zmq::poll(&item, 1, std::chrono::milliseconds(50));
    while (true) {
      auto frames = cluster::try_recv(router);
      if (!frames.ok() || frames->size() != 2) break;
      auto handle =
          msgpack::unpack(static_cast<const char*>((*frames)[1].data()), (*frames)[1].size());
      const auto& request = handle.get();
      msgpack::sbuffer reply;
      msgpack::packer<msgpack::sbuffer> pk(reply);
      pk.pack_array(2);
      pk.pack(request.via.array.ptr[0].as<int64_t>());
      pk.pack("pong");
      const auto id = (*frames)[0].to_string_view();
      (void)cluster::send(router, {absl::string_view(id.data(), id.size()),
                                   absl::string_view(reply.data(), reply.size())});
    }
  }
}

// Says why the benchmark (or its child, `who`) stops; its exit status.
int failed(const char* who, const std::string& why) {
  std::fprintf(stderr, "remote_bench (%s): %s\n", who, why.c_str());
  return 1;
}

// Reads one newline-terminated line from `fd`.
std::string read_line(int fd) {
  std::string line;
  char c;
  while (read(fd, &c, 1) == 1 && c != '\n')
    line += c;
  return line;
}

int serve(int endpoint_fd, int report_fd) {
  const std::string head = read_line(endpoint_fd);
  if (head.empty()) return failed("child", "the parent sent no head endpoint");
  zmq::context_t context;
  auto cfg = actor::make_system_config({.scheduler_threads = 2});
  cfg->load<caf::io::middleman>();
  caf::actor_system system{*cfg};
  metrics::registry metrics;
  auto echo = system.spawn([]() -> echo_actor::behavior_type {
    return {[](actor::ping_atom, int32_t x) { return x + 1; }};
  });
  // The same actor through CAF's middleman; its port first, then the raw echo's endpoint.
  auto port = system.middleman().publish(echo, 0, "127.0.0.1");
  if (!port) {
    return failed("child", "CAF's middleman could not publish the echo actor: " +
                               caf::to_string(port.error()));
  }
  const std::string port_line = std::to_string(*port) + "\n";
  (void)!write(report_fd, port_line.data(), port_line.size());
  auto node =
      cluster::node_agent::start(context, system, {.head = head, .credentials = {.token = token}},
                                 metrics, [&](cluster::node_agent& agent) {
                                   agent.publish("echo/0", caf::actor_cast<caf::actor>(echo));
                                   return absl::OkStatus();
                                 });
  if (!node.ok()) return failed("child", std::string(node.status().message()));
  std::atomic<bool> stop{false};
  std::thread raw([&] { raw_echo(context, report_fd, stop); });
  (void)(*node)->wait();
  stop.store(true);
  raw.join();
  caf::anon_send_exit(echo, caf::exit_reason::user_shutdown);
  return 0;
}

// -- the calling process -----------------------------------------------------------------------

// Calls per second from an actor here to the echo actor `remote` (through troupe, or through
// CAF's middleman) with `window` calls outstanding.
double actor_calls(caf::actor_system& system, const caf::actor& remote, int calls, int window) {
  std::promise<void> done;
  auto peer = caf::actor_cast<echo_actor>(remote);
  auto driver = system.spawn([&, peer](driver_actor::pointer self) -> driver_actor::behavior_type {
    auto sent = std::make_shared<int>(0);
    auto answered = std::make_shared<int>(0);
    auto call = std::make_shared<std::function<void()>>();
    *call = [=, &done] {
      const int32_t i = (*sent)++;
      self->request(peer, caf::infinite, actor::ping_atom_v, i)
          .then(
              [=, &done](int32_t) {
                if (++*answered == calls) {
                  done.set_value();
                  self->quit();
                } else if (*sent < calls) {
                  (*call)();
                }
              },
              [=](caf::error& e) {
                std::fprintf(stderr, "remote_bench: %s\n", caf::to_string(e).c_str());
                std::abort();
              });
    };
    return {[=](int32_t) {
      for (int k = 0; k < window && *sent < calls; ++k)
        (*call)();
    }};
  });
  const auto t0 = clock::now();
  caf::anon_send(driver, int32_t{0});
  done.get_future().wait();
  return calls / std::chrono::duration<double>(clock::now() - t0).count();
}

// Calls per second through a raw DEALER with `window` calls outstanding.
double raw_calls(zmq::socket_t& dealer, int calls, int window) {
  auto send_call = [&](int64_t i) {
    msgpack::sbuffer buf;
    msgpack::packer<msgpack::sbuffer> pk(buf);
    pk.pack_array(2);
    pk.pack(i);
    pk.pack("ping");
    dealer.send(zmq::const_buffer(buf.data(), buf.size()), zmq::send_flags::none);
  };
  const auto t0 = clock::now();
  int sent = 0;
  for (; sent < window && sent < calls; ++sent)
    send_call(sent);
  for (int answered = 0; answered < calls;) {
    zmq::message_t reply;
    if (!dealer.recv(reply, zmq::recv_flags::none)) continue;
    auto handle = msgpack::unpack(static_cast<const char*>(reply.data()), reply.size());
    (void)handle.get().via.array.ptr[0].as<int64_t>();
    ++answered;
    if (sent < calls) send_call(sent++);
  }
  return calls / std::chrono::duration<double>(clock::now() - t0).count();
}

const char* arg(int argc, char** argv, const char* name) {
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], name) == 0) return argv[i + 1];
  }
  return nullptr;
}

int arg(int argc, char** argv, const char* name, int fallback) {
  const char* value = arg(argc, argv, name);
  return value != nullptr ? std::atoi(value) : fallback;
}

}  // namespace
}  // namespace troupe::bench

int main(int argc, char** argv) {
  using namespace troupe;
  using namespace troupe::bench;
  const int repeats = arg(argc, argv, "--repeats", 5);
  const int calls = arg(argc, argv, "--calls", 20000);
  int to_child[2], from_child[2];
  if (pipe(to_child) != 0 || pipe(from_child) != 0) return failed("parent", "no pipes");
  const pid_t child = fork();  // before any thread exists
  if (child == 0) {
    close(to_child[1]);
    close(from_child[0]);
    _exit(serve(to_child[0], from_child[1]));
  }
  close(to_child[0]);
  close(from_child[1]);

  zmq::context_t context;
  metrics::registry metrics;
  run::event_log events;
  auto head = cluster::head_server::start(
      context, "tcp://127.0.0.1:0", {.credentials = {.token = token}}, max_frame, metrics, events);
  if (!head.ok()) return failed("parent", std::string(head.status().message()));
  const std::string endpoint = (*head)->endpoint();
  const std::string line = endpoint + "\n";
  (void)!write(to_child[1], line.data(), line.size());
  const int caf_port = std::atoi(read_line(from_child[0]).c_str());
  const std::string raw_endpoint = read_line(from_child[0]);

  auto cfg = actor::make_system_config({.scheduler_threads = 2});
  cfg->load<caf::io::middleman>();
  caf::actor_system system{*cfg};
  auto node = cluster::node_agent::start(
      context, system, {.head = endpoint, .credentials = {.token = token}, .as_head = true},
      metrics);
  if (!node.ok()) return failed("parent", std::string(node.status().message()));
  caf::actor remote;
  for (int tries = 0; tries < 200 && !remote; ++tries) {
    if (auto r = (*node)->resolve("echo/0", std::chrono::milliseconds(500)); r.ok()) remote = *r;
    if (!remote) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (!remote) return failed("parent", "the child's echo/0 did not resolve within 200 tries");
  auto caf_remote = system.middleman().remote_actor<echo_actor>("127.0.0.1", caf_port);
  if (!caf_remote) {
    return failed("parent", "CAF's middleman could not reach the child's echo at port " +
                                std::to_string(caf_port) + ": " +
                                caf::to_string(caf_remote.error()));
  }
  zmq::socket_t dealer(context, zmq::socket_type::dealer);
  cluster::configure_socket(dealer, max_frame);
  dealer.connect(raw_endpoint);

  struct series {
    const char* metric;
    int window;
    int calls;
    std::vector<double> troupe, raw, caf_io;
  };
  std::vector<series> all = {{"one_outstanding", 1, calls / 4, {}, {}, {}},
                             {"64_in_flight", 64, calls * 4, {}, {}, {}}};
  if (const int only = arg(argc, argv, "--window", 0); only > 0) {
    std::erase_if(all, [only](const series& s) { return s.window != only; });
  }
  const char* only = arg(argc, argv, "--only");
  const auto runs = [only](const char* side) {
    return only == nullptr || std::strcmp(only, side) == 0;
  };
  const caf::actor caf_echo = caf::actor_cast<caf::actor>(*caf_remote);
  for (auto& s : all) {  // warm up
    if (runs("troupe")) (void)actor_calls(system, remote, s.calls / 10, s.window);
    if (runs("raw")) (void)raw_calls(dealer, s.calls / 10, s.window);
    if (runs("caf")) (void)actor_calls(system, caf_echo, s.calls / 10, s.window);
  }
  for (int r = 0; r < repeats; ++r) {
    for (auto& s : all) {
      s.raw.push_back(runs("raw") ? raw_calls(dealer, s.calls, s.window) : 0);
      s.troupe.push_back(runs("troupe") ? actor_calls(system, remote, s.calls, s.window) : 0);
      // The same calling actor; only the path to the echo differs.
      s.caf_io.push_back(runs("caf") ? actor_calls(system, caf_echo, s.calls, s.window) : 0);
    }
  }
  for (auto& s : all) {
    report("remote_bench", s.metric, s.troupe, "calls/s", "raw_zeromq_msgpack", s.raw,
           better::higher, {{"window", s.window}, {"calls", s.calls}});
    report("remote_bench", s.metric + std::string(".vs_caf_io"), s.troupe, "calls/s",
           "caf_io_middleman", s.caf_io, better::higher,
           {{"window", s.window}, {"calls", s.calls}});
  }
  (*head)->stop("benchmark done");
  node->reset();
  int status = 0;
  waitpid(child, &status, 0);
  return 0;
}

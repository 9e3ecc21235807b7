// troupe head, troupe worker and troupe status.

#include <atomic>
#include <cstdio>
#include <mutex>
#include <thread>

#include <signal.h>
#include <unistd.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "actors/health_monitor_actor.hpp"
#include "actors/role_host_actor.hpp"
#include "apps/cli/commands.hpp"
#include "apps/cli/slurm_task.hpp"
#include "runtime/actor/system_config.hpp"
#include "runtime/cluster/cluster_file.hpp"
#include "runtime/cluster/head_client.hpp"
#include "runtime/cluster/head_http.hpp"
#include "runtime/cluster/head_server.hpp"
#include "runtime/cluster/msgpack_view.hpp"
#include "runtime/cluster/node_agent.hpp"
#include "runtime/cluster/zmq_util.hpp"
#include "runtime/config/environment.hpp"

namespace troupe::cli {
namespace {

std::atomic<bool> interrupted{false};

extern "C" void on_interrupt(int) {
  interrupted.store(true);
}

void install_interrupt_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_interrupt;
  sa.sa_flags = SA_RESETHAND;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

// "cores=4,memory=16G,gpus=1" -> resources; missing values come from this machine.
absl::StatusOr<cluster::resources> parse_resources(const std::string& text) {
  cluster::resources res;
  res.cores = std::thread::hardware_concurrency();
  res.memory_bytes = static_cast<uint64_t>(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGE_SIZE);
  for (absl::string_view item : absl::StrSplit(text, ',', absl::SkipEmpty())) {
    std::pair<std::string, std::string> kv = absl::StrSplit(item, absl::MaxSplits('=', 1));
    uint64_t scale = 1;
    std::string value = kv.second;
    if (!value.empty() && (value.back() == 'G' || value.back() == 'M')) {
      scale = value.back() == 'G' ? (1ull << 30) : (1ull << 20);
      value.pop_back();
    }
    uint64_t n = 0;
    if (!absl::SimpleAtoi(value, &n)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--resources: '", item, "' is not NAME=NUMBER"));
    }
    if (kv.first == "cores") {
      res.cores = static_cast<uint32_t>(n);
    } else if (kv.first == "memory") {
      res.memory_bytes = n * scale;
    } else if (kv.first == "gpus") {
      res.gpus = static_cast<uint32_t>(n);
    } else {
      return absl::InvalidArgumentError(absl::StrCat("--resources: unknown resource '", kv.first,
                                                     "'; use cores, memory or gpus"));
    }
  }
  return res;
}

// Stops `a` and waits (up to 10 s) until it has terminated.
void stop_and_wait(caf::actor_system& system, const caf::actor& a) {
  if (!a) return;
  caf::scoped_actor self{system};
  self->monitor(a);
  self->send_exit(a, caf::exit_reason::user_shutdown);
  self->receive([](const caf::down_msg&) {}, caf::after(std::chrono::seconds(10)) >> [] {});
}

// Sends a worker's events to the head's event log while its node agent lives.
class event_forwarder {
 public:
  void attach(cluster::node_agent* agent) {
    std::lock_guard<std::mutex> lock(mu_);
    agent_ = agent;
  }
  void forward(const nlohmann::json& event) {
    std::lock_guard<std::mutex> lock(mu_);
    if (agent_ != nullptr) agent_->forward_event(event);
  }

 private:
  std::mutex mu_;
  cluster::node_agent* agent_ = nullptr;
};

}  // namespace

std::string cluster_token(const config::cluster_spec& spec) {
  if (!spec.token.empty()) return spec.token;
  if (auto env = config::cluster_token_from_environment(); !env.empty()) return env;
  return cluster::random_token();
}

std::string token_for(const std::string& endpoint, const std::string& given) {
  if (!given.empty()) return given;
  if (auto env = config::cluster_token_from_environment(); !env.empty()) return env;
  return cluster::read_cluster_token(endpoint).value_or("");
}

absl::StatusOr<cluster::cluster_credentials> head_credentials(const config::cluster_spec& spec,
                                                              const std::string& keys_flag) {
  const std::string dir =
      cluster::keys_dir_or_environment(keys_flag.empty() ? spec.keys : keys_flag);
  if (spec.auth != "curve" && keys_flag.empty())
    return cluster::cluster_credentials{cluster_token(spec)};
  if (dir.empty()) {
    return absl::InvalidArgumentError(
        "cluster.auth: curve needs the cluster's keys: set cluster.keys, pass --keys DIR or set "
        "TROUPE_KEYS (make them with `troupe keys generate --out DIR`)");
  }
  return cluster::credentials_with_keys(cluster_token(spec), dir);
}

absl::StatusOr<cluster::cluster_credentials> client_credentials(const std::string& endpoint,
                                                                const std::string& token,
                                                                const std::string& keys_flag) {
  return cluster::credentials_with_keys(token_for(endpoint, token),
                                        cluster::keys_dir_or_environment(keys_flag));
}

int keys_generate_command(const keys_args& args) {
  auto keys = cluster::generate_curve_keypair();
  absl::Status written = keys.ok() ? cluster::write_cluster_keys(args.out, *keys) : keys.status();
  if (!written.ok()) {
    std::fprintf(stderr, "troupe keys generate: %s\n", std::string(written.message()).c_str());
    return exit_runtime_failure;
  }
  std::printf(
      "wrote %s/%s (the cluster's keypair, mode 0600) and %s/%s (its public key)\n"
      "copy the directory to each machine of the cluster, keeping its mode, then:\n"
      "  troupe head --keys %s            (or cluster.auth: curve, cluster.keys: %s)\n"
      "  troupe worker --join ENDPOINT --keys %s\n",
      args.out.c_str(), cluster::secret_key_file, args.out.c_str(), cluster::public_key_file,
      args.out.c_str(), args.out.c_str(), args.out.c_str());
  return exit_ok;
}

namespace {

// --listen, else the config's cluster.listen when it sets one, else the head's usual port.
std::string head_listen(const head_args& args, const app::app_plan* plan) {
  if (args.listen) return *args.listen;
  if (plan != nullptr && plan->spec.cluster.listen != config::cluster_spec{}.listen)
    return plan->spec.cluster.listen;
  return "tcp://127.0.0.1:7070";
}

}  // namespace

int head_command(const head_args& args) {
  std::optional<roles_and_plugins> env;  // the plan's roles come from it: it outlives the job
  std::optional<app::app_plan> plan;
  config::cluster_spec spec;
  spec.token = args.token;
  if (args.app) {
    env.emplace(args.app->plugin_dirs);
    auto loaded = env->load(*args.app);
    if (!loaded.ok()) {
      std::fprintf(stderr, "%s\n", std::string(loaded.status().message()).c_str());
      return exit_usage_error;
    }
    plan = std::move(*loaded);
    spec.auth = plan->spec.cluster.auth;
    spec.keys = plan->spec.cluster.keys;
  }
  auto credentials = head_credentials(spec, args.keys);
  if (!credentials.ok()) {
    std::fprintf(stderr, "troupe head: %s\n", std::string(credentials.status().message()).c_str());
    return exit_usage_error;
  }
  cluster::head_cluster_file file(credentials->token);
  const auto announce = [&credentials, &file](const std::string& endpoint) {
    (void)file.listening(endpoint);  // a convenience on this machine
    if (credentials->curve) {
      std::fprintf(stderr,
                   "troupe head listening on %s (CURVE, keys in %s)\n"
                   "join it with:   troupe worker --join %s --keys %s\n",
                   endpoint.c_str(), credentials->keys_dir.c_str(), endpoint.c_str(),
                   credentials->keys_dir.c_str());
      return;
    }
    std::fprintf(stderr,
                 "troupe head listening on %s\n"
                 "join it with:   troupe worker --join %s\n"
                 "  (other machines: TROUPE_CLUSTER_TOKEN=%s troupe worker --join %s)\n",
                 endpoint.c_str(), endpoint.c_str(), credentials->token.c_str(), endpoint.c_str());
  };
  if (plan) {
    const auto& spec = plan->spec.cluster;
    return run_job(*plan, args.app->config, args.run_dir,
                   [&](const run::run_dir& dir) -> std::optional<apps::cluster_options> {
                     return apps::cluster_options{
                         .listen = head_listen(args, &*plan),
                         .credentials = *credentials,
                         .local_workers = spec.local_workers,
                         .min_workers = std::max({spec.min_workers, spec.local_workers, 1}),
                         .log_dir = dir.path().string(),
                         .plugin_dirs = args.app->plugin_dirs,
                         .on_listening = announce};
                   });
  }
  zmq::context_t context;
  metrics::registry metrics;
  run::event_log events;
  events.add_listener([](const nlohmann::json& e) {
    if (e.value("severity", std::string()) == "debug") return;
    std::fprintf(stderr, "%s\n", e.value("message", std::string()).c_str());
  });
  config::cluster_spec defaults;
  auto head = cluster::head_server::start(
      context, head_listen(args, nullptr),
      {.credentials = *credentials,
       .heartbeat_interval = std::chrono::milliseconds(defaults.heartbeat_interval_ms),
       .heartbeat_misses = defaults.heartbeat_misses},
      static_cast<size_t>(defaults.max_frame_bytes), metrics, events);
  if (!head.ok()) {
    std::fprintf(stderr, "troupe head: %s\n", std::string(head.status().message()).c_str());
    return exit_runtime_failure;
  }
  announce((*head)->endpoint());
  spec.http = args.http;
  spec.http_token = args.http_token;
  auto http = cluster::start_head_http(spec, **head, events, "");
  if (!http.ok()) {
    std::fprintf(stderr, "troupe head: %s\n", std::string(http.status().message()).c_str());
    return exit_usage_error;
  }
  install_interrupt_handlers();
  while (!interrupted.load())
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  std::fprintf(stderr, "troupe head: shutting the cluster down\n");
  http->reset();
  (*head)->stop("the head was stopped");
  return exit_ok;
}

int worker_command(const worker_args& args) {
  if (!args.slurm_job.empty()) {
    worker_args joining = args;
    joining.slurm_job.clear();
    const char* submit_dir = std::getenv("SLURM_SUBMIT_DIR");
    return join_slurm_job(
        slurm_rendezvous_path(submit_dir != nullptr ? submit_dir : ".", args.slurm_job),
        std::chrono::seconds(config::cluster_spec{}.join_wait_s), std::move(joining));
  }
  auto res = parse_resources(args.resources);
  if (!res.ok()) {
    std::fprintf(stderr, "troupe worker: %s\n", std::string(res.status().message()).c_str());
    return exit_usage_error;
  }
  zmq::context_t context;
  auto cfg = actor::make_system_config({});
  caf::actor_system system{*cfg};
  metrics::registry metrics;
  event_forwarder forwarder;  // outlives `events`, whose listener uses it
  run::event_log events;
  events.add_listener([&forwarder](const nlohmann::json& e) {
    if (e.value("event", std::string()) == "progress") return;
    forwarder.forward(e);
    if (e.value("severity", std::string()) != "debug") {
      std::fprintf(stderr, "%s\n", e.value("message", std::string()).c_str());
    }
  });
  roles_and_plugins env(args.plugin_dirs);
  std::optional<app::app_plan> plan;
  actors::health_actor health;
  actors::role_host_actor host;
  // The role host is published before the node serves, so that the head's first spawn request
  // finds it.
  const auto host_roles = [&](cluster::node_agent& node) -> absl::Status {
    forwarder.attach(&node);
    if (node.app_config().empty()) return absl::OkStatus();  // a cluster without an app yet
    auto loaded = app::load_app_plan({"<config from the head>", {}, node.app_config()},
                                     env.registry, env.plugins);
    if (!loaded.ok()) {
      return absl::Status(loaded.status().code(), absl::StrCat("cannot use the head's app config: ",
                                                               loaded.status().message()));
    }
    plan = std::move(*loaded);
    health = actors::spawn_health_monitor(system, plan->spec.health, metrics, events);
    host = actors::spawn_role_host(system, {*plan, metrics, events, health, node});
    node.publish(actors::role_host_name(node.id()), caf::actor_cast<caf::actor>(host));
    return absl::OkStatus();
  };
  auto credentials = client_credentials(args.join, args.token, args.keys);
  if (!credentials.ok()) {
    std::fprintf(stderr, "troupe worker: %s\n",
                 std::string(credentials.status().message()).c_str());
    return exit_usage_error;
  }
  auto node = cluster::node_agent::start(
      context, system,
      {.head = args.join, .credentials = *credentials, .bind_host = args.bind_host, .res = *res},
      metrics, host_roles);
  if (!node.ok()) {
    std::fprintf(stderr, "troupe worker: %s\n", std::string(node.status().message()).c_str());
    return exit_runtime_failure;
  }
  std::fprintf(stderr, "troupe worker %s joined %s (epoch %llu)\n", (*node)->id().c_str(),
               args.join.c_str(), static_cast<unsigned long long>((*node)->epoch()));
  if (args.stop_with_head) {
    signal(SIGINT, SIG_IGN);
    signal(SIGTERM, SIG_IGN);
  } else {
    install_interrupt_handlers();
  }
  absl::Status ended;
  while (true) {
    if (auto s = (*node)->wait_for(std::chrono::milliseconds(100))) {
      ended = *s;
      break;
    }
    if (interrupted.load()) {
      (*node)->stop();
      break;
    }
  }
  // The role host's handlers use the node (a spawn the head asked for publishes through it), so
  // it must be gone before the node goes.
  stop_and_wait(system, caf::actor_cast<caf::actor>(host));
  if (health) caf::anon_send_exit(health, caf::exit_reason::user_shutdown);
  forwarder.attach(nullptr);
  const std::string id = (*node)->id();
  node->reset();  // ends the stand-ins for remote actors, then the actors may all finish
  system.await_all_actors_done();
  if (!ended.ok()) {
    std::fprintf(stderr, "troupe worker %s: %s\n", id.c_str(),
                 std::string(ended.message()).c_str());
    return exit_runtime_failure;
  }
  std::fprintf(stderr, "troupe worker %s: done\n", id.c_str());
  return exit_ok;
}

int status_command(const status_args& args) {
  auto credentials = client_credentials(args.head, args.token, args.keys);
  if (!credentials.ok()) {
    std::fprintf(stderr, "troupe status: %s\n",
                 std::string(credentials.status().message()).c_str());
    return exit_usage_error;
  }
  zmq::context_t context;
  auto client = cluster::head_client::connect(context, args.head, *credentials);
  if (!client.ok()) {
    std::fprintf(stderr, "troupe status: %s\n", std::string(client.status().message()).c_str());
    return exit_usage_error;
  }
  auto reply = (*client)->call("status", {}, std::chrono::seconds(5));
  if (!reply.ok()) {
    std::fprintf(stderr, "troupe status: %s\n", std::string(reply.status().message()).c_str());
    return exit_runtime_failure;
  }
  // msgpack -> JSON through nlohmann, which reads msgpack itself.
  msgpack::sbuffer buf;
  msgpack::pack(buf, reply->payload);
  const auto status =
      nlohmann::json::from_msgpack(std::string(buf.data(), buf.size()), true, false);
  if (args.json) {
    std::printf("%s\n", status.dump(2).c_str());
    return exit_ok;
  }
  std::printf("epoch %llu, %zu members\n\n", status.value("epoch", 0ull),
              status.value("members", nlohmann::json::array()).size());
  std::printf("%-6s %-6s %-26s %-10s %-9s %s\n", "NODE", "STATE", "ENDPOINT", "HEARTBEAT",
              "RESOURCES", "ACTORS");
  for (const auto& m : status.value("members", nlohmann::json::array())) {
    const auto res = m.value("resources", nlohmann::json::object());
    std::string actors;
    for (const auto& a : m.value("actors", nlohmann::json::array())) {
      absl::StrAppend(&actors, actors.empty() ? "" : " ", a.get<std::string>());
    }
    const std::string heartbeat =
        m.value("head", false) ? "-" : absl::StrCat(m.value("heartbeat_age_ms", 0), " ms ago");
    std::printf("%-6s %-6s %-26s %-10s %-9s %s\n", m.value("node", "").c_str(),
                m.value("state", "").c_str(), m.value("endpoint", "").c_str(), heartbeat.c_str(),
                absl::StrCat(res.value("cores", 0), "c/", res.value("gpus", 0), "g").c_str(),
                actors.empty() ? "-" : actors.c_str());
  }
  // What the running job publishes about itself (an elastic trainer group's generation).
  for (const auto& [name, value] : status.value("job", nlohmann::json::object()).items()) {
    std::printf("\njob %s: %s\n", name.c_str(), value.get<std::string>().c_str());
  }
  return exit_ok;
}

}  // namespace troupe::cli

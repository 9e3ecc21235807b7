#include "runtime/config/app_spec.hpp"

#include <cctype>

#include "absl/strings/numbers.h"

namespace troupe::config {
namespace {

object_schema<restart_spec> make_restart_schema() {
  object_schema<restart_spec> s;
  s.add("max", &restart_spec::max)
      .range(0, 1000)
      .help("restarts allowed per actor before the job fails");
  s.add("backoff_ms", &restart_spec::backoff_ms)
      .range(0, 600000)
      .help("delay before the first restart; doubles each time, up to 30 s");
  return s;
}

}  // namespace

std::optional<std::pair<std::string, int>> parse_host_port(absl::string_view text) {
  const size_t colon = text.rfind(':');
  int port = -1;
  if (colon == absl::string_view::npos || colon == 0 ||
      !absl::SimpleAtoi(text.substr(colon + 1), &port) || port < 0 || port > 65535) {
    return std::nullopt;
  }
  return std::make_pair(std::string(text.substr(0, colon)), port);
}

namespace {

object_schema<cluster_spec> make_cluster_schema() {
  object_schema<cluster_spec> s;
  s.add("local_workers", &cluster_spec::local_workers)
      .range(0, 256)
      .help("worker processes started beside the head; 0 = everything in one process");
  s.add("min_workers", &cluster_spec::min_workers)
      .range(0, 4096)
      .help("workers to wait for before placing roles; 0 = local_workers (1 for troupe head)");
  s.add("join_wait_s", &cluster_spec::join_wait_s)
      .range(1, 86400)
      .help("how long to wait for them to join before the job fails");
  s.add("worker_wait_s", &cluster_spec::worker_wait_s)
      .range(1, 3600)
      .help(
          "below an elastic role's min, how long to wait for a worker to join before the job "
          "fails");
  s.add("listen", &cluster_spec::listen)
      .check([](const std::string& v) -> std::optional<std::string> {
        if (v.starts_with("tcp://") && v.rfind(':') > 6) return std::nullopt;
        return "'" + v + "' is not a tcp://HOST:PORT endpoint";
      })
      .help("the head's endpoint; port 0 picks a free one");
  s.add("http", &cluster_spec::http)
      .check([](const std::string& v) -> std::optional<std::string> {
        if (v == "off" || parse_host_port(v)) return std::nullopt;
        return "'" + v + "' is not HOST:PORT (port 0 picks a free one) or off";
      })
      .help(
          "where the head serves /metrics, /api/* and the dashboard (docs/observability.md); "
          "port 0 picks a free one; off: not served");
  s.add("http_token", &cluster_spec::http_token)
      .help("bearer token the head's HTTP endpoints ask for; empty: none");
  s.add("token", &cluster_spec::token)
      .help("secret needed to join; empty = TROUPE_CLUSTER_TOKEN or a random one");
  s.add("auth", &cluster_spec::auth)
      .one_of({"token", "curve"})
      .help(
          "token: a shared secret sent in clear; curve: ZeroMQ CURVE on every control-plane "
          "connection (docs/security.md)");
  s.add("keys", &cluster_spec::keys)
      .help("with auth: curve, the directory `troupe keys generate` wrote; empty = TROUPE_KEYS");
  s.add("heartbeat_interval_ms", &cluster_spec::heartbeat_interval_ms)
      .range(10, 60000)
      .help("how often workers send heartbeats");
  s.add("heartbeat_misses", &cluster_spec::heartbeat_misses)
      .range(1, 100)
      .help("missed heartbeats before a worker is declared dead");
  s.add("request_timeout_ms", &cluster_spec::request_timeout_ms)
      .range(1, 3600000)
      .help("how long a request to an actor on another node may wait");
  s.add("max_frame_bytes", &cluster_spec::max_frame_bytes)
      .range(1024, int64_t{1} << 32)
      .help("frames larger than this are refused");
  s.add("scale_command", &cluster_spec::scale_command)
      .help(
          "shell command run when an autoscaled role wants more or fewer workers, with "
          "TROUPE_SCALE_FROM and TROUPE_SCALE_TO set (docs/serve.md); empty: local workers only");
  return s;
}

// For a spec with `min` and `max`: whether they are in order.
template <class Bounds>
std::optional<std::string> min_not_above_max(const Bounds& b) {
  if (b.min <= b.max) return std::nullopt;
  return "min " + std::to_string(b.min) + " is larger than max " + std::to_string(b.max);
}

object_schema<elastic_spec> make_elastic_schema() {
  object_schema<elastic_spec> s;
  s.add("min", &elastic_spec::min).range(1, 4096).help("fewest actors");
  s.add("max", &elastic_spec::max).range(1, 4096).help("most actors");
  s.check(min_not_above_max<elastic_spec>);
  return s;
}

object_schema<autoscale_spec> make_autoscale_schema() {
  object_schema<autoscale_spec> s;
  s.add("min", &autoscale_spec::min)
      .range(0, 4096)
      .help("fewest workers (min_replicas); 0: none while no request comes");
  s.add("max", &autoscale_spec::max).range(1, 4096).help("most workers (max_replicas)");
  s.add("target_ongoing_requests", &autoscale_spec::target_ongoing_requests)
      .range(0.001, 1e6)
      .help("requests queued or running per worker that the autoscaler aims for");
  s.add("upscale_delay_s", &autoscale_spec::upscale_delay_s)
      .range(0.0, 86400.0)
      .help("how long more workers must be wanted before they are started");
  s.add("downscale_delay_s", &autoscale_spec::downscale_delay_s)
      .range(0.0, 86400.0)
      .help("how long fewer workers must be wanted before some are drained and stopped");
  s.add("downscale_to_zero_delay_s", &autoscale_spec::downscale_to_zero_delay_s)
      .range(0.0, 86400.0)
      .help(
          "with min 0: how long the averaged count must stay 0 before the last worker stops "
          "(unset: downscale_delay_s)");
  s.add("look_back_period_s", &autoscale_spec::look_back_period_s)
      .range(0.001, 86400.0)
      .help("the window over which the ongoing requests are averaged before deciding");
  s.check(min_not_above_max<autoscale_spec>);
  return s;
}

object_schema<model_spec> make_model_schema() {
  object_schema<model_spec> s;
  s.add("path", &model_spec::path)
      .help(
          "a Hugging Face model directory (config.json, model.safetensors, tokenizer.json); "
          "its config.json gives the shape");
  s.add("vocab", &model_spec::vocab).range(2, 1 << 20).help("vocabulary size (default 256)");
  s.add("ctx", &model_spec::ctx)
      .range(1, 1 << 20)
      .help("context length in tokens (default 128; with path: the model's, or less)");
  s.add("layers", &model_spec::layers).range(1, 1024).help("transformer blocks (default 4)");
  s.add("dim", &model_spec::dim).range(1, 1 << 16).help("model width (default 128)");
  s.add("heads", &model_spec::heads)
      .range(1, 1024)
      .help("attention heads; must divide dim (default 4)");
  s.add("arch", &model_spec::arch)
      .one_of({"gpt2", "llama", "qwen3"})
      .help("the block: gpt2 (troupe's GPT), llama, or qwen3 (llama with q/k norms)");
  s.add("kv_heads", &model_spec::kv_heads)
      .range(1, 1024)
      .help("llama, qwen3: key/value heads, dividing heads (default: heads)");
  s.add("ffn", &model_spec::ffn)
      .range(1, 1 << 20)
      .help("llama, qwen3: the MLP's hidden width (default: 8/3 dim, a multiple of 16)");
  s.check([](const model_spec& m) -> std::optional<std::string> {
    if (m.arch == "gpt2") {
      for (const auto& [key, value] : {std::pair{"kv_heads", m.kv_heads}, {"ffn", m.ffn}}) {
        if (value) {
          return std::string("model.") + key + " belongs to model.arch llama or qwen3, not " +
                 "gpt2; set model.arch or remove " + key;
        }
      }
    }
    if (!m.path.empty()) {
      if (m.arch != "gpt2") {
        return "model.arch cannot be set with model.path: the model's config.json names its "
               "architecture; remove arch";
      }
      for (const auto& [key, value] : {std::pair{"vocab", m.vocab},
                                       {"layers", m.layers},
                                       {"dim", m.dim},
                                       {"heads", m.heads}}) {
        if (value) {
          return std::string("model.") + key + " cannot be set with model.path: the model's " +
                 "config.json gives its shape; remove " + key;
        }
      }
      return std::nullopt;
    }
    // With one of them at its default, the apps' checks of the whole model say it.
    if (!m.dim || !m.heads || *m.dim % *m.heads == 0) return std::nullopt;
    return "dim " + std::to_string(*m.dim) + " is not divisible by heads " +
           std::to_string(*m.heads);
  });
  return s;
}

object_schema<runtime_spec> make_runtime_schema() {
  object_schema<runtime_spec> s;
  s.add("scheduler_threads", &runtime_spec::scheduler_threads)
      .range(0, 1024)
      .help("CAF scheduler threads; 0 = one per hardware thread");
  s.add("scheduler_policy", &runtime_spec::scheduler_policy)
      .one_of({"stealing", "sharing"})
      .help("work stealing or one shared queue");
  s.add("max_throughput", &runtime_spec::max_throughput)
      .range(0, 1 << 30)
      .help("messages an actor handles before yielding its thread; 0 = no limit");
  s.add("job_timeout_s", &runtime_spec::job_timeout_s)
      .range(0, 7 * 24 * 3600)
      .help("fail the job after this many seconds; 0 = no limit");
  s.add("stop_grace_s", &runtime_spec::stop_grace_s)
      .range(0, 3600)
      .help("after Ctrl-C, seconds the app may take to stop gracefully (serve: drain requests)");
  return s;
}

object_schema<plugins_spec> make_plugins_schema() {
  object_schema<plugins_spec> s;
  s.add("dirs", &plugins_spec::dirs).help("extra directories to search for plugins");
  s.add("load", &plugins_spec::load).help("plugins to load even if no role names them");
  return s;
}

object_schema<health_spec> make_health_schema() {
  object_schema<health_spec> s;
  s.add("interval_ms", &health_spec::interval_ms)
      .range(10, 3600000)
      .help("how often every actor is pinged");
  s.add("ping_timeout_ms", &health_spec::ping_timeout_ms)
      .range(1, 3600000)
      .help("how long a ping may take before it counts as missed");
  s.add("unresponsive_after", &health_spec::unresponsive_after)
      .range(1, 1000)
      .help("missed pings in a row before an actor is reported unresponsive");
  s.add("stuck_after_s", &health_spec::stuck_after_s)
      .range(0.001, 86400.0)
      .help(
          "a handler running longer than this flags its actor stuck (troupe_actor_stuck, the "
          "dashboard)");
  return s;
}

object_schema<role_spec> make_role_schema() {
  object_schema<role_spec> s;
  s.add("kind", &role_spec::kind)
      .check(check_identifier)
      .help("the role kind (source, stage, sink, ...); defaults to the role's name");
  s.add("impl", &role_spec::impl).required().check(check_identifier).help("the implementation");
  s.add("plugin", &role_spec::plugin)
      .check(check_identifier)
      .help("the plugin providing the implementation; empty for built-ins");
  s.add("count", &role_spec::count).range(1, 4096).help("number of actors");
  s.add("elastic", &role_spec::elastic, make_elastic_schema())
      .help("{min, max}: one actor per worker, grown when workers join (instead of count)");
  s.add("autoscale", &role_spec::autoscale, make_autoscale_schema())
      .help(
          "{min, max, target_ongoing_requests, upscale_delay_s, downscale_delay_s}: one actor per "
          "worker, with workers started and drained by load (app: serve; docs/serve.md)");
  s.add("placement", &role_spec::placement)
      .one_of({"spread", "head"})
      .help("spread over the workers, or on the head with the app driver");
  s.add("on_failure", &role_spec::on_failure)
      .help("fail_job, or {restart: {max, backoff_ms}}; default: restart (max 3, 100 ms)");
  s.add("options", &role_spec::options).help("the implementation's own options");
  return s;
}

object_schema<app_spec> make_app_schema() {
  object_schema<app_spec> s;
  s.add("app", &app_spec::app).required().check(check_identifier).help("the app to run");
  s.add("cluster", &app_spec::cluster, make_cluster_schema());
  s.add("model", &app_spec::model, make_model_schema());
  s.add("runtime", &app_spec::runtime, make_runtime_schema());
  s.add("plugins", &app_spec::plugins, make_plugins_schema());
  s.add("health", &app_spec::health, make_health_schema());
  s.add_named("roles", &app_spec::roles, &role_spec::name, make_role_schema());
  s.add_section_named_by([](const app_spec& a) { return a.app; }, &app_spec::app_section);
  return s;
}

}  // namespace

std::optional<std::string> check_identifier(const std::string& v) {
  if (v.empty()) return std::nullopt;  // "not set"; required() catches missing keys
  bool ok = std::islower(static_cast<unsigned char>(v[0]));
  for (char c : v) {
    ok = ok && (std::islower(static_cast<unsigned char>(c)) ||
                std::isdigit(static_cast<unsigned char>(c)) || c == '_');
  }
  if (ok) return std::nullopt;
  return "'" + v +
         "' is not a valid name: use lowercase letters, digits and '_', starting with a letter";
}

const object_schema<app_spec>& app_spec_schema() {
  static const object_schema<app_spec> schema = make_app_schema();
  return schema;
}

const object_schema<role_spec>& role_spec_schema() {
  static const object_schema<role_spec> schema = make_role_schema();
  return schema;
}

bool codec<failure_policy>::parse(const YAML::Node& node, const parse_context& ctx,
                                  failure_policy& out) {
  if (node.IsScalar() && node.Scalar() == "fail_job") {
    out = failure_policy{failure_policy::action::fail_job, {}};
    return true;
  }
  if (node.IsMap()) {
    struct restart_only {
      restart_spec restart;
    };
    static const object_schema<restart_only> schema = [] {
      object_schema<restart_only> s;
      s.add("restart", &restart_only::restart, make_restart_schema()).required();
      return s;
    }();
    restart_only parsed;
    if (!schema.parse(node, ctx, parsed)) return false;
    out = failure_policy{failure_policy::action::restart, parsed.restart};
    return true;
  }
  ctx.error(node, std::string("expected fail_job or {restart: {max: N, backoff_ms: M}}, got ") +
                      describe_node(node));
  return false;
}

YAML::Node codec<failure_policy>::to_node(const failure_policy& v) {
  if (v.on_failure == failure_policy::action::fail_job) return YAML::Node("fail_job");
  YAML::Node restart(YAML::NodeType::Map);
  restart["max"] = v.restart.max;
  restart["backoff_ms"] = v.restart.backoff_ms;
  YAML::Node node(YAML::NodeType::Map);
  node["restart"] = restart;
  return node;
}

}  // namespace troupe::config

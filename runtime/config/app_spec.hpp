#pragma once

// The typed form of an app config (DESIGN.md "Apps and configs"):
//
//   app: pipeline            # which app driver runs the job
//   cluster: {...}           # which processes run it
//   model: {...}             # the transformer, for apps that have one
//   runtime: {...}           # the in-process actor runtime (CAF scheduler)
//   plugins: {...}           # where plugins are searched and which to load
//   health: {...}            # the health monitor
//   roles: {name: {...}}     # the actors: kind, implementation, count, failure policy, options
//   pipeline: {...}          # the app's own section, named after the app
//
// Role options and the app's section are validated in a second pass, by the schemas that the
// role's and the app's factories declare (see runtime/app/app_plan.hpp).

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "runtime/config/codec.hpp"
#include "runtime/config/schema.hpp"

namespace troupe::config {

/// The CAF scheduler of each process.
struct runtime_spec {
  /// Worker threads; 0 means one per hardware thread.
  int scheduler_threads = 0;
  /// "stealing" (work stealing) or "sharing" (one shared queue).
  std::string scheduler_policy = "stealing";
  /// Messages an actor may handle before yielding its thread; 0 means no limit.
  int max_throughput = 0;
  /// Whole-job time limit in seconds; 0 means none.
  int job_timeout_s = 0;
  /// After Ctrl-C or SIGTERM, how long the app may take to stop gracefully (a server finishes
  /// the requests it has) before it is stopped at once.
  int stop_grace_s = 30;
};

/// Where the job's processes come from. In this build every app runs in one process.
struct cluster_spec {
  /// Worker processes `troupe launch` starts beside the head; 0 runs everything in one process.
  int local_workers = 0;
  /// Workers that must have joined before roles are placed (default: `local_workers`, at least
  /// 1 for `troupe head --config`).
  int min_workers = 0;
  /// How long to wait for them before the job fails (torchrun's rendezvous join timeout).
  int join_wait_s = 60;
  /// Below an elastic role's min, how long to wait for a worker to join before the job fails.
  int worker_wait_s = 30;
  /// Where the head listens; port 0 picks a free one.
  std::string listen = "tcp://127.0.0.1:0";
  /// Where the head serves its HTTP endpoints (/metrics, /api/*, the dashboard): "HOST:PORT"
  /// (port 0 picks a free one), or "off".
  std::string http = "127.0.0.1:0";
  /// The bearer token those endpoints ask for; empty: none.
  std::string http_token;
  /// The secret a worker needs to join; empty: TROUPE_CLUSTER_TOKEN, else a random one.
  std::string token;
  /// How members prove they belong: "token" (sent in clear) or "curve" (every control-plane
  /// connection encrypted and authenticated with the cluster's keys).
  std::string auth = "token";
  /// With curve: the directory `troupe keys generate` wrote; empty: TROUPE_KEYS.
  std::string keys;
  int heartbeat_interval_ms = 500;
  /// Missed heartbeats before a worker is declared dead (interval * misses: 2 s by default).
  int heartbeat_misses = 4;
  /// How long a request to an actor on another node may wait for its answer.
  int request_timeout_ms = 30000;
  /// Frames larger than this are refused.
  int64_t max_frame_bytes = 64ll << 20;
  /// For an autoscaled role without local workers: the shell command that asks for more or
  /// fewer workers (an `sbatch` of joiners, a `kubectl scale`). It runs on each change of the
  /// wanted count with TROUPE_SCALE_FROM and TROUPE_SCALE_TO set (the counts asked for before
  /// and now). Empty: none.
  std::string scale_command;
};

/// How many actors an elastic role has: one per worker, between `min` and `max`.
struct elastic_spec {
  int min = 1;
  int max = 1;
};

/// `roles.NAME.autoscale`: Ray Serve's autoscaling_config. The role has one actor per worker,
/// and the job asks for ceil(ongoing requests, averaged over look_back_period_s /
/// target_ongoing_requests) workers within [min, max], once that wish has held for the delay in
/// its direction. With min 0 an idle job goes down to no worker, and the first request starts
/// one at once.
struct autoscale_spec {
  int min = 1;
  int max = 1;
  double target_ongoing_requests = 2;
  double upscale_delay_s = 30;
  double downscale_delay_s = 600;
  /// The delay from one worker to none; unset: downscale_delay_s.
  std::optional<double> downscale_to_zero_delay_s;
  double look_back_period_s = 30;
};

/// The decoder the apps train or serve: a Hugging Face model directory (`path`), or a decoder
/// of the family `arch` and the shape given here (each key unset: the tiny GPT's default,
/// models/decoder).
struct model_spec {
  /// A Hugging Face model directory (config.json, safetensors, tokenizer.json); its config.json
  /// gives the shape, and `ctx` (when set) the context served, at most the model's.
  std::string path;
  std::optional<int> vocab;
  std::optional<int> ctx;
  std::optional<int> layers;
  std::optional<int> dim;
  std::optional<int> heads;
  /// "gpt2" (troupe's GPT), "llama" (RoPE, RMSNorm, SwiGLU, grouped-query attention) or "qwen3"
  /// (a Llama with per-head q/k norms).
  std::string arch = "gpt2";
  std::optional<int> kv_heads;  ///< llama, qwen3: key/value heads (default: heads)
  std::optional<int> ffn;       ///< llama, qwen3: the MLP's hidden width (default: 8/3 dim)
};

/// Restart with exponential backoff: the first after `backoff_ms`, doubling up to 30 s.
struct restart_spec {
  int max = 3;
  int backoff_ms = 100;
};

/// What the supervisor does when an actor of a role fails: `fail_job`, or
/// `{restart: {max: N, backoff_ms: M}}`.
struct failure_policy {
  enum class action { restart, fail_job };
  action on_failure = action::restart;
  restart_spec restart;
};

/// One role: `count` actors named `name/0 .. name/count-1`, made by the factory registered as
/// (`kind`, `impl`), from `plugin` when given.
struct role_spec {
  std::string name;
  std::string kind;
  std::string impl;
  std::string plugin;
  int count = 1;
  /// One actor per worker, grown when workers join (instead of `count`).
  std::optional<elastic_spec> elastic;
  /// One actor per worker, with workers started and stopped by load (instead of `count`).
  std::optional<autoscale_spec> autoscale;
  /// Where the actors run in a cluster: "spread" over the workers, or "head", the process that
  /// runs the app driver (for roles whose state must not be lost with a worker).
  std::string placement = "spread";
  std::optional<failure_policy> on_failure;
  raw_node options;

  /// How many actors a role with one per worker may have: `elastic`, or `autoscale`'s bounds;
  /// nullopt for a role of `count` actors.
  [[nodiscard]] std::optional<elastic_spec> elastic_bounds() const {
    if (autoscale) return elastic_spec{autoscale->min, autoscale->max};
    return elastic;
  }
};

/// Where plugins come from. Plugins load only from these directories, the directory `plugins`
/// next to the troupe binary, and TROUPE_PLUGIN_PATH.
struct plugins_spec {
  std::vector<std::string> dirs;
  std::vector<std::string> load;
};

/// The in-process health monitor.
struct health_spec {
  int interval_ms = 1000;
  int ping_timeout_ms = 1000;
  int unresponsive_after = 3;
  /// A handler running longer than this flags its actor as stuck (troupe_actor_stuck).
  double stuck_after_s = 10;
};

/// A whole app config.
struct app_spec {
  std::string app;
  cluster_spec cluster;
  std::optional<model_spec> model;
  runtime_spec runtime;
  plugins_spec plugins;
  health_spec health;
  std::vector<role_spec> roles;
  raw_node app_section;
};

/// nullopt when `name` is a valid role, app or plugin name (lowercase letters, digits and '_',
/// starting with a letter); otherwise the reason it is not.
[[nodiscard]] std::optional<std::string> check_identifier(const std::string& name);

/// "HOST:PORT" (e.g. `cluster.http`) as its host and port (0 to 65535); nullopt otherwise.
[[nodiscard]] std::optional<std::pair<std::string, int>> parse_host_port(absl::string_view text);

/// The schema of the top-level map (role options and the app section stay raw).
[[nodiscard]] const object_schema<app_spec>& app_spec_schema();

/// The schema of one role entry (shared with docs generation).
[[nodiscard]] const object_schema<role_spec>& role_spec_schema();

template <>
struct codec<failure_policy> {
  static constexpr const char* expected = "fail_job or {restart: {max, backoff_ms}}";
  static bool parse(const YAML::Node& node, const parse_context& ctx, failure_policy& out);
  static YAML::Node to_node(const failure_policy& v);
};

template <>
struct codec<std::optional<failure_policy>> {
  static constexpr const char* expected = codec<failure_policy>::expected;
  static bool parse(const YAML::Node& node, const parse_context& ctx,
                    std::optional<failure_policy>& out) {
    failure_policy p;
    if (!codec<failure_policy>::parse(node, ctx, p)) return false;
    out = p;
    return true;
  }
  static YAML::Node to_node(const std::optional<failure_policy>& v) {
    return v ? codec<failure_policy>::to_node(*v) : YAML::Node();
  }
};

}  // namespace troupe::config

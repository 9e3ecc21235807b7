#pragma once

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "runtime/app/app_plan.hpp"
#include "runtime/cluster/curve_keys.hpp"
#include "runtime/metrics/registry.hpp"
#include "runtime/run/event_log.hpp"

namespace caf {
class actor_system;
class actor_system_config;
}  // namespace caf

namespace zmq {
class context_t;
}  // namespace zmq

namespace troupe::cluster {
class head_http;
class head_server;
class node_agent;
}  // namespace troupe::cluster

namespace troupe::apps {

class worker_pool;
class worker_processes;

/// How a job ended.
struct job_outcome {
  enum class status { succeeded, failed, interrupted };
  status result = status::failed;
  /// The app driver's summary (app-specific fields).
  nlohmann::json summary = nlohmann::json::object();
  /// The cause, unless it succeeded.
  std::string error;
};

/// "succeeded", "failed" or "interrupted".
[[nodiscard]] const char* to_string(job_outcome::status s);

/// A job that spans processes: this process runs the head and the app driver, workers join it.
struct cluster_options {
  /// The head's endpoint ("tcp://HOST:PORT", port 0 picks one).
  std::string listen;
  cluster::cluster_credentials credentials;
  /// Workers to start on this machine.
  int local_workers = 0;
  /// Workers to wait for before placing roles.
  int min_workers = 0;
  /// Workers on their way that nobody needs to ask for (a Slurm job's other tasks). With an
  /// autoscaled role, the ones missing to `min_workers` beyond these and the local ones are
  /// asked of `cluster.scale_command`.
  int joining_workers = 0;
  /// Where local workers write their logs.
  std::string log_dir;
  /// Plugin directories local workers search too.
  std::vector<std::string> plugin_dirs;
  /// Called once the head listens, with its endpoint (`troupe head` prints how to join).
  std::function<void(const std::string& endpoint)> on_listening;
};

/// Runs an app: a CAF actor system configured from `runtime:`, the health monitor, and the
/// supervisor that spawns the roles and the app driver. With cluster options it also runs the
/// head, joins it as the "head" node, starts local workers, and waits for enough of them; roles
/// are then spread over the workers.
class job_runner {
 public:
  /// `run_dir` is where the app driver writes its outputs (empty: none).
  job_runner(const app::app_plan& plan, metrics::registry& metrics, run::event_log& events,
             std::string run_dir = "", std::optional<cluster_options> cluster = std::nullopt);

  /// Stops whatever still runs (workers included) and waits for every actor to terminate. An
  /// actor stuck inside a handler blocks this; `troupe launch` guards it with a watchdog.
  ~job_runner();

  /// Runs the job until it ends or `runtime.job_timeout_s` passes. When `stop` becomes true
  /// (checked every 100 ms), the app driver is asked to stop gracefully and given
  /// `runtime.stop_grace_s`: a server that drains its requests succeeds, other apps end as
  /// interrupted.
  [[nodiscard]] job_outcome run(const std::atomic<bool>& stop);

 private:
  // Starts the head, joins it, starts local workers and waits for `min_workers`.
  absl::Status form_cluster(const std::atomic<bool>& stop);

  const app::app_plan& plan_;
  metrics::registry& metrics_;
  run::event_log& events_;
  std::string run_dir_;
  std::optional<cluster_options> cluster_;
  std::unique_ptr<caf::actor_system_config> config_;
  std::unique_ptr<caf::actor_system> system_;
  std::unique_ptr<zmq::context_t> zmq_;
  std::unique_ptr<cluster::head_server> head_;
  std::unique_ptr<cluster::head_http> http_;  // the head's /metrics, /api/* and dashboard
  std::unique_ptr<cluster::node_agent> node_;
  std::unique_ptr<worker_processes> workers_;
  std::unique_ptr<worker_pool> pool_;  // for an autoscaled role
};

}  // namespace troupe::apps

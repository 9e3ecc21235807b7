#pragma once

#include <atomic>
#include <memory>
#include <string>

#include "nlohmann/json.hpp"
#include "runtime/app/app_plan.hpp"
#include "runtime/metrics/registry.hpp"
#include "runtime/run/event_log.hpp"

namespace caf {
class actor_system;
class actor_system_config;
}  // namespace caf

namespace troupe::apps {

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

/// Runs an app in this process: a CAF actor system configured from `runtime:`, the health
/// monitor, and the supervisor that spawns the roles and the app driver.
class job_runner {
 public:
  job_runner(const app::app_plan& plan, metrics::registry& metrics, run::event_log& events);

  /// Stops whatever still runs and waits for every actor to terminate. An actor stuck inside a
  /// handler blocks this; `troupe launch` guards it with a watchdog.
  ~job_runner();

  /// Runs the job until it ends, `stop` becomes true (checked every 100 ms), or
  /// `runtime.job_timeout_s` passes.
  [[nodiscard]] job_outcome run(const std::atomic<bool>& stop);

 private:
  const app::app_plan& plan_;
  metrics::registry& metrics_;
  run::event_log& events_;
  std::unique_ptr<caf::actor_system_config> config_;
  std::unique_ptr<caf::actor_system> system_;
};

}  // namespace troupe::apps

#include "apps/job_runner.hpp"

#include <chrono>
#include <optional>

#include "absl/strings/str_cat.h"
#include "actors/health_monitor_actor.hpp"
#include "actors/supervisor_actor.hpp"
#include "runtime/actor/messages.hpp"
#include "runtime/actor/system_config.hpp"

namespace troupe::apps {

const char* to_string(job_outcome::status s) {
  switch (s) {
    case job_outcome::status::succeeded:
      return "succeeded";
    case job_outcome::status::failed:
      return "failed";
    case job_outcome::status::interrupted:
      return "interrupted";
  }
  return "failed";
}

job_runner::job_runner(const app::app_plan& plan, metrics::registry& metrics,
                       run::event_log& events)
    : plan_(plan),
      metrics_(metrics),
      events_(events),
      config_(actor::make_system_config(plan.spec.runtime)),
      system_(std::make_unique<caf::actor_system>(*config_)) {}

job_runner::~job_runner() {
  system_.reset();
}

job_outcome job_runner::run(const std::atomic<bool>& stop) {
  using clock = std::chrono::steady_clock;
  auto health = actors::spawn_health_monitor(*system_, plan_.spec.health, metrics_, events_);
  std::optional<actor::job_result> result;
  job_outcome outcome;
  {
    caf::scoped_actor owner{*system_};
    auto supervisor = actors::spawn_supervisor(
        *system_, {plan_, metrics_, events_, health, caf::actor_cast<caf::actor>(owner)});
    const int timeout_s = plan_.spec.runtime.job_timeout_s;
    const auto deadline = clock::now() + std::chrono::seconds(timeout_s);
    while (!result) {
      owner->receive([&](actor::job_result& r) { result = std::move(r); },
                     caf::after(std::chrono::milliseconds(100)) >> [] {});
      if (result) break;
      if (stop.load()) {
        events_.emit(run::severity::warning, "job_interrupted", "stopping on request");
        outcome.result = job_outcome::status::interrupted;
        outcome.error = "interrupted";
      } else if (timeout_s > 0 && clock::now() > deadline) {
        outcome.error =
            absl::StrCat("the job ran longer than runtime.job_timeout_s = ", timeout_s, " s");
        events_.emit(run::severity::error, "job_failed", outcome.error, {{"error", outcome.error}});
      } else {
        continue;
      }
      caf::anon_send_exit(supervisor, caf::exit_reason::user_shutdown);
      break;
    }
  }
  caf::anon_send_exit(health, caf::exit_reason::user_shutdown);
  if (!result) return outcome;
  if (result->ok) {
    outcome.result = job_outcome::status::succeeded;
    outcome.summary = nlohmann::json::parse(result->summary_json, nullptr, false);
    if (outcome.summary.is_discarded()) outcome.summary = nlohmann::json::object();
  } else {
    outcome.result = job_outcome::status::failed;
    outcome.error = result->error;
  }
  return outcome;
}

}  // namespace troupe::apps

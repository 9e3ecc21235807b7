#include "apps/job_runner.hpp"

#include <chrono>
#include <optional>
#include <thread>

#include "absl/algorithm/container.h"
#include "absl/strings/str_cat.h"
#include "actors/health_monitor_actor.hpp"
#include "actors/role_host_actor.hpp"
#include "actors/supervisor_actor.hpp"
#include "apps/worker_pool.hpp"
#include "apps/worker_processes.hpp"
#include "runtime/actor/messages.hpp"
#include "runtime/actor/system_config.hpp"
#include "runtime/cluster/head_http.hpp"
#include "runtime/cluster/head_server.hpp"
#include "runtime/cluster/node_agent.hpp"
#include "runtime/cluster/zmq_util.hpp"
#include "runtime/comm/rendezvous_store.hpp"

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
                       run::event_log& events, std::string run_dir,
                       std::optional<cluster_options> cluster)
    : plan_(plan),
      metrics_(metrics),
      events_(events),
      run_dir_(std::move(run_dir)),
      cluster_(std::move(cluster)),
      config_(actor::make_system_config(plan.spec.runtime)),
      system_(std::make_unique<caf::actor_system>(*config_)) {}

job_runner::~job_runner() {
  // Workers go first (the head tells them to shut down), then this process's actors.
  http_.reset();
  if (pool_) pool_->close();
  if (head_) head_->stop("the job ended");
  if (workers_) workers_->reap(std::chrono::seconds(10));
  pool_.reset();
  node_.reset();
  head_.reset();
  system_.reset();
}

absl::Status job_runner::form_cluster(const std::atomic<bool>& stop) {
  const auto& spec = plan_.spec.cluster;
  zmq_ = std::make_unique<zmq::context_t>();
  auto head = cluster::head_server::start(
      *zmq_, cluster_->listen,
      {.credentials = cluster_->credentials,
       .heartbeat_interval = std::chrono::milliseconds(spec.heartbeat_interval_ms),
       .heartbeat_misses = spec.heartbeat_misses,
       .app_config = plan_.resolved_yaml()},
      static_cast<size_t>(spec.max_frame_bytes), metrics_, events_);
  if (!head.ok()) return head.status();
  head_ = std::move(*head);
  auto http = cluster::start_head_http(spec, *head_, events_, run_dir_);
  if (!http.ok()) return http.status();
  http_ = std::move(*http);
  if (cluster_->on_listening) cluster_->on_listening(head_->endpoint());
  auto node = cluster::node_agent::start(
      *zmq_, *system_,
      {.head = head_->endpoint(),
       .credentials = cluster_->credentials,
       .bind_host = cluster::advertised_host(head_->endpoint()),
       .as_head = true,
       .max_frame_bytes = static_cast<size_t>(spec.max_frame_bytes),
       .request_timeout = std::chrono::milliseconds(spec.request_timeout_ms)},
      metrics_);
  if (!node.ok()) return node.status();
  node_ = std::move(*node);
  workers_ = std::make_unique<worker_processes>();
  if (cluster_->local_workers > 0) {
    if (auto s = workers_->start(cluster_->local_workers, head_->endpoint(), cluster_->credentials,
                                 cluster_->log_dir, cluster_->plugin_dirs);
        !s.ok()) {
      return s;
    }
  }
  if (absl::c_any_of(plan_.roles, [](const auto& r) { return r.spec.autoscale.has_value(); })) {
    pool_ = std::make_unique<worker_pool>(
        worker_pool::options{.head = head_->endpoint(),
                             .credentials = cluster_->credentials,
                             .log_dir = cluster_->log_dir,
                             .plugin_dirs = cluster_->plugin_dirs,
                             .local = cluster_->local_workers > 0,
                             .scale_command = spec.scale_command,
                             .initial = cluster_->local_workers + cluster_->joining_workers},
        *workers_, *head_, events_);
    pool_->scale_to(std::max(cluster_->min_workers, cluster_->local_workers));
  }
  const auto workers = [&] {
    int n = 0;
    for (const auto& p : node_->peers())
      n += !p.head && p.state == cluster::member_state::alive;
    return n;
  };
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(spec.join_wait_s);
  while (workers() < cluster_->min_workers) {
    if (stop.load()) return absl::CancelledError("interrupted while waiting for workers");
    if (pool_) pool_->poll();  // a scale command that failed says so while the job waits
    if (std::chrono::steady_clock::now() > deadline) {
      return absl::DeadlineExceededError(absl::StrCat(
          "only ", workers(), " of ", cluster_->min_workers, " workers joined within ",
          spec.join_wait_s, " s (cluster.join_wait_s)",
          cluster_->local_workers > 0 ? absl::StrCat("; see ", cluster_->log_dir, "/worker-*.log")
                                      : std::string()));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  events_.emit(run::severity::info, "cluster_ready",
               absl::StrCat(workers(), " workers joined the head at ", head_->endpoint(),
                            " (more can join: troupe worker --join ", head_->endpoint(), ")"),
               {{"workers", workers()},
                {"head", head_->endpoint()},
                {"auth", cluster_->credentials.curve ? "curve" : "token"}});
  return absl::OkStatus();
}

job_outcome job_runner::run(const std::atomic<bool>& stop) {
  using clock = std::chrono::steady_clock;
  job_outcome outcome;
  if (cluster_) {
    if (auto s = form_cluster(stop); !s.ok()) {
      outcome.result = s.code() == absl::StatusCode::kCancelled ? job_outcome::status::interrupted
                                                                : job_outcome::status::failed;
      outcome.error = std::string(s.message());
      events_.emit(run::severity::error, "job_failed", outcome.error, {{"error", outcome.error}});
      return outcome;
    }
  }
  auto health = actors::spawn_health_monitor(*system_, plan_.spec.health, metrics_, events_);
  std::optional<actor::job_result> result;
  std::optional<clock::time_point> stop_deadline;  // set once a stop is asked for
  {
    caf::scoped_actor owner{*system_};
    auto supervisor = actors::spawn_supervisor(
        *system_, {plan_, metrics_, events_, health, caf::actor_cast<caf::actor>(owner),
                   node_.get(), run_dir_,
                   node_ ? comm::head_store_opener(head_->endpoint(), cluster_->credentials)
                         : comm::shared_memory_store_opener(),
                   pool_.get()});
    if (node_) {
      node_->publish(std::string(actors::supervisor_name), caf::actor_cast<caf::actor>(supervisor));
      node_->subscribe(caf::actor_cast<caf::actor>(supervisor));
    }
    const int timeout_s = plan_.spec.runtime.job_timeout_s;
    const auto deadline = clock::now() + std::chrono::seconds(timeout_s);
    while (!result) {
      owner->receive([&](actor::job_result& r) { result = std::move(r); },
                     caf::after(std::chrono::milliseconds(100)) >> [] {});
      if (result) break;
      if (pool_) pool_->poll();
      if (stop.load() && !stop_deadline) {
        // The app stops gracefully (a server drains), within the grace period.
        const int grace_s = plan_.spec.runtime.stop_grace_s;
        events_.emit(run::severity::warning, "job_stopping",
                     absl::StrCat("stopping on request; the app has up to ", grace_s,
                                  " s to finish (runtime.stop_grace_s), Ctrl-C again ends it now"),
                     {{"grace_s", grace_s}});
        stop_deadline = clock::now() + std::chrono::seconds(grace_s);
        caf::anon_send(supervisor, actor::stop_atom_v);
        continue;
      }
      if (stop_deadline && clock::now() > *stop_deadline) {
        events_.emit(run::severity::warning, "job_interrupted",
                     "the app did not stop within runtime.stop_grace_s; stopping it now");
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
    outcome.result = stop_deadline ? job_outcome::status::interrupted : job_outcome::status::failed;
    outcome.error = result->error;
  }
  return outcome;
}

}  // namespace troupe::apps

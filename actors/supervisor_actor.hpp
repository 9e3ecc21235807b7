#pragma once

#include "actors/health_monitor_actor.hpp"
#include "runtime/actor/interfaces.hpp"
#include "runtime/actor/role_context.hpp"
#include "runtime/app/app_plan.hpp"
#include "runtime/cluster/node_agent.hpp"
#include "runtime/comm/rendezvous_store.hpp"
#include "runtime/metrics/registry.hpp"
#include "runtime/run/event_log.hpp"

namespace troupe::actors {

/// The job's supervisor. It spawns every role's actors and the app driver, monitors them, and
/// applies each role's failure policy: a failed actor is restarted after a backoff (and the
/// driver gets its new handle through `actor_update`), or the job fails. When the job ends it
/// sends the `job_result` to `owner` and stops; its exit takes every child with it.
///
/// In a cluster (a node agent is given), roles are spread over the live workers: each worker's
/// role host spawns them, the supervisor holds stand-ins (proxies) for them, and a worker's
/// death is the death of its actors, handled by the same policy. Elastic roles get one actor per
/// worker, up to their max, also for workers that join later.
///
///   starting --all spawned--> running --driver answers run--> done (result to owner)
///   running --fail_job / restarts exhausted / driver failed--> failed (result to owner)
///   running --(stop): the driver stops gracefully--> done or interrupted (result to owner)
using supervisor_actor =
    caf::typed_actor<caf::reacts_to<actor::restart_atom, std::string>,
                     caf::reacts_to<actor::actor_down>, caf::reacts_to<actor::member_event>,
                     caf::reacts_to<actor::stop_atom>>;

/// The supervisor's collaborators; all must outlive the actor system.
struct supervisor_deps {
  const app::app_plan& plan;
  metrics::registry& metrics;
  run::event_log& events;
  health_actor health;
  /// Receives the `job_result`.
  caf::actor owner;
  /// This process's node in a cluster; null when the whole job runs in this process.
  cluster::node_agent* node = nullptr;
  /// The run directory and the rendezvous for the actors spawned here (role_context).
  std::string run_dir;
  comm::store_opener rendezvous;
  /// Starts and stops workers for an app that autoscales (role_context::scaler); may be null.
  actor::worker_scaler* scaler = nullptr;
};

[[nodiscard]] supervisor_actor spawn_supervisor(caf::actor_system& system, supervisor_deps deps);

}  // namespace troupe::actors

#pragma once

#include "actors/health_monitor_actor.hpp"
#include "runtime/app/app_plan.hpp"
#include "runtime/cluster/node_agent.hpp"

namespace troupe::actors {

/// A worker's role host, published as "host/<node>": the job's supervisor asks it to
/// `spawn(role, index)` an actor of the worker's copy of the app plan. The host publishes the
/// actor under its job-unique name ("rot13/2"), has the health monitor watch it, and when it
/// stops tells the supervisor (`actor_down`), which applies the role's failure policy as it
/// would for a local actor.
using role_host_actor =
    caf::typed_actor<caf::replies_to<actor::spawn_atom, std::string, int32_t>::with<caf::ok_atom>>;

/// The host's collaborators; all must outlive the actor system.
struct role_host_deps {
  const app::app_plan& plan;
  metrics::registry& metrics;
  run::event_log& events;
  health_actor health;
  cluster::node_agent& node;
};

[[nodiscard]] role_host_actor spawn_role_host(caf::actor_system& system, role_host_deps deps);

/// The name a node's role host is published under.
[[nodiscard]] std::string role_host_name(absl::string_view node);

/// The name the job's supervisor is published under on the head.
inline constexpr absl::string_view supervisor_name = "supervisor";

}  // namespace troupe::actors

#pragma once

#include "actors/health_monitor.hpp"
#include "runtime/actor/messages.hpp"
#include "runtime/actor/role_actor.hpp"
#include "runtime/run/event_log.hpp"

namespace troupe::actors {

/// The health monitor: `track` adds an actor under a name (again after a restart); every
/// `health.interval_ms` it pings each live actor through CAF's built-in `(sys, get, "info")`
/// query, which every actor answers from its mailbox without any handler of its own, so a
/// stuck or flooded actor shows up as missed pings.
using health_actor = caf::typed_actor<caf::reacts_to<actor::track_atom, std::string, caf::actor>,
                                      caf::reacts_to<actor::tick_atom>>;

/// Spawns the health monitor; liveness changes are written to `events`.
[[nodiscard]] health_actor spawn_health_monitor(caf::actor_system& system,
                                                const config::health_spec& spec,
                                                metrics::registry& metrics, run::event_log& events);

}  // namespace troupe::actors

#pragma once

#include <string>

#include "runtime/actor/interfaces.hpp"
#include "runtime/metrics/registry.hpp"

namespace troupe::actors {

/// Spawns a checkpoint writer on its own thread (file writes and fsync block it; they must not
/// block CAF's scheduler). A trainer spawns one and links to it.
[[nodiscard]] actor::checkpoint_writer_actor spawn_checkpoint_writer(caf::actor_system& system,
                                                                     metrics::registry& metrics,
                                                                     const std::string& name);

}  // namespace troupe::actors

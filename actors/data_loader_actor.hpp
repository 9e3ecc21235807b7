#pragma once

#include <memory>

#include "actors/data_loader.hpp"
#include "runtime/actor/interfaces.hpp"
#include "runtime/actor/role_actor.hpp"
#include "runtime/metrics/registry.hpp"

namespace troupe::actors {

/// Spawns the `data_loader_actor` of one data-parallel rank over `queue`, which reads `corpus`
/// (kept alive by the actor); its statistics go to `metrics` under `name`. It prepares one batch
/// per `(produce)` message it sends itself while it holds credits, so requests for batches are
/// answered between preparations.
[[nodiscard]] actor::data_loader_actor spawn_data_loader(caf::actor_system& system,
                                                         metrics::registry& metrics,
                                                         const std::string& name,
                                                         std::shared_ptr<const text_corpus> corpus,
                                                         prefetch_queue queue);

}  // namespace troupe::actors

#pragma once

#include "absl/status/statusor.h"
#include "apps/pipeline/pipeline_driver.hpp"
#include "runtime/actor/role_context.hpp"

namespace troupe::apps {

/// Spawns the pipeline's driver: an `app_actor` that carries out a `pipeline_driver`'s commands
/// with requests to the source, stage and sink actors, and reports progress events.
[[nodiscard]] absl::StatusOr<caf::actor> spawn_pipeline_driver(actor::role_context& ctx,
                                                               const pipeline_options& options);

}  // namespace troupe::apps

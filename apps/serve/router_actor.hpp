#pragma once

#include "absl/status/statusor.h"
#include "apps/serve/serve_options.hpp"
#include "caf/all.hpp"
#include "runtime/actor/role_context.hpp"

namespace troupe::apps {

/// The serving app's driver and router: it serves the HTTP API (http_front_end) and routes each
/// request to an inference worker (request_router), long-polling every worker for stream events.
/// Workers join through the supervisor (`actor_update`, also for elastic workers that join the
/// cluster later) and are watched: a lost worker's requests are replayed on the others. It runs
/// until the job is stopped.
[[nodiscard]] absl::StatusOr<caf::actor> spawn_serve_router(actor::role_context& ctx,
                                                            const serve_options& options);

}  // namespace troupe::apps

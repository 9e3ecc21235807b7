#pragma once

#include "runtime/actor/role_registry.hpp"

namespace troupe::apps {

/// The factory of `app: pipeline`: a driver moving items from a source role through stage roles
/// into a sink role, as listed in `pipeline.flow`. Its job summary holds the sink's item and
/// byte counts and digest, and the number of retried attempts.
[[nodiscard]] actor::role_factory pipeline_app_factory();

}  // namespace troupe::apps

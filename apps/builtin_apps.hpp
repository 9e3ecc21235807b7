#pragma once

#include "absl/status/status.h"
#include "runtime/actor/role_registry.hpp"

namespace troupe::apps {

/// Registers everything built into troupe: the app drivers (kind "app") and the built-in roles.
[[nodiscard]] absl::Status register_builtins(actor::role_registry& registry);

}  // namespace troupe::apps

#pragma once

#include "absl/status/status.h"
#include "runtime/actor/role_registry.hpp"

namespace troupe::actors {

/// Registers the built-in roles (`source/text`, `sink/digest`) in `registry`.
[[nodiscard]] absl::Status register_builtin_roles(actor::role_registry& registry);

}  // namespace troupe::actors

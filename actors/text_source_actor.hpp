#pragma once

#include "actors/text_source.hpp"
#include "runtime/actor/role_registry.hpp"

namespace troupe::actors {

/// The built-in `source/text` role: a `source_actor` serving a `text_source`.
[[nodiscard]] actor::role_factory text_source_factory();

}  // namespace troupe::actors

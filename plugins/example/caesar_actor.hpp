#pragma once

#include "caesar.hpp"
#include "runtime/actor/role_registry.hpp"

namespace troupe::example {

/// The `stage/caesar` role: a stage actor applying `caesar_shift` to each item.
[[nodiscard]] actor::role_factory caesar_factory();

}  // namespace troupe::example

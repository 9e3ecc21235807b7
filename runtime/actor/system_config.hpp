#pragma once

#include <memory>

#include "caf/actor_system_config.hpp"
#include "runtime/config/app_spec.hpp"

namespace troupe::actor {

/// A CAF actor system configuration from the app's `runtime:` section, with troupe's message
/// types and error category registered. CAF reads no files or command-line arguments.
[[nodiscard]] std::unique_ptr<caf::actor_system_config> make_system_config(
    const config::runtime_spec& runtime);

}  // namespace troupe::actor

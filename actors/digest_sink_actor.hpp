#pragma once

#include "actors/digest_sink.hpp"
#include "runtime/actor/role_registry.hpp"

namespace troupe::actors {

/// The built-in `sink/digest` role: a `sink_actor` around a `digest_sink`. It cannot be
/// restarted (the digest would be lost), so its failures fail the job.
[[nodiscard]] actor::role_factory digest_sink_factory();

}  // namespace troupe::actors

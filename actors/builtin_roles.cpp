#include "actors/builtin_roles.hpp"

#include "actors/digest_sink_actor.hpp"
#include "actors/text_source_actor.hpp"
#include "runtime/base/status.hpp"

namespace troupe::actors {

absl::Status register_builtin_roles(actor::role_registry& registry) {
  TROUPE_RETURN_IF_ERROR(registry.add("source", "text", text_source_factory()));
  TROUPE_RETURN_IF_ERROR(registry.add("sink", "digest", digest_sink_factory()));
  return absl::OkStatus();
}

}  // namespace troupe::actors

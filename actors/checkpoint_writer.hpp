#pragma once

#include "absl/status/statusor.h"
#include "runtime/actor/message_types.hpp"

namespace troupe::actors {

/// Writes one rank's checkpoint snapshot: every file staged into ROOT/.step-N.partial/ through
/// checkpoint::checkpoint_store (written, synced, hashed). Returns the snapshot's shard with the
/// files' records and `write_s` filled in; an error names the file.
[[nodiscard]] absl::StatusOr<actor::checkpoint_shard> write_snapshot(
    const actor::checkpoint_snapshot& snapshot);

}  // namespace troupe::actors

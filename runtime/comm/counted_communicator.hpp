#pragma once

#include <memory>
#include <string>

#include "runtime/comm/communicator.hpp"
#include "runtime/metrics/cycle_clock.hpp"
#include "runtime/metrics/registry.hpp"

namespace troupe::comm {

/// `inner`, with its progress in `metrics` under the name `name` (e.g. "trainer/1/dp_group"), as
/// an actor's: each operation is one message, so troupe_actor_messages_total counts the
/// operations finished, troupe_actor_handler_age_seconds is how long the one in progress has
/// waited, and troupe_actor_stuck flags it past health.stuck_after_s. The ranks of a group run
/// the same operations in the same order, so when one stops (frozen, or stuck before its next
/// call) the others show stuck in their next operation within seconds, even while its process
/// still heartbeats (docs/observability.md). A group's operations run one at a time.
[[nodiscard]] std::unique_ptr<communicator> counted(std::unique_ptr<communicator> inner,
                                                    metrics::registry& metrics,
                                                    const std::string& name);

}  // namespace troupe::comm

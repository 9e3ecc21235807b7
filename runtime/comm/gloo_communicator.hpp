#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "runtime/comm/communicator.hpp"
#include "runtime/comm/rendezvous_store.hpp"

namespace troupe::comm {

/// Forms a Gloo group over TCP for host tensors: every rank publishes its address under
/// "comm/<name>/<epoch>/" in `store` and connects to all others. When the group is not complete
/// within the timeout the result is DEADLINE_EXCEEDED, naming the group, its epoch and the store
/// key that never appeared (Gloo's key carries the missing rank).
[[nodiscard]] absl::StatusOr<std::unique_ptr<communicator>> make_gloo_communicator(
    rendezvous_store& store, const group_options& options);

}  // namespace troupe::comm

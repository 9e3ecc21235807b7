#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "runtime/comm/communicator.hpp"
#include "runtime/comm/rendezvous_store.hpp"

namespace troupe::comm {

/// Forms an NCCL group for CUDA tensors on `cuda_device`: rank 0 publishes the NCCL unique id
/// under "comm/<name>/<epoch>/nccl_id" in `store`. The communicator is non-blocking underneath,
/// so every operation (and the formation itself) is polled against the group's timeout and the
/// communicator is aborted instead of hanging (DESIGN.md "Failure model"). An error where
/// troupe was built without CUDA.
[[nodiscard]] absl::StatusOr<std::unique_ptr<communicator>> make_nccl_communicator(
    rendezvous_store& store, const group_options& options, int cuda_device);

/// The NCCL library's version ("2.28.3"), or why there is none.
[[nodiscard]] absl::StatusOr<std::string> nccl_version();

}  // namespace troupe::comm

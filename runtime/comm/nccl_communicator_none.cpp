// Built when troupe is compiled without CUDA.

#include "runtime/comm/nccl_communicator.hpp"

namespace troupe::comm {

absl::StatusOr<std::unique_ptr<communicator>> make_nccl_communicator(rendezvous_store&,
                                                                     const group_options&, int) {
  return absl::FailedPreconditionError(
      "troupe was built without CUDA, so without NCCL; use the Gloo communicator for host "
      "tensors or rebuild where nvcc exists");
}

absl::StatusOr<std::string> nccl_version() {
  return absl::FailedPreconditionError("troupe was built without CUDA, so without NCCL");
}

}  // namespace troupe::comm

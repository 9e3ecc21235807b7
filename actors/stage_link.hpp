#pragma once

#include <vector>

#include "absl/status/status.h"
#include "runtime/comm/communicator.hpp"
#include "runtime/tensor/tensor.hpp"

namespace troupe::actors {

/// The data plane between pipeline stages and within a tensor-parallel group, on whatever
/// device the tensors are: pipeline_stage runs it with host tensors over Gloo, and with device
/// tensors over NCCL the same calls become grouped ncclSend/ncclRecv and ncclAllReduce
/// (tests/actors/stage_link_cuda_test.cpp).
///
/// A micro-batch's activations go to the next stage and their gradients back to the one
/// before, each under a tag of its own, so transfers of different micro-batches in flight at
/// once never pair up wrongly.
class stage_link {
 public:
  /// `pipe`: the pipeline group, rank = stage (nullptr with one stage).
  stage_link(comm::communicator* pipe, int stage, int stages)
      : pipe_(pipe), stage_(stage), stages_(stages) {}

  [[nodiscard]] bool first() const { return stage_ == 0; }
  [[nodiscard]] bool last() const { return stage_ == stages_ - 1; }

  /// Micro-batch `mb`'s activations to the next stage, or from the one before.
  [[nodiscard]] comm::transfer activations_out(tensor::tensor data, int mb) const {
    return {std::move(data), stage_ + 1, activation_tag(mb)};
  }
  [[nodiscard]] comm::transfer activations_in(tensor::tensor data, int mb) const {
    return {std::move(data), stage_ - 1, activation_tag(mb)};
  }
  /// Micro-batch `mb`'s gradients of the activations the stage before sent, back to it; or
  /// from the next stage.
  [[nodiscard]] comm::transfer gradients_out(tensor::tensor data, int mb) const {
    return {std::move(data), stage_ - 1, gradient_tag(mb)};
  }
  [[nodiscard]] comm::transfer gradients_in(tensor::tensor data, int mb) const {
    return {std::move(data), stage_ + 1, gradient_tag(mb)};
  }

  /// Posts the sends and receives together and waits for them all (Megatron's
  /// send_forward_recv_backward and its kin): neighbours never wait on each other's sends.
  [[nodiscard]] absl::Status exchange(const std::vector<comm::transfer>& sends,
                                      const std::vector<comm::transfer>& recvs) const {
    return pipe_->exchange(sends, recvs);
  }

 private:
  static uint32_t activation_tag(int mb) { return static_cast<uint32_t>(2 * mb); }
  static uint32_t gradient_tag(int mb) { return static_cast<uint32_t>(2 * mb + 1); }

  comm::communicator* pipe_;
  int stage_, stages_;
};

/// A tensor-parallel sum: `part` (this rank's partial result of a row-parallel projection, or
/// its part of a LayerNorm input's gradient) becomes the sum over the group, in place, on the
/// tensor's device.
[[nodiscard]] inline absl::Status tensor_parallel_sum(comm::communicator& group,
                                                      const tensor::tensor& part) {
  return group.allreduce(part, comm::reduce_op::sum);
}

}  // namespace troupe::actors

#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "runtime/comm/communicator.hpp"
#include "runtime/tensor/tensor.hpp"

namespace troupe::actors {

/// The checksum of a weight buffer that a receiver acknowledges: the sha256 of its bytes (a
/// device buffer is copied to the host first).
[[nodiscard]] absl::StatusOr<std::string> weights_checksum(const tensor::tensor& weights);

/// The RL weight sync on the data plane: `weights` (f32, the same size on every rank) goes from
/// rank `root` of `group` to every other rank, bucket by bucket (each at most `bucket_bytes`), as
/// one Gloo (CPU) or NCCL (GPU) broadcast per bucket. Every rank calls it; the others' buffers
/// are overwritten. Returns the checksum of the buffer on this rank afterwards, which a receiver
/// acknowledges and the sender compares. Fails with the group's timeout when a rank does not
/// take part, naming the bucket.
[[nodiscard]] absl::StatusOr<std::string> broadcast_weights(comm::communicator& group,
                                                            const tensor::tensor& weights,
                                                            int64_t bucket_bytes, int root);

}  // namespace troupe::actors

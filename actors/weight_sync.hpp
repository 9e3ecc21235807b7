#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "runtime/actor/message_types.hpp"
#include "runtime/comm/communicator.hpp"
#include "runtime/tensor/tensor.hpp"

namespace troupe::actors {

/// Where a weight-sync participant finds its group: the group's name and timeout (each sync
/// round says the rank, the size and the epoch), formed through the job's rendezvous store;
/// and the broadcast's bucket size.
struct weight_sync_spec {
  comm::group_options group;
  int64_t bucket_bytes = int64_t{32} << 20;
};

/// `group` as sync round `round` forms it: its rank, size and epoch.
[[nodiscard]] inline comm::group_options sync_group_options(comm::group_options group,
                                                            const actor::weight_sync_round& round) {
  group.rank = round.rank;
  group.size = round.ranks;
  group.epoch = round.epoch;
  return group;
}

/// The checksum of a weight buffer that a receiver acknowledges: XXH3-128 of its bytes, 32 hex
/// digits (not a cryptographic digest: it catches a torn or mixed transfer, at memory speed; a
/// device buffer is copied to the host first).
[[nodiscard]] absl::StatusOr<std::string> weights_checksum(const tensor::tensor& weights);

/// The RL weight sync on the data plane: `weights` (f32, the same size on every rank) goes from
/// rank `root` of `group` to every other rank, bucket by bucket (each at most `bucket_bytes`), as
/// one Gloo (CPU) or NCCL (GPU) broadcast per bucket. Every rank calls it; the others' buffers
/// are overwritten. Returns the checksum of the buffer on this rank afterwards, which a receiver
/// acknowledges and the sender compares; for host weights it is computed as the bucket's pieces
/// move (communicator::broadcast_in_pieces), each read from the cache. Fails with the group's
/// timeout when a rank does not take part, naming the bucket.
[[nodiscard]] absl::StatusOr<std::string> broadcast_weights(comm::communicator& group,
                                                            const tensor::tensor& weights,
                                                            int64_t bucket_bytes, int root);

}  // namespace troupe::actors

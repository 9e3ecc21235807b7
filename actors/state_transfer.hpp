#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"

namespace troupe::actors {

/// How a data-parallel world holds the training state of a flat buffer of `total` parameters:
/// every rank the whole parameters; the AdamW moments whole on every rank, or (ZeRO-1/2,
/// `sharded`) rank r's shard of them only, with (`replicas`) a copy of rank r + 1's shard.
struct state_split {
  int64_t total = 0;
  bool sharded = false;
  bool replicas = false;

  /// The parameters whose moments rank `rank` of `ranks` keeps: ZeRO's shards are
  /// ceil(total / ranks) long (the last ones shorter or empty), or everything.
  struct range {
    int64_t begin, end;
  };
  [[nodiscard]] range moments(int rank, int ranks) const;
  /// The range of the copy rank `rank` keeps: rank + 1's shard (empty without replicas, or
  /// alone, where there is nobody to lose the shard to).
  [[nodiscard]] range replica(int rank, int ranks) const;
};

/// Where a rank keeps a piece of the state.
enum class state_buffer { params, moments, replica };

/// What a member of a regrouped group brings to it.
struct member_state {
  int basis_rank = -1;  ///< its rank in the generation its state is of; -1: none (a joiner)
  int64_t steps = -1;   ///< the optimizer steps its state holds
};

/// Elements [begin, end) of the flat buffer, from rank `from`'s buffer to rank `to`'s
/// (from == to: a copy within the rank, from its previous trainer to its new one).
struct state_piece {
  int from, to;
  state_buffer from_buffer, to_buffer;
  int64_t begin, end;
};

/// What moves where when a data-parallel group is formed anew (a rank lost or joined), so that
/// every member of `members` (new rank order) continues from the state of step `steps`, split
/// as `split` over the new world: its parameters, its new shard of the moments, and its
/// replica. The state comes from the members that hold step `steps` ("current"; the basis
/// generation had `basis_ranks` ranks): a lost rank's shard from the rank that kept its
/// replica, and what several members hold is spread over them, so a joiner pulls its state
/// from several peers at once. Every member computes the same plan from the same inputs.
///
/// FAILED_PRECONDITION when the state cannot be rebuilt: no member holds step `steps`, a
/// sharded member holds another step, or a shard is gone with its rank and its replica; the
/// group must then restore a checkpoint instead. INVALID_ARGUMENT for inconsistent inputs.
[[nodiscard]] absl::StatusOr<std::vector<state_piece>> plan_state_transfer(
    const std::vector<member_state>& members, int basis_ranks, int64_t steps,
    const state_split& split);

}  // namespace troupe::actors

#include "actors/trainer.hpp"

// The trainer's elastic part: a data-parallel group formed anew after its membership changed
// (the state taken from the survivors, several at once), and the undo of a step that did not
// complete on every rank. The step itself is in trainer.cpp.

#include <cstring>

#include "absl/strings/str_cat.h"
#include "actors/state_transfer.hpp"
#include "runtime/base/status.hpp"

namespace troupe::actors {

absl::StatusOr<std::unique_ptr<trainer>> trainer::regroup(trainer* previous,
                                                          const models::decoder_layout& layout,
                                                          const trainer_options& options,
                                                          comm::communicator* group,
                                                          int64_t steps) {
  if (previous != nullptr && previous->steps() == steps + 1 && previous->undo_.armed) {
    TROUPE_RETURN_IF_ERROR(previous->rollback_step());
  }
  if (options.pipeline.stages > 1 || layout.tp().size > 1) {
    return absl::FailedPreconditionError(
        "a pipeline stage or tensor-parallel rank is not elastic: only the data-parallel "
        "dimension regroups");
  }
  TROUPE_ASSIGN_OR_RETURN(std::unique_ptr<trainer> t, create(layout, options, group));
  TROUPE_RETURN_IF_ERROR(t->take_state(previous, steps));
  return t;
}

absl::Status trainer::rollback_step() {
  if (!undo_.armed) {
    return absl::FailedPreconditionError(
        "rollback: this rank has no step to undo (only an elastic ZeRO-1/2 step keeps one)");
  }
  std::copy(undo_.m.begin(), undo_.m.end(), optimizer_->first_moment().begin());
  std::copy(undo_.v.begin(), undo_.v.end(), optimizer_->second_moment().begin());
  optimizer_->set_steps(undo_.steps);
  if (undo_.committed) {
    std::swap(params_, grads_);  // grads_ holds the parameters from before the step
    std::swap(replica_, incoming_);
  }
  undo_.armed = undo_.committed = false;
  return absl::OkStatus();
}

absl::Status trainer::take_state(trainer* previous, int64_t steps) {
  // What every member holds: its rank in the group its state is of, that group's size, and
  // the step its state is at (-1s for a joiner).
  tensor::tensor held = tensor::tensor::host({3 * ranks_}, tensor::dtype::i32);
  int32_t* h = held.data<int32_t>();
  h[3 * rank_] = previous ? previous->rank_ : -1;
  h[3 * rank_ + 1] = previous ? previous->ranks_ : 0;
  h[3 * rank_ + 2] = previous ? static_cast<int32_t>(previous->steps()) : -1;
  if (ranks_ > 1) {
    tensor::tensor mine = tensor::tensor::host({3}, tensor::dtype::i32);
    std::copy(h + 3 * rank_, h + 3 * rank_ + 3, mine.data<int32_t>());
    TROUPE_RETURN_IF_ERROR(group_->allgather(mine, held));
  }
  std::vector<member_state> members(ranks_);
  int basis_ranks = 0;
  for (int j = 0; j < ranks_; ++j) {
    members[j] = {h[3 * j], h[3 * j + 2]};
    if (h[3 * j] < 0) continue;
    if (basis_ranks != 0 && h[3 * j + 1] != basis_ranks) {
      return absl::InvalidArgumentError(
          absl::StrCat("regroup: the survivors come from groups of different sizes (", basis_ranks,
                       " and ", h[3 * j + 1], ")"));
    }
    basis_ranks = h[3 * j + 1];
  }
  const state_split split{layout_.total(), options_.zero != zero_stage::none,
                          options_.shard_replicas};
  TROUPE_ASSIGN_OR_RETURN(std::vector<state_piece> plan,
                          plan_state_transfer(members, basis_ranks, steps, split));

  // A buffer's elements [begin, end) of the flat buffer, of a trainer (m and v for the moments
  // and the replica).
  const auto spans = [](trainer& t, state_buffer b, int64_t begin) -> std::vector<float*> {
    switch (b) {
      case state_buffer::params:
        return {t.params_.data<float>() + begin};
      case state_buffer::moments: {
        const int64_t at = begin - t.optimizer_->begin();
        return {t.optimizer_->first_moment().data() + at,
                t.optimizer_->second_moment().data() + at};
      }
      case state_buffer::replica: {
        const int64_t at = begin - t.replica_begin_, n = t.replica_.numel() / 2;
        return {t.replica_.data<float>() + at, t.replica_.data<float>() + n + at};
      }
    }
    return {};
  };
  std::vector<comm::transfer> sends, recvs;
  std::vector<std::pair<tensor::tensor, float*>> arriving;  // copied into place once received
  for (size_t k = 0; k < plan.size(); ++k) {
    const state_piece& p = plan[k];
    if (p.from != rank_ && p.to != rank_) continue;
    const int64_t n = p.end - p.begin;
    const std::vector<float*> to =
        p.to == rank_ ? spans(*this, p.to_buffer, p.begin) : std::vector<float*>{};
    const std::vector<float*> from =
        p.from == rank_ ? spans(*previous, p.from_buffer, p.begin) : std::vector<float*>{};
    const size_t parts = std::max(to.size(), from.size());
    for (size_t part = 0; part < parts; ++part) {
      const uint32_t tag = static_cast<uint32_t>(2 * k + part);
      if (p.from == rank_ && p.to == rank_) {
        std::memcpy(to[part], from[part], n * sizeof(float));
      } else if (p.from == rank_) {
        tensor::tensor out = tensor::tensor::host({n});
        std::memcpy(out.data<float>(), from[part], n * sizeof(float));
        sends.push_back({out, p.to, tag});
      } else {
        tensor::tensor in = tensor::tensor::host({n});
        recvs.push_back({in, p.from, tag});
        arriving.emplace_back(in, to[part]);
      }
    }
  }
  if (!sends.empty() || !recvs.empty()) TROUPE_RETURN_IF_ERROR(group_->exchange(sends, recvs));
  for (const auto& [in, to] : arriving)
    std::memcpy(to, in.data<float>(), in.numel() * sizeof(float));
  optimizer_->set_steps(steps);
  return absl::OkStatus();
}

}  // namespace troupe::actors

#pragma once

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "actors/pipeline_schedule.hpp"
#include "kernels/cpu/thread_pool.hpp"
#include "models/decoder/decoder_cpu_stage.hpp"
#include "runtime/actor/message_types.hpp"
#include "runtime/comm/communicator.hpp"

namespace troupe::actors {

/// A pipeline's shape as one stage sees it.
struct pipeline_options {
  int stages = 1;
  int stage = 0;
  int micro_batches = 1;  ///< a step's micro-batches: each replica's share is split into these
  pipeline_schedule_kind schedule = pipeline_schedule_kind::one_f_one_b;
};

/// What the last train() spent: its stage computing, and waiting for its neighbours.
struct pipeline_times {
  double busy_s = 0;
  double idle_s = 0;
  double tensor_sum_s = 0;  ///< of busy_s: summing the blocks' parts over the tensor-parallel group
};

/// One pipeline stage's part of a training step, without CAF: a stage of the model (its layout
/// holds a block range; the first also the embeddings, the last the final norm, the head and
/// the loss) runs its schedule over the micro-batches of its replica's share of the global batch.
/// Activations go to the next stage and their gradients to the one before, point to point on
/// the pipeline group (rank = stage), each send posted together with the receive the stage's
/// next unit needs (Megatron's send_forward_recv_backward), so neighbours never wait on each
/// other's sends; every wait has the group's timeout.
///
/// Each micro-batch in flight (forward done, backward not yet) has its own activations: as many
/// copies of the stage as the schedule holds at once (1F1B: p - s on stage s, GPipe: m, zb1: p,
/// a micro-batch being in flight until its weight gradient).
class pipeline_stage {
 public:
  /// `layout` is this stage's (it must outlive this); `micro_rows`: sequences per micro-batch;
  /// `pool` spreads attention heads (nullptr: the calling thread alone); `checkpoint_segment`:
  /// activation checkpointing inside each copy (decoder_cpu_stage); `tensor`: with a
  /// tensor-parallel layout, the group its blocks' sums go over. The pipeline group `pipe` of
  /// train() and evaluate() may be nullptr with one stage (a tensor-parallel rank of no pipeline).
  pipeline_stage(const models::decoder_layout& layout, const pipeline_options& options,
                 int micro_rows, kernels::cpu::thread_pool* pool, int checkpoint_segment,
                 comm::communicator* tensor = nullptr);

  /// This stage's schedule over `local` (micro_batches x micro_rows sequences; the first stage
  /// reads its tokens, the last its targets), adding the gradients to `grads`, each token's
  /// loss weighted `loss_scale`. The loss summed over the last stage's tokens (nothing
  /// elsewhere).
  [[nodiscard]] absl::StatusOr<models::loss_sum> train(const float* params, float* grads,
                                                       const actor::token_batch& local,
                                                       float loss_scale, comm::communicator* pipe);
  /// The forward passes of `batch` (micro_rows sequences at a time, none kept): the loss summed
  /// over the last stage's tokens.
  [[nodiscard]] absl::StatusOr<models::loss_sum> evaluate(const float* params,
                                                          const actor::token_batch& batch,
                                                          comm::communicator* pipe);

  /// ZeRO-3: every copy's block hooks (decoder_cpu_stage::set_block_hooks).
  void set_block_hooks(const models::decoder_cpu_stage::block_hooks& hooks) {
    for (auto& copy : copies_)
      copy->set_block_hooks(hooks);
  }

  [[nodiscard]] const pipeline_times& last_times() const { return times_; }
  /// The activations every copy holds at its largest micro-batch, in bytes.
  [[nodiscard]] int64_t activation_bytes() const;
  [[nodiscard]] const pipeline_options& options() const { return options_; }
  /// Copies of the stage a schedule needs: the most micro-batches it holds at once (forward
  /// done, backward not yet).
  [[nodiscard]] static int copies(const pipeline_options& options);
  /// Whether the schedule runs backwards in halves (zb1), each copy keeping its blocks' output
  /// gradients in between (decoder_cpu_stage's defer_weight_gradients).
  [[nodiscard]] static bool defers_weight_gradients(const pipeline_options& options) {
    return options.schedule == pipeline_schedule_kind::zb1;
  }
  [[nodiscard]] int micro_rows() const { return micro_rows_; }

 private:
  [[nodiscard]] bool first() const { return options_.stage == 0; }
  [[nodiscard]] bool last() const { return options_.stage == options_.stages - 1; }

  const models::decoder_layout& layout_;
  pipeline_options options_;
  int micro_rows_;
  std::vector<pipeline_action> plan_;
  std::vector<std::unique_ptr<models::decoder_cpu_stage>> copies_;
  tensor::tensor in_, out_;    // a micro-batch's hidden state or its gradient, received or sent
  tensor::tensor tensor_sum_;  // what a tensor-parallel sum adds up over the group
  double tensor_sum_s_ = 0;    // the sums' time in this train()
  pipeline_times times_;
};

}  // namespace troupe::actors

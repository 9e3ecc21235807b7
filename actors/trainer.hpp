#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "actors/data_loader.hpp"
#include "actors/dpo_objective.hpp"
#include "actors/pipeline_stage.hpp"
#include "actors/policy_objective.hpp"
#include "actors/reward_objective.hpp"
#include "actors/value_objective.hpp"
#include "actors/zero3_parameters.hpp"
#include "models/decoder/adamw_optimizer.hpp"
#include "models/decoder/decoder_cpu_batch.hpp"
#include "runtime/checkpoint/checkpoint_store.hpp"
#include "runtime/comm/collective_queue.hpp"
#include "runtime/comm/communicator.hpp"
#include "runtime/tensor/safetensors.hpp"

namespace troupe::actors {

/// Linear warmup over `warmup` steps, then cosine decay to peak * min_ratio at `total` steps.
struct lr_schedule {
  float peak = 1e-3f;
  int warmup = 0;
  int total = 1;
  float min_ratio = 0.1f;

  /// The learning rate of 0-based step `step`.
  [[nodiscard]] float at(int64_t step) const;
};

/// How the optimizer state and gradients are split over the data-parallel ranks.
enum class zero_stage {
  none = 0,  ///< gradients all-reduced, every rank holds the whole optimizer state
  one = 1,   ///< gradients all-reduced, each rank updates its shard, parameters all-gathered
  two = 2,   ///< gradients reduce-scattered, each rank keeps only its shard's gradients
  /// parameters sharded too: each block gathered while it runs (zero3_parameters)
  three = 3,
};

/// What a trainer is built with.
struct trainer_options {
  int global_batch = 16;  ///< sequences per optimizer step, over every rank
  /// Sequences per forward/backward pass on one rank; the rank's share of the global batch is
  /// run in passes of this size whose gradients accumulate. 0: the whole share in one pass.
  int micro_batch = 0;
  /// Rows of this rank's share of the largest RL batch it takes (a step's mini-batch, or the
  /// rows it gives log-probs of), when larger than its share of global_batch; passes are then
  /// at most this many rows (or micro_batch).
  int rl_rows = 0;
  int threads = 1;  ///< cores this rank computes on
  /// Activation checkpointing: blocks per recomputed segment (1: every block); 0: none.
  int checkpoint_segment = 0;
  /// A pipeline stage (stages > 1): the layout holds this stage's blocks, and a step runs the
  /// stage's schedule over micro-batches, with its neighbours on the pipeline group.
  pipeline_options pipeline;
  lr_schedule lr;
  models::adamw_options adamw;
  float grad_clip = 1.0f;  ///< global gradient norm limit; 0 disables clipping
  zero_stage zero = zero_stage::none;
  /// All-reduce gradient buckets on a thread of their own while the backward pass goes on (not
  /// with ZeRO-2). It pays when that thread has a core to itself; on a rank whose cores are all
  /// computing it only adds contention.
  bool overlap_comm = true;
  /// ZeRO-1/2 in an elastic job: each rank keeps a copy of the next rank's optimizer shard,
  /// refreshed every step, so a lost rank's shard survives it (parallel.shard_replicas: 1).
  bool shard_replicas = false;
  /// An elastic job's rank: a ZeRO-1/2 step keeps what undoes it (rollback_step) until the next.
  bool elastic = false;
  uint64_t seed = 1;
  /// DPO (app: dpo): step() on a language model trains on preference pairs with this loss
  /// (actors/dpo_objective.hpp) instead of the mean token loss.
  std::optional<kernels::preference_options> preference;
};

using actor::step_report;

/// What one rank holds, in bytes (f32): its parameters, their gradients, its optimizer state
/// (the moments of its shard, and of its replica), and the activations kept for backward at its
/// largest pass (a pipeline stage: every micro-batch in flight).
struct trainer_memory {
  int64_t parameters = 0, gradients = 0, optimizer = 0, activations = 0;
};

/// One data-parallel rank of the training loop, without CAF: its model replica, its share of the
/// optimizer, and the group it synchronises with (nullptr when it trains alone).
///
/// A step: forward and backward of this rank's share of the global batch (in micro-batch passes
/// whose gradients accumulate), each token's loss weighted 1 / (global tokens); the gradients
/// summed over the ranks (all-reduced bucket by bucket while the backward pass goes on when
/// overlap_comm, else afterwards; reduce-scattered afterwards with ZeRO-2); the global norm
/// clipped; AdamW on this rank's shard; the updated parameters all-gathered (ZeRO-1/2). Every rank
/// ends the step with the same parameters.
class trainer {
 public:
  /// `group`: the data-parallel group (of this stage and tensor-parallel rank); `pipe`: with
  /// options.pipeline.stages > 1, the pipeline group (rank = stage), which also sums the tied
  /// embedding's gradient between the first and the last stage, the loss and the gradient norm;
  /// `tensor`: with a tensor-parallel layout, its group (rank = layout.tp().rank), which sums
  /// each block's row-parallel parts and the gradient norm, and over which the replicated
  /// parameters' gradients are checked to agree. INVALID_ARGUMENT when the batch does not split
  /// into the ranks' shares and those into the micro-batches, or a group does not fit.
  /// The trainer keeps `layout` by reference: it must outlive the trainer (a temporary cannot).
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<trainer>> create(
      const models::decoder_layout& layout, const trainer_options& options,
      comm::communicator* group, comm::communicator* pipe = nullptr,
      comm::communicator* tensor = nullptr);
  static absl::StatusOr<std::unique_ptr<trainer>> create(
      models::decoder_layout&& layout, const trainer_options& options, comm::communicator* group,
      comm::communicator* pipe = nullptr, comm::communicator* tensor = nullptr) = delete;
  /// A trainer on `group`, a data-parallel group formed anew after its membership changed (a
  /// rank lost or joined), continuing from the state of optimizer step `steps`. A collective of
  /// the new group: each survivor passes its `previous` trainer, a joining rank nullptr. The
  /// ranks first tell each other what they hold (actors/state_transfer.hpp plans the rest):
  /// every rank takes the parameters and its new shard of the moments (and of the replica) from
  /// the ranks that hold them, several at once, a lost rank's shard from the rank that kept its
  /// replica. A survivor one step ahead (a ZeRO step that did not complete on every rank) rolls
  /// that step back first; with ZeRO 0, one behind takes the whole state. The new world splits
  /// the global batch as evenly as it goes (the lost rank's share spread over the others).
  /// FAILED_PRECONDITION when the state is not all there (a shard lost with its replica): the
  /// group then restores a checkpoint instead.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<trainer>> regroup(
      trainer* previous, const models::decoder_layout& layout, const trainer_options& options,
      comm::communicator* group, int64_t steps);
  static absl::StatusOr<std::unique_ptr<trainer>> regroup(trainer* previous,
                                                          models::decoder_layout&& layout,
                                                          const trainer_options& options,
                                                          comm::communicator* group,
                                                          int64_t steps) = delete;

  /// What a trainer of `layout` with `options` in a data-parallel group of `ranks` holds, without
  /// making one.
  [[nodiscard]] static trainer_memory memory(const models::decoder_layout& layout,
                                             const trainer_options& options, int ranks);

  /// Undoes the last step, which a ZeRO-1/2 elastic rank completed but some other rank did not:
  /// the parameters, this rank's moments and replica and the step count are those before it.
  /// FAILED_PRECONDITION when there is no such step to undo.
  [[nodiscard]] absl::Status rollback_step();

  /// One optimizer step on this rank's share of a global batch: a language model's mean token
  /// loss; a value-head model's (a reward model, app: reward_model) mean Bradley-Terry loss of
  /// the preference pairs `local` holds (reward_objective.hpp), in passes of whole pairs; with
  /// options.preference, a language model's mean DPO loss of them (dpo_objective.hpp), whose
  /// figures the report's `pairs` holds.
  [[nodiscard]] absl::StatusOr<step_report> step(const token_batch& local);
  /// One optimizer step of the RL policy on this rank's share of a mini-batch: the objective
  /// instead of the mean token loss, the same gradient sum, clipping and update. Every rank
  /// reports the whole mini-batch's metrics. INVALID_ARGUMENT for a malformed batch.
  [[nodiscard]] absl::StatusOr<actor::rl_step_report> step(const actor::rl_batch& local,
                                                           const policy_objective& objective);
  /// One optimizer step of the RL critic (a value-head layout) on this rank's share of a
  /// mini-batch: the clipped value loss. Every rank reports the mini-batch's critic metrics.
  [[nodiscard]] absl::StatusOr<actor::rl_step_report> step(const actor::rl_batch& local,
                                                           const value_objective& objective);
  /// Each position's value of `local`'s sequences, forward only (a value-head layout).
  [[nodiscard]] absl::StatusOr<std::vector<float>> values(const actor::rl_batch& local);
  /// log p(target) under softmax(logits / temperature) at each position of `local` (0 where the
  /// target is -1), forward only: the old and the reference log-probs of an RL step.
  [[nodiscard]] absl::StatusOr<std::vector<float>> log_probs(const actor::rl_batch& local,
                                                             float temperature);
  /// The mean token loss over `batches`, split over the ranks and summed in the group.
  [[nodiscard]] absl::StatusOr<double> evaluate(const std::vector<token_batch>& batches);
  /// A reward model's (or, with options.preference, DPO's) held-out figures over `batches` of
  /// preference pairs, split over the ranks and summed in the group.
  [[nodiscard]] absl::StatusOr<pair_sums> evaluate_pairs(const std::vector<token_batch>& batches);
  /// The held-out figures of `batches`: evaluate()'s for a language model, evaluate_pairs()' (as
  /// means) for a reward model or DPO.
  [[nodiscard]] absl::StatusOr<actor::eval_report> held_out_report(
      const std::vector<token_batch>& batches);

  [[nodiscard]] int64_t steps() const { return optimizer_->steps(); }
  /// This rank's place in its group (0 alone).
  [[nodiscard]] int rank() const { return rank_; }
  [[nodiscard]] const float* params() const { return params_.data<float>(); }
  /// The last step's gradients summed over the ranks, before clipping (ZeRO 0: with ZeRO-1/2
  /// the buffer then receives the parameters, with ZeRO-3 it holds this rank's chunks only).
  [[nodiscard]] const float* gradients() const { return grads_.data<float>(); }
  [[nodiscard]] const models::decoder_layout& layout() const { return layout_; }
  /// The activations this rank holds for backward at its largest pass, in bytes.
  [[nodiscard]] int64_t activation_bytes() const {
    return pipeline_ ? pipeline_->activation_bytes() : model_->activation_bytes();
  }
  /// A pipeline stage's busy and idle time in its last step.
  [[nodiscard]] pipeline_times last_pipeline_times() const {
    return pipeline_ ? pipeline_->last_times() : pipeline_times{};
  }

  /// This rank's optimizer moments and step count, for a checkpoint ("m", "v"; metadata
  /// begin, end, steps). With ZeRO none, only rank 0's is needed.
  [[nodiscard]] tensor::named_tensors optimizer_state() const;
  /// Restores parameters and the step count, and this rank's moments from the optimizer states
  /// every rank of the saving run wrote, whatever that run's dp was (resharding).
  [[nodiscard]] absl::Status restore(const tensor::named_tensors& weights,
                                     const std::vector<tensor::named_tensors>& optimizer_states);

  /// This rank's files of a checkpoint, copied to fresh host memory (a snapshot the next step
  /// does not touch): rank 0 writes "model.safetensors"; every rank that holds a distinct
  /// optimizer shard (rank 0 alone without ZeRO) writes "optimizer-<rank>.safetensors". With
  /// ZeRO-3 a collective of the group: the model is gathered for rank 0 to write.
  [[nodiscard]] absl::StatusOr<std::vector<std::pair<std::string, tensor::named_tensors>>>
  checkpoint_files();
  /// Restores from a checkpoint that checkpoint_files() of every saving rank made.
  [[nodiscard]] absl::Status restore(const checkpoint::checkpoint& saved);
  /// Takes only the weights of a model (a checkpoint's or a Hugging Face model's, by name:
  /// models::read_model_tensors), keeping this trainer's optimizer state and step: the start of
  /// init_from, the RL policy and reference. A value-head trainer takes a language model's trunk
  /// and keeps its own value head (the RL critic starts from the policy). Errors name `origin`.
  [[nodiscard]] absl::Status load_weights(const tensor::named_tensors& weights,
                                          const std::string& origin);
  /// The weights as one flat f32 buffer of layout().total() elements (a view, not a copy).
  [[nodiscard]] tensor::tensor weights() const;

 private:
  trainer(const models::decoder_layout& layout, const trainer_options& options,
          comm::communicator* group, comm::communicator* pipe, comm::communicator* tensor);

  // One micro-batch pass over `rows` rows from `row`, adding its gradients; `ready` (when set)
  // hears of the gradient buckets as they finish.
  using gradient_pass = std::function<absl::Status(
      int row, int rows, const models::decoder_cpu_batch::gradients_ready& ready)>;
  // INVALID_ARGUMENT for what ZeRO-3 does not do.
  [[nodiscard]] static absl::Status check_zero3(const models::decoder_layout& layout,
                                                const trainer_options& options, int ranks);
  // evaluate()'s own part with ZeRO-3: this rank's loss sum.
  absl::StatusOr<models::loss_sum> evaluate_zero3(const std::vector<token_batch>& batches);
  // Where a pass adds its gradients: grads_, or with ZeRO-3 its local buffer.
  [[nodiscard]] float* pass_grads() const {
    return zero3_ ? zero3_->local() : grads_.data<float>();
  }
  // FAILED_PRECONDITION for what a pipeline stage does not do (`what`).
  [[nodiscard]] absl::Status not_on_a_pipeline(const char* what) const;
  // A pipeline stage's part between the passes and the update: the tied embedding's gradient
  // summed over the first and last stages (before the data-parallel sum).
  [[nodiscard]] absl::Status sum_tied_embedding();
  // Tensor parallelism: the replicated parameters' gradients are the same bits on every rank.
  [[nodiscard]] absl::Status check_replicated_gradients();
  // The part of a step every objective shares: the passes of at most `pass_rows` rows over
  // this rank's `rows` rows, then
  // `sums` (read after the passes: statistics to add up over the ranks) and the gradients summed
  // over the ranks, the global norm clipped, AdamW, the parameters gathered. `report` gets the
  // timings, norm, lr and step; `sums` the totals.
  absl::Status accumulate_and_apply(int rows, int pass_rows, const gradient_pass& pass,
                                    const std::function<std::vector<float>()>& local_sums,
                                    std::vector<float>& sums, step_report& report);
  // accumulate_and_apply() for an RL objective: `to_report` turns the summed statistics into
  // the step's metrics, to which the shared figures are added.
  absl::StatusOr<actor::rl_step_report> rl_step(
      int rows, const gradient_pass& pass, const std::function<std::vector<float>()>& local_sums,
      const std::function<actor::rl_step_report(const std::vector<float>&)>& to_report);
  // step() for a reward model, and for DPO.
  absl::StatusOr<step_report> pair_step(const token_batch& local);
  // This rank's pair sums of `b` without gradients: a reward model's, or DPO's.
  [[nodiscard]] pair_sums pair_sums_of(const token_batch& b, int pass_rows);
  // The rows of a pass of whole pairs; INVALID_ARGUMENT when the model has no room for a pair.
  [[nodiscard]] absl::StatusOr<int> pair_pass_rows(const char* objective) const;
  // Adds up `sums` over the data-parallel group.
  [[nodiscard]] absl::StatusOr<pair_sums> pair_sums_over_group(const pair_sums& mine);
  // Fills this new trainer's state from the members' previous trainers (regroup).
  absl::Status take_state(trainer* previous, int64_t steps);
  // After the update of a ZeRO step: the parameters gathered, the replicas refreshed, and only
  // then the step made this rank's state (params_ keeps the old parameters until then).
  absl::Status gather_and_commit(step_report& report);
  // INVALID_ARGUMENT unless `local` holds batch x ctx tokens (and targets, when `targets`).
  [[nodiscard]] static absl::Status check_sequences(const char* what, const actor::rl_batch& local,
                                                    bool targets);

  const models::decoder_layout& layout_;
  trainer_options options_;
  comm::communicator* group_;
  comm::communicator* pipe_ = nullptr;    // a pipeline stage's group, rank = stage
  comm::communicator* tensor_ = nullptr;  // a tensor-parallel rank's group
  // The ranges of the buffer whose gradients' squares this rank adds to the global norm: not a
  // last stage's copy of the tied embedding (the first stage's counts), and replicated
  // parameters on tensor-parallel rank 0 only.
  std::vector<models::param_range> counted_;
  // The parameters every tensor-parallel rank holds whole.
  std::vector<models::param_range> replicated_;
  std::unique_ptr<comm::collective_queue> buckets_;  // gradient all-reduces during backward
  int rank_ = 0, ranks_ = 1;
  int pass_rows_ = 1;  // rows of the largest forward/backward pass the model has room for
  int64_t shard_ = 0;  // parameters per rank; the buffers are padded to ranks * shard
  tensor::tensor params_, grads_;
  tensor::tensor shard_buffer_;  // this rank's updated shard, all-gathered into grads_
  // shard_replicas: the moments (m, then v) of the next rank's shard, from `replica_begin_`;
  // `incoming_` receives them each step and becomes `replica_` once the step is done.
  tensor::tensor replica_, incoming_, outgoing_;
  int64_t replica_begin_ = 0;
  // What undoes this rank's last ZeRO step (options.elastic): its moments and step count
  // before it; `committed`: params_ and grads_ (then the old parameters) were swapped.
  struct undo_record {
    bool armed = false, committed = false;
    int64_t steps = 0;
    std::vector<float> m, v;
  } undo_;
  std::unique_ptr<models::decoder_cpu_batch> model_;  // a whole model (no pipeline)
  std::unique_ptr<kernels::cpu::thread_pool> pool_;   // a pipeline stage's attention heads
  std::unique_ptr<pipeline_stage> pipeline_;
  std::unique_ptr<models::adamw_optimizer> optimizer_;
  std::unique_ptr<zero3_parameters> zero3_;  // ZeRO-3: params_ and grads_ are its buffers
};

}  // namespace troupe::actors

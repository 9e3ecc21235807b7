#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "kernels/cpu/thread_pool.hpp"
#include "models/decoder/decoder_cpu_stage.hpp"

namespace troupe::models {

/// Forward and backward of a whole-model batch on the CPU cores of one process: the sequences are
/// split over `threads` stage replicas that each run single-threaded kernels (no per-op
/// synchronisation), and their gradients are summed in replica order, so the result does not
/// depend on timing. Used by the trainer on one worker.
class decoder_cpu_batch {
 public:
  /// `checkpoint_segment`: each replica's activation checkpointing (decoder_cpu_stage).
  decoder_cpu_batch(const decoder_layout& layout, int max_batch, int threads,
                    int checkpoint_segment = 0);

  /// Called on the caller's thread as soon as `grads` over a range is final, in the order of
  /// decoder_layout::backward_buckets(), while the backward pass goes on with the layers below.
  using gradients_ready = std::function<void(param_range)>;

  /// Adds d(loss)/d(params) to `grads`, where each token's loss is weighted by `loss_scale`
  /// (1 / tokens of the global batch for a mean). tokens and targets are [batch, seq].
  /// `ready`, when given, hears of each finished gradient bucket (to start its all-reduce).
  loss_sum run(const float* params, float* grads, int batch, int seq, const int32_t* tokens,
               const int32_t* targets, float loss_scale, const gradients_ready& ready = nullptr);

  /// A per-token objective of each token's loss (-log p of its target) and entropy, such as the
  /// RL policy loss: called once per slice of the batch, on the slice's thread, with the
  /// slice's first token (an index into [batch * seq]), its token count, its tokens' losses and
  /// entropies (null unless `entropy`), and where to write d objective / d loss and / d entropy
  /// for those tokens. Slices run in parallel: it must touch only its own tokens' entries.
  struct token_objective {
    float temperature = 1.0f;  ///< the loss and entropy are of softmax(logits / temperature)
    bool entropy = false;      ///< whether the objective reads entropies (and writes dentropy)
    std::function<void(int64_t first, int64_t count, const float* token_losses,
                       const float* entropies, float* dloss, float* dentropy)>
        seed;
    /// A slice holds whole groups of this many consecutive rows (a DPO pair's two sequences: 2),
    /// as value_objective's; the batch is whole groups.
    int rows_together = 1;
  };
  /// run() for a per-token objective instead of a mean loss.
  loss_sum run(const float* params, float* grads, int batch, int seq, const int32_t* tokens,
               const int32_t* targets, const token_objective& objective,
               const gradients_ready& ready = nullptr);

  /// An objective of each position's value (a value-head layout: the RL critic's loss): called
  /// like token_objective's seed, with the slice's values and where to write d objective /
  /// d value.
  struct value_objective {
    std::function<void(int64_t first, int64_t count, const float* values, float* dvalues)> seed;
    /// A slice holds whole groups of this many consecutive rows, so that an objective of a group
    /// (a preference pair's two sequences: 2) sees all of it; the batch is whole groups.
    int rows_together = 1;
  };
  /// run() for an objective of the values; returns no loss (the objective keeps its own sums).
  void run(const float* params, float* grads, int batch, int seq, const int32_t* tokens,
           const value_objective& objective, const gradients_ready& ready = nullptr);

  /// The loss of a batch without gradients (evaluation), split over the replicas like run().
  loss_sum evaluate(const float* params, int batch, int seq, const int32_t* tokens,
                    const int32_t* targets);

  /// Each position's log p(target) under softmax(logits / temperature) into `out` [batch * seq]
  /// (0 where the target is -1), without gradients: the log-probs an RL step starts from.
  void log_probs(const float* params, int batch, int seq, const int32_t* tokens,
                 const int32_t* targets, float temperature, float* out);

  /// Each position's value into `out` [batch * seq], forward only (a value-head layout).
  void values(const float* params, int batch, int seq, const int32_t* tokens, float* out);

  [[nodiscard]] int threads() const { return static_cast<int>(replicas_.size()); }
  /// The activations every replica holds for backward at its largest batch, in bytes.
  [[nodiscard]] int64_t activation_bytes() const;

 private:
  const decoder_layout& layout_;
  std::vector<param_range> buckets_;
  std::unique_ptr<kernels::cpu::thread_pool> pool_;
  // How a replica's last stage seeds its backward: a mean loss, a per-token objective, or an
  // objective of the values.
  struct seeding {
    float loss_scale = 0;
    const token_objective* objective = nullptr;
    const value_objective* value = nullptr;
    [[nodiscard]] int rows_together() const {
      return value ? value->rows_together : objective ? objective->rows_together : 1;
    }
  };
  loss_sum run_seeded(const float* params, float* grads, int batch, int seq, const int32_t* tokens,
                      const int32_t* targets, const seeding& seed, const gradients_ready& ready);
  // Forwards replica r on its slice and seeds its backward head into `g`.
  loss_sum forward_and_seed(int r, const float* params, float* g, int first, int count, int seq,
                            const int32_t* tokens, const int32_t* targets, const seeding& seed);

  // Forward only, the batch split over the replicas; `done(r, first, count)` runs on replica r's
  // thread after its slice's forward.
  loss_sum forward_slices(const float* params, int batch, int seq, const int32_t* tokens,
                          const int32_t* targets, float temperature,
                          const std::function<void(int r, int first, int count)>& done);

  std::vector<std::unique_ptr<decoder_cpu_stage>> replicas_;
  std::vector<std::vector<float>> replica_grads_;
  // Each replica's per-token objective seeds: d loss, entropies, d entropy.
  struct objective_scratch {
    std::vector<float> dloss, entropies, dentropy;
  };
  std::vector<objective_scratch> scratch_;
};

}  // namespace troupe::models

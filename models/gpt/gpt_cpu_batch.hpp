#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "kernels/cpu/thread_pool.hpp"
#include "models/gpt/gpt_cpu_stage.hpp"

namespace troupe::models {

/// Forward and backward of a whole-model batch on the CPU cores of one process: the sequences are
/// split over `threads` stage replicas that each run single-threaded kernels (no per-op
/// synchronisation), and their gradients are summed in replica order, so the result does not
/// depend on timing. Used by the trainer on one worker.
class gpt_cpu_batch {
 public:
  gpt_cpu_batch(const gpt_layout& layout, int max_batch, int threads);

  /// Called on the caller's thread as soon as `grads` over a range is final, in the order of
  /// gpt_layout::backward_buckets(), while the backward pass goes on with the layers below.
  using gradients_ready = std::function<void(param_range)>;

  /// Adds d(loss)/d(params) to `grads`, where each token's loss is weighted by `loss_scale`
  /// (1 / tokens of the global batch for a mean). tokens and targets are [batch, seq].
  /// `ready`, when given, hears of each finished gradient bucket (to start its all-reduce).
  loss_sum run(const float* params, float* grads, int batch, int seq, const int32_t* tokens,
               const int32_t* targets, float loss_scale, const gradients_ready& ready = nullptr);

  /// The loss of a batch without gradients (evaluation), split over the replicas like run().
  loss_sum evaluate(const float* params, int batch, int seq, const int32_t* tokens,
                    const int32_t* targets);

  [[nodiscard]] int threads() const { return static_cast<int>(replicas_.size()); }

 private:
  const gpt_layout& layout_;
  std::vector<param_range> buckets_;
  std::unique_ptr<kernels::cpu::thread_pool> pool_;
  std::vector<std::unique_ptr<gpt_cpu_stage>> replicas_;
  std::vector<std::vector<float>> replica_grads_;
};

}  // namespace troupe::models

#pragma once

#include <cstdint>
#include <vector>

#include "kernels/adamw.hpp"
#include "models/decoder/decoder_layout.hpp"

namespace troupe::models {

/// Hyper-parameters that stay fixed over a run (the learning rate comes with each step).
struct adamw_options {
  float beta1 = 0.9f;
  float beta2 = 0.95f;
  float eps = 1e-8f;
  float weight_decay = 0.1f;
};

/// AdamW over the parameter range [begin, end) of a flat buffer: the whole model, or one
/// ZeRO shard of it; or over several ranges (a ZeRO-3 rank's chunk of each unit). Weight decay
/// applies to the slots the layout marks (matrices and embeddings). Owns the fp32 moments.
class adamw_optimizer {
 public:
  adamw_optimizer(const decoder_layout& layout, int64_t begin, int64_t end, adamw_options options);
  /// Over `ranges`, in buffer order, not overlapping; the moments are theirs one after another.
  adamw_optimizer(const decoder_layout& layout, std::vector<param_range> ranges,
                  adamw_options options);

  /// Updates params over the ranges from grads over the same, each gradient scaled by
  /// grad_scale.
  void step(float* params, const float* grads, float lr, float grad_scale);

  [[nodiscard]] int64_t steps() const { return steps_; }
  /// The first range's begin and the last one's end.
  [[nodiscard]] int64_t begin() const { return ranges_.empty() ? 0 : ranges_.front().begin; }
  [[nodiscard]] int64_t end() const { return ranges_.empty() ? 0 : ranges_.back().end; }
  [[nodiscard]] const std::vector<param_range>& ranges() const { return ranges_; }
  /// The moments, as many as the ranges hold each: checkpoints save and restore them with steps.
  [[nodiscard]] std::vector<float>& first_moment() { return m_; }
  [[nodiscard]] std::vector<float>& second_moment() { return v_; }
  void set_steps(int64_t steps) { steps_ = steps; }

 private:
  struct run {
    int64_t begin, end;
    int64_t moment;  // where its moments start
    bool decay;
  };
  adamw_options options_;
  std::vector<param_range> ranges_;
  std::vector<run> runs_;  // the ranges cut where the decay flag changes
  std::vector<float> m_, v_;
  int64_t steps_ = 0;
};

}  // namespace troupe::models

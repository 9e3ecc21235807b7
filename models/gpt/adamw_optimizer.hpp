#pragma once

#include <cstdint>
#include <vector>

#include "kernels/adamw.hpp"
#include "models/gpt/gpt_layout.hpp"

namespace troupe::models {

/// Hyper-parameters that stay fixed over a run (the learning rate comes with each step).
struct adamw_options {
  float beta1 = 0.9f;
  float beta2 = 0.95f;
  float eps = 1e-8f;
  float weight_decay = 0.1f;
};

/// AdamW over the parameter range [begin, end) of a flat buffer: the whole model, or one
/// ZeRO shard of it. Weight decay applies to the slots the layout marks (matrices and
/// embeddings). Owns the fp32 moments.
class adamw_optimizer {
 public:
  adamw_optimizer(const gpt_layout& layout, int64_t begin, int64_t end, adamw_options options);

  /// Updates params[begin, end) from grads[begin, end), each gradient scaled by grad_scale.
  void step(float* params, const float* grads, float lr, float grad_scale);

  [[nodiscard]] int64_t steps() const { return steps_; }
  [[nodiscard]] int64_t begin() const { return begin_; }
  [[nodiscard]] int64_t end() const { return end_; }
  /// The moments, [end - begin] each: checkpoints save and restore them with steps.
  [[nodiscard]] std::vector<float>& first_moment() { return m_; }
  [[nodiscard]] std::vector<float>& second_moment() { return v_; }
  void set_steps(int64_t steps) { steps_ = steps; }

 private:
  struct run {
    int64_t begin, end;
    bool decay;
  };
  adamw_options options_;
  int64_t begin_, end_;
  std::vector<run> runs_;  // [begin, end) cut where the decay flag changes
  std::vector<float> m_, v_;
  int64_t steps_ = 0;
};

}  // namespace troupe::models

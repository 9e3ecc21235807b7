#pragma once

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/adamw.hpp"
#include "models/gpt/gpt_cpu_stage.hpp"
#include "models/gpt/gpt_layout.hpp"
#include "runtime/tensor/tensor.hpp"

namespace troupe::models {

/// A whole GPT on one CUDA device in mixed precision: fp32 master weights and gradients, a bf16
/// copy of the weights that the forward reads, bf16 activations, fp32 accumulation in every GEMM
/// and reduction. The classifier is fused (loss and logit gradient in one pass), so forward and
/// backward run as one training step.
class gpt_cuda_model {
 public:
  /// Weights initialised as gpt_layout::initialize(seed), room for batches of max_batch x ctx.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<gpt_cuda_model>> create(
      const gpt_layout& layout, int max_batch, int device, uint64_t seed);

  /// Forward and backward of one batch (tokens and targets [batch, seq] on the device):
  /// gradients are added to grads(), each token's loss weighted by loss_scale. Returns the
  /// summed loss (waits for the device).
  [[nodiscard]] absl::StatusOr<loss_sum> train_step(const tensor::tensor& tokens,
                                                    const tensor::tensor& targets, int batch,
                                                    int seq, float loss_scale);
  /// One AdamW update of every parameter from grads(), which it then zeroes.
  [[nodiscard]] absl::Status optimizer_step(const kernels::adamw_params& p, float weight_decay);

  [[nodiscard]] const tensor::tensor& master() const { return master_; }
  [[nodiscard]] const tensor::tensor& grads() const { return grads_; }

 private:
  struct block_activations {
    tensor::tensor ln1, ln1_mean, ln1_rstd, qkv, atty, lse, mid, ln2, ln2_mean, ln2_rstd, fc,
        fc_gelu;
  };
  gpt_cuda_model(const gpt_layout& layout, int device) : layout_(layout), device_(device) {}
  absl::Status allocate(int max_batch);
  absl::Status block_forward(int layer, int batch, int seq, const tensor::bf16* in,
                             tensor::bf16* out);
  absl::Status block_backward(int layer, int batch, int seq, const tensor::bf16* in);

  const gpt_layout& layout_;
  int device_;
  tensor::tensor master_, weights_, grads_, m_, v_;  // flat, laid out by layout_
  std::vector<tensor::tensor> x_;
  std::vector<block_activations> blocks_;
  tensor::tensor positions_, lnf_, lnf_mean_, lnf_rstd_, logits_, losses_;
  tensor::tensor dx_, dtmp_, dqkv_, dfc_;
  int64_t steps_ = 0;
};

}  // namespace troupe::models

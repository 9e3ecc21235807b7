#pragma once

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/adamw.hpp"
#include "models/decoder/decoder_cpu_stage.hpp"
#include "models/decoder/decoder_layout.hpp"
#include "runtime/tensor/tensor.hpp"

namespace troupe::models {

/// A whole decoder of either family (GPT-2; Llama, Mistral, Qwen 2 and 3) on one CUDA device in
/// mixed precision: fp32 master weights and gradients, a bf16 copy of the weights that the
/// forward reads, bf16 activations, fp32 accumulation in every GEMM and reduction. The classifier
/// is fused (loss and logit gradient in one pass), so forward and backward run as one training
/// step. The blocks compute what decoder_cpu_stage's do (decoder_cuda_model_llama.cpp for the
/// Llama family's).
class decoder_cuda_model {
 public:
  /// Weights initialised as decoder_layout::initialize(seed), room for batches of max_batch x ctx.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<decoder_cuda_model>> create(
      const decoder_layout& layout, int max_batch, int device, uint64_t seed);

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
  // What a block's backward reads. GPT-2: fc [N, 4C] and fc_gelu; the Llama family: fc holds
  // [gate | up] rows [N, 2F], fc_gelu silu(gate) up [N, F], qkv rows [q | k | v] as attention
  // reads them (normed and turned), and with Qwen 3's q/k norms qk_raw (qkv before them) and
  // qk_rstd (the query heads', then the key heads').
  struct block_activations {
    tensor::tensor ln1, ln1_mean, ln1_rstd, qkv, atty, lse, mid, ln2, ln2_mean, ln2_rstd, fc,
        fc_gelu, qk_raw, qk_rstd;
  };
  decoder_cuda_model(const decoder_layout& layout, int device) : layout_(layout), device_(device) {}
  absl::Status allocate(int max_batch);
  absl::Status block_forward(int layer, int batch, int seq, const tensor::bf16* in,
                             tensor::bf16* out);
  absl::Status block_backward(int layer, int batch, int seq, const tensor::bf16* in);
  absl::Status llama_block_forward(int layer, int batch, int seq, const tensor::bf16* in,
                                   tensor::bf16* out);
  absl::Status llama_block_backward(int layer, int batch, int seq, const tensor::bf16* in);
  // The final norm, forward and (into dx_, from d(its output) in dtmp_) backward.
  absl::Status final_norm_forward(int rows);
  absl::Status final_norm_backward(int rows);

  const decoder_layout& layout_;
  int device_;
  tensor::tensor master_, weights_, grads_, m_, v_;  // flat, laid out by layout_
  std::vector<tensor::tensor> x_;
  std::vector<block_activations> blocks_;
  tensor::tensor positions_, lnf_, lnf_mean_, lnf_rstd_, logits_, losses_;
  tensor::tensor inv_freq_, rope_cos_, rope_sin_;  // the Llama family's RoPE, angles per batch
  tensor::tensor dx_, dtmp_, dqkv_, dfc_, dqk_;
  int64_t steps_ = 0;
};

}  // namespace troupe::models

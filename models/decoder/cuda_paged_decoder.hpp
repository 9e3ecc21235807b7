#pragma once

#include "models/decoder/paged_decoder.hpp"

namespace troupe::models {

/// The decoder on a CUDA device in mixed precision (the serving engine's GPU path), for GPT-2 and
/// the Llama family (RMSNorm, RoPE, grouped-query attention, SwiGLU, Qwen's biases and q/k
/// norms): bf16 weights and KV cache pools on the device, fp32 accumulation in every GEMM and
/// reduction, the attention reading each sequence's keys and values through its block table in
/// place (kernels::cuda::paged_attention). Logits come back to the host in f32. With
/// `options`' weight quantization or quantized weights, the block weights (and a quantized head)
/// are multiplied as integers (cuda_quantized_weights, kernels::cuda::quantized_matmul); the KV
/// cache stays bf16. UNAVAILABLE in a build without CUDA, or when `device` does not exist;
/// INVALID_ARGUMENT for heads it does not take (cuda_decoder_runs) and for an int8 KV cache.
[[nodiscard]] absl::StatusOr<std::unique_ptr<paged_decoder>> make_cuda_paged_decoder(
    const decoder_layout& layout, const float* params, int max_tokens, int cache_blocks,
    int block_size, int device, const decoder_options& options = {});

}  // namespace troupe::models

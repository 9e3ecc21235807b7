#pragma once

#include <memory>
#include <span>
#include <vector>

#include "kernels/cpu/thread_pool.hpp"
#include "models/decoder/paged_decoder.hpp"
#include "models/decoder/paged_kv_cache.hpp"
#include "models/decoder/quantized_weights.hpp"

namespace troupe::models {

/// Splits `requests` into `groups` contiguous runs of about equal work, one per thread of the CPU
/// decoder: returns the bounds, 0 first and requests.size() last (a run may be empty). A
/// request's work is its tokens through every block's GEMMs, its last row through the head and,
/// per block, its attention over its keys, so that a run of single decode tokens, which bring a
/// head row and an attention each, is not split as if it were a prefill chunk of as many tokens.
[[nodiscard]] std::vector<size_t> decode_group_bounds(std::span<const decode_request> requests,
                                                      const decoder_config& config, int groups);

/// The decoder on the CPU in f32, over a host KV cache, for either family (GPT-2 or Llama). A batch
/// is split into as many groups of whole requests as `pool` has threads (decode_group_bounds), each
/// run through the model on its own thread (the requests own distinct cache blocks). The kernels
/// are batch-invariant, so a request's logits are the same bits however the batch is split, and the
/// same as the training forward's.
class cpu_paged_decoder final : public paged_decoder {
 public:
  /// A whole model (`layout` covers every layer) with weights `params`, which must outlive it, as
  /// must `pool` (nullptr: the calling thread alone).
  /// `kv_dtype` int8 keeps the cache in int8 (a quarter of the memory, plus a scale per position
  /// and key/value head) and dequantizes a request's keys and values as it attends.
  cpu_paged_decoder(const decoder_layout& layout, const float* params, int max_tokens,
                    int cache_blocks, int block_size, kernels::cpu::thread_pool* pool = nullptr,
                    kv_cache_dtype kv_dtype = kv_cache_dtype::f32);

  using paged_decoder::forward;
  [[nodiscard]] absl::Status forward(std::span<const decode_request> requests, float* logits,
                                     float* hidden) override;
  /// Re-quantizes them first when the decoder runs quantized.
  [[nodiscard]] absl::Status set_weights(const float* params) override;

  /// From the next forward on, multiplies by every block's linear weights quantized to `q`
  /// (quantized_weights; the rest stays f32), quantizing anew at each set_weights. f32 again
  /// when `q` is not enabled. INVALID_ARGUMENT when a layer's shape cannot be quantized so.
  [[nodiscard]] absl::Status quantize(weight_quantization q);
  /// From the next forward on, multiplies by `weights`, already quantized (a GPTQ checkpoint's,
  /// or quantized at load; laid out as this decoder's model). They replace the f32 block
  /// weights, which set_weights then cannot bring back: FAILED_PRECONDITION.
  void use_quantized(std::shared_ptr<const quantized_weights> weights);

  [[nodiscard]] const paged_kv_cache& cache() const { return cache_; }

 private:
  // One thread's working memory, room for every token of a batch.
  struct scratch {
    std::vector<float> x, ln, qkv, atty, tmp, fc, last;
    std::vector<float> rope_cos, rope_sin;    // the tokens' RoPE angles, shared by every layer
    std::vector<const float*> k, v;           // where a request's keys and values are in the cache
    std::vector<float> keys_f32, values_f32;  // an int8 cache's rows of a request, dequantized
    std::vector<int32_t> tokens, positions;
    // The pool a lone group's products split their columns over (its rows cannot be split
    // between groups); null when the groups already keep the pool busy.
    kernels::cpu::thread_pool* columns_pool = nullptr;
  };
  // Requests [first, first + count) through the model on the calling thread, with `s`.
  void forward_group(std::span<const decode_request> requests, float* logits, float* hidden,
                     scratch& s);
  // One block of each family over the group's N new tokens in s.x, the chosen one per layer;
  // which family is fixed at construction.
  using block_fn = void (cpu_paged_decoder::*)(std::span<const decode_request>, int layer, int N,
                                               scratch& s);
  void gpt2_block(std::span<const decode_request> requests, int layer, int N, scratch& s);
  void llama_block(std::span<const decode_request> requests, int layer, int N, scratch& s);
  // The new tokens' attention over their caches, q [N, q_width] (row stride q_stride), their
  // keys and values appended first (row strides kv_stride); into s.atty [N, q_width].
  void attend(std::span<const decode_request> requests, int layer, const float* q, int64_t q_stride,
              const float* k, const float* v, int64_t kv_stride, scratch& s);
  // out[N, outputs] = x[N, inputs] @ the weight at `weight` (+ bias): its quantized copy when
  // there is one, else the f32 one, stored [outputs, inputs] when `out_in` (the Llama family's)
  // and [inputs, outputs] otherwise (GPT-2's Conv1D).
  void linear(float* out, const float* x, int64_t weight, const float* bias, int N, int outputs,
              int inputs, bool out_in, kernels::cpu::thread_pool* pool) const;

  const decoder_layout& layout_;
  const float* params_;
  weight_quantization quantization_;
  std::shared_ptr<const quantized_weights> quantized_;  // null: f32
  bool prequantized_ = false;                           // quantized_ came quantized (use_quantized)
  block_fn block_;
  std::vector<float> inv_freq_;  // RoPE's (the Llama family)
  int max_tokens_;
  paged_kv_cache cache_;
  kernels::cpu::thread_pool* pool_;
  std::vector<scratch> scratch_;  // one per thread of the pool
};

}  // namespace troupe::models

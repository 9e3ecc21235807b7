#pragma once

#include <cstdint>
#include <memory>
#include <span>

#include "absl/status/statusor.h"
#include "kernels/cpu/thread_pool.hpp"
#include "models/decoder/decoder_layout.hpp"
#include "models/decoder/paged_kv_cache.hpp"
#include "models/decoder/quantized_weights.hpp"

namespace troupe::models {

/// New tokens of one sequence in a decode batch: positions [first_position, first_position +
/// count) of a sequence whose cache blocks are block_table[0, table_size).
struct decode_request {
  const int32_t* tokens = nullptr;
  int count = 0;
  int first_position = 0;
  const int32_t* block_table = nullptr;
  int table_size = 0;
  /// Logit rows wanted: after each of the last `logit_rows` new tokens (more than one when
  /// speculative decoding checks draft tokens).
  int logit_rows = 1;
  /// Those rows as the final norm's output (an embedding's hidden states, [logit_rows, dim])
  /// instead of logits.
  bool hidden = false;
};

/// The logit rows a batch produces: the sum of its logit-wanting requests' logit_rows.
[[nodiscard]] int logit_rows(std::span<const decode_request> requests);
/// The hidden-state rows it produces: the sum of its `hidden` requests' logit_rows.
[[nodiscard]] int hidden_rows(std::span<const decode_request> requests);

/// Incremental decoding of a whole GPT over its own paged KV cache (per layer, a key pool and a
/// value pool of `cache_blocks` blocks of `block_size` positions; which blocks a sequence owns
/// is its caller's choice, passed as a block table): prefill chunks and single decode tokens of
/// many sequences run as one batch through the GEMMs, each sequence attending to its own cache.
class paged_decoder {
 public:
  virtual ~paged_decoder() = default;

  /// Appends the new tokens' keys and values to the cache and writes the logits after each
  /// request's last `logit_rows` new tokens to `logits` [logit_rows(requests), vocab] (host
  /// memory), request after request; a `hidden` request's rows go to `hidden`
  /// [hidden_rows(requests), dim] instead. Requests that overrun the context, their block table
  /// or the cache are INVALID_ARGUMENT, before anything is written.
  [[nodiscard]] virtual absl::Status forward(std::span<const decode_request> requests,
                                             float* logits, float* hidden) = 0;
  /// A batch without `hidden` requests.
  [[nodiscard]] absl::Status forward(std::span<const decode_request> requests, float* logits) {
    return forward(requests, logits, nullptr);
  }

  /// Runs on `params` (host f32, laid out like the old ones) from the next forward on: the CPU
  /// decoder reads them in place (they must outlive it), the CUDA one copies them to its device.
  /// The cache's keys and values stay those of the old weights: swap between generations.
  [[nodiscard]] virtual absl::Status set_weights(const float* params) = 0;
};

/// The decoders' shared precondition: every request inside the context and the vocabulary, its
/// table long enough and inside the cache, and at most `max_tokens` new tokens in all.
[[nodiscard]] absl::Status validate_decode_batch(const decoder_config& config, int cache_blocks,
                                                 int block_size, int max_tokens,
                                                 std::span<const decode_request> requests);

/// Whether the CUDA decoder runs a model of this shape (both families; heads of a multiple of
/// 32 values, at most 256): INVALID_ARGUMENT naming the head size and what to do, else OK.
/// Known without a device, so that `device: auto` can fall back on the CPU.
[[nodiscard]] absl::Status cuda_decoder_runs(const decoder_config& config);

/// How a decoder holds its block weights and its cache, beyond f32.
struct decoder_options {
  /// Quantizes the f32 block weights (cpu_paged_decoder::quantize) ...
  weight_quantization quantization;
  /// ... or runs block weights already quantized (a GPTQ checkpoint's, or quantized at load:
  /// cpu_paged_decoder::use_quantized); not both.
  std::shared_ptr<const quantized_weights> prequantized;
  kv_cache_dtype kv_dtype = kv_cache_dtype::f32;
};

/// A decoder of up to `max_tokens` new tokens per call for `layout` (a whole model) with weights
/// `params` (host f32, laid out by `layout`): on the CPU when `device` < 0, reading `params` in
/// place (they must outlive it), its batches split over `pool`'s threads (nullptr: the caller's
/// alone; it must outlive the decoder); else on CUDA device `device`, with a bf16 copy of them.
/// UNAVAILABLE when this build has no CUDA or the device does not exist. `options` are the CPU
/// decoder's only for now (the CUDA decoder refuses them: INVALID_ARGUMENT).
[[nodiscard]] absl::StatusOr<std::unique_ptr<paged_decoder>> make_paged_decoder(
    const decoder_layout& layout, const float* params, int max_tokens, int cache_blocks,
    int block_size, int device, kernels::cpu::thread_pool* pool = nullptr,
    const decoder_options& options = {});

}  // namespace troupe::models

#include "models/decoder/paged_decoder.hpp"

#include "absl/strings/str_cat.h"
#include "models/decoder/cpu_paged_decoder.hpp"
#include "models/decoder/cuda_paged_decoder.hpp"
#include "runtime/base/status.hpp"

namespace troupe::models {

int logit_rows(std::span<const decode_request> requests) {
  int rows = 0;
  for (const auto& r : requests)
    rows += r.hidden ? 0 : r.logit_rows;
  return rows;
}

int hidden_rows(std::span<const decode_request> requests) {
  int rows = 0;
  for (const auto& r : requests)
    rows += r.hidden ? r.logit_rows : 0;
  return rows;
}

absl::Status validate_decode_batch(const decoder_config& c, int cache_blocks, int block_size,
                                   int max_tokens, std::span<const decode_request> requests) {
  int total = 0;
  for (size_t i = 0; i < requests.size(); ++i) {
    const decode_request& r = requests[i];
    const int end = r.first_position + r.count;
    const int needed = (end + block_size - 1) / block_size;
    if (r.count < 1 || r.first_position < 0 || end > c.ctx) {
      return absl::InvalidArgumentError(
          absl::StrCat("decode request ", i, ": positions [", r.first_position, ", ", end,
                       ") must be non-empty and inside the model's context of ", c.ctx));
    }
    if (r.logit_rows < 1 || r.logit_rows > r.count) {
      return absl::InvalidArgumentError(absl::StrCat("decode request ", i, ": logit_rows is ",
                                                     r.logit_rows, "; it must be in [1, ", r.count,
                                                     "], its new tokens"));
    }
    if (r.table_size < needed) {
      return absl::InvalidArgumentError(
          absl::StrCat("decode request ", i, ": ", end, " positions need ", needed,
                       " cache blocks but its table has ", r.table_size));
    }
    for (int b = 0; b < needed; ++b) {
      if (r.block_table[b] < 0 || r.block_table[b] >= cache_blocks) {
        return absl::InvalidArgumentError(absl::StrCat("decode request ", i, ": block ",
                                                       r.block_table[b], " is outside the cache's ",
                                                       cache_blocks, " blocks"));
      }
    }
    for (int t = 0; t < r.count; ++t) {
      if (r.tokens[t] < 0 || r.tokens[t] >= c.vocab) {
        return absl::InvalidArgumentError(absl::StrCat("decode request ", i, ": token ",
                                                       r.tokens[t],
                                                       " is outside the vocabulary of ", c.vocab));
      }
    }
    total += r.count;
  }
  if (total > max_tokens) {
    return absl::InvalidArgumentError(
        absl::StrCat("decode batch of ", total, " tokens exceeds the decoder's ", max_tokens));
  }
  return absl::OkStatus();
}

absl::Status cuda_decoder_runs(const decoder_config& config) {
  const int head = config.head_size();
  if (head % 32 != 0 || head > 256) {
    return absl::InvalidArgumentError(
        absl::StrCat("the CUDA decoder's attention takes heads of a multiple of 32 values, at most "
                     "256; this model's head size is ",
                     head, " (dim ", config.dim, " / heads ", config.heads,
                     "): serve it with device: cpu, or choose heads so that the size fits"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<paged_decoder>> make_paged_decoder(
    const decoder_layout& layout, const float* params, int max_tokens, int cache_blocks,
    int block_size, int device, kernels::cpu::thread_pool* pool, const decoder_options& options) {
  const weight_quantization& quantization = options.quantization;
  if (quantization.enabled() && options.prequantized != nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("the model is already quantized (its checkpoint's integer weights): leave "
                     "serve.engine.quantization none rather than ",
                     quantization.describe()));
  }
  if (device < 0) {
    auto decoder = std::make_unique<cpu_paged_decoder>(layout, params, max_tokens, cache_blocks,
                                                       block_size, pool, options.kv_dtype);
    TROUPE_RETURN_IF_ERROR(decoder->quantize(quantization));
    if (options.prequantized != nullptr) {
      decoder->use_quantized(options.prequantized);
    }
    return decoder;
  }
  return make_cuda_paged_decoder(layout, params, max_tokens, cache_blocks, block_size, device,
                                 options);
}

}  // namespace troupe::models

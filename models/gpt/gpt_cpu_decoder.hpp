#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "models/gpt/gpt_kv_cache.hpp"
#include "models/gpt/gpt_layout.hpp"

namespace troupe::models {

/// New tokens of one sequence in a decode batch: positions [first_position, first_position +
/// count) of a sequence whose cache blocks are block_table[0, table_size).
struct decode_request {
  const int32_t* tokens = nullptr;
  int count = 0;
  int first_position = 0;
  const int32_t* block_table = nullptr;
  int table_size = 0;
};

/// Incremental decoding on the CPU: prefill chunks and single decode tokens of many sequences
/// run as one batch through the GEMMs; each sequence attends to its own paged KV cache.
class gpt_cpu_decoder {
 public:
  /// A whole model (`layout` covers every layer); up to `max_tokens` new tokens per call.
  gpt_cpu_decoder(const gpt_layout& layout, int max_tokens);

  /// Appends the new tokens' keys and values to `cache` and writes the logits after each
  /// request's last new token to logits [requests, vocab]. Requests that overrun the context,
  /// their block table or the cache are INVALID_ARGUMENT, before anything is written.
  [[nodiscard]] absl::Status forward(const float* params, gpt_kv_cache& cache,
                                     std::span<const decode_request> requests, float* logits);

 private:
  absl::Status validate(const gpt_kv_cache& cache, std::span<const decode_request> requests) const;

  const gpt_layout& layout_;
  int max_tokens_;
  std::vector<float> x_, ln_, qkv_, atty_, tmp_, fc_, k_, v_, last_;
  std::vector<int32_t> tokens_, positions_;
};

}  // namespace troupe::models

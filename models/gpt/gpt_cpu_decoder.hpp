#pragma once

#include <vector>

#include "models/gpt/gpt_decoder.hpp"
#include "models/gpt/gpt_kv_cache.hpp"

namespace troupe::models {

/// The GPT decoder on the CPU in f32, over a host KV cache.
class gpt_cpu_decoder final : public gpt_decoder {
 public:
  /// A whole model (`layout` covers every layer) with weights `params`, which must outlive it.
  gpt_cpu_decoder(const gpt_layout& layout, const float* params, int max_tokens, int cache_blocks,
                  int block_size);

  [[nodiscard]] absl::Status forward(std::span<const decode_request> requests,
                                     float* logits) override;
  [[nodiscard]] absl::Status set_weights(const float* params) override {
    params_ = params;
    return absl::OkStatus();
  }

  [[nodiscard]] const gpt_kv_cache& cache() const { return cache_; }

 private:
  const gpt_layout& layout_;
  const float* params_;
  int max_tokens_;
  gpt_kv_cache cache_;
  std::vector<float> x_, ln_, qkv_, atty_, tmp_, fc_, k_, v_, last_;
  std::vector<int32_t> tokens_, positions_;
};

}  // namespace troupe::models

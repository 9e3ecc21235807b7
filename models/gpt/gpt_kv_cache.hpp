#pragma once

#include <vector>

#include "kernels/kv_cache.hpp"
#include "models/gpt/gpt_config.hpp"

namespace troupe::models {

/// The paged KV cache of a whole model on the host: for every layer a key pool and a value pool
/// of `blocks` blocks of `block_size` positions of kv_width() floats (its key/value heads). Which
/// blocks a sequence owns is decided by its caller (the serving scheduler) and passed as a block
/// table.
class gpt_kv_cache {
 public:
  gpt_kv_cache(const gpt_config& config, int blocks, int block_size);

  [[nodiscard]] int blocks() const { return blocks_; }
  [[nodiscard]] const kernels::kv_layout& layout() const { return layout_; }
  [[nodiscard]] float* keys(int layer) { return pools_[2 * layer].data(); }
  [[nodiscard]] float* values(int layer) { return pools_[2 * layer + 1].data(); }
  [[nodiscard]] const float* keys(int layer) const { return pools_[2 * layer].data(); }

 private:
  int blocks_;
  kernels::kv_layout layout_;
  std::vector<std::vector<float>> pools_;
};

}  // namespace troupe::models

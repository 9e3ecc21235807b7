#pragma once

#include <cstdint>
#include <vector>

#include "kernels/kv_cache.hpp"
#include "models/decoder/decoder_config.hpp"

namespace troupe::models {

/// What a KV cache holds per value (`serve.engine.kv_cache_dtype`).
enum class kv_cache_dtype {
  f32,
  int8,  ///< int8 with an f32 scale per position and key/value head (kernels::cpu::kv_append_int8)
};

/// The paged KV cache of a whole model on the host: for every layer a key pool and a value pool
/// of `blocks` blocks of `block_size` positions of kv_width() values (its key/value heads), in
/// f32 or int8. Which blocks a sequence owns is decided by its caller (the serving scheduler)
/// and passed as a block table.
class paged_kv_cache {
 public:
  paged_kv_cache(const decoder_config& config, int blocks, int block_size,
                 kv_cache_dtype dtype = kv_cache_dtype::f32);

  [[nodiscard]] int blocks() const { return blocks_; }
  [[nodiscard]] kv_cache_dtype dtype() const { return dtype_; }
  [[nodiscard]] int heads() const { return heads_; }
  [[nodiscard]] const kernels::kv_layout& layout() const { return layout_; }
  /// An f32 cache's pools.
  [[nodiscard]] float* keys(int layer) { return pools_[2 * layer].data(); }
  [[nodiscard]] float* values(int layer) { return pools_[2 * layer + 1].data(); }
  [[nodiscard]] const float* keys(int layer) const { return pools_[2 * layer].data(); }
  /// An int8 cache's pools (`value` false: the keys) and their scales.
  [[nodiscard]] int8_t* int8_pool(int layer, bool value) {
    return int8_pools_[2 * layer + value].data();
  }
  [[nodiscard]] float* scales(int layer, bool value) { return scales_[2 * layer + value].data(); }
  /// The memory it holds, in bytes.
  [[nodiscard]] int64_t bytes() const;

 private:
  int blocks_;
  kv_cache_dtype dtype_;
  int heads_;
  kernels::kv_layout layout_;
  std::vector<std::vector<float>> pools_;
  std::vector<std::vector<int8_t>> int8_pools_;
  std::vector<std::vector<float>> scales_;
};

}  // namespace troupe::models

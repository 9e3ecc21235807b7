#include "models/decoder/paged_kv_cache.hpp"

namespace troupe::models {

paged_kv_cache::paged_kv_cache(const decoder_config& config, int blocks, int block_size,
                               kv_cache_dtype dtype)
    : blocks_(blocks),
      dtype_(dtype),
      heads_(config.kv_head_count()),
      layout_{block_size, config.kv_width()} {
  const size_t positions = static_cast<size_t>(blocks) * block_size;
  if (dtype == kv_cache_dtype::f32) {
    pools_.assign(2 * config.layers, std::vector<float>(positions * config.kv_width()));
  } else {
    int8_pools_.assign(2 * config.layers, std::vector<int8_t>(positions * config.kv_width()));
    scales_.assign(2 * config.layers, std::vector<float>(positions * heads_));
  }
}

int64_t paged_kv_cache::bytes() const {
  int64_t total = 0;
  for (const auto& p : pools_)
    total += static_cast<int64_t>(p.size() * sizeof(float));
  for (const auto& p : int8_pools_)
    total += static_cast<int64_t>(p.size());
  for (const auto& p : scales_)
    total += static_cast<int64_t>(p.size() * sizeof(float));
  return total;
}

}  // namespace troupe::models

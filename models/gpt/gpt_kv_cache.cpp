#include "models/gpt/gpt_kv_cache.hpp"

namespace troupe::models {

gpt_kv_cache::gpt_kv_cache(const gpt_config& config, int blocks, int block_size)
    : blocks_(blocks), layout_{block_size, config.kv_width()} {
  pools_.assign(2 * config.layers,
                std::vector<float>(static_cast<size_t>(blocks) * block_size * config.kv_width()));
}

}  // namespace troupe::models

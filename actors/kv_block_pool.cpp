#include "actors/kv_block_pool.hpp"

#include <algorithm>
#include <functional>

namespace troupe::actors {

kv_block_pool::kv_block_pool(int blocks, int block_size) : total_(blocks), block_size_(block_size) {
  free_.reserve(blocks);
  for (int b = 0; b < blocks; ++b)
    free_.push_back(b);  // ascending: a min-heap already
}

bool kv_block_pool::reserve(std::vector<int32_t>& table, int positions) {
  const int needed = blocks_for(positions) - static_cast<int>(table.size());
  if (needed <= 0) return true;
  if (needed > free_blocks()) return false;
  for (int i = 0; i < needed; ++i) {
    std::pop_heap(free_.begin(), free_.end(), std::greater<>());
    table.push_back(free_.back());
    free_.pop_back();
  }
  return true;
}

void kv_block_pool::release(std::vector<int32_t>& table) {
  for (const int32_t b : table) {
    free_.push_back(b);
    std::push_heap(free_.begin(), free_.end(), std::greater<>());
  }
  table.clear();
}

}  // namespace troupe::actors

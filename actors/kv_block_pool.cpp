#include "actors/kv_block_pool.hpp"

namespace troupe::actors {

kv_block_pool::kv_block_pool(int blocks, int block_size) : total_(blocks), block_size_(block_size) {
  free_.reserve(blocks);
  for (int b = blocks - 1; b >= 0; --b)
    free_.push_back(b);  // block 0 goes out first
}

bool kv_block_pool::reserve(std::vector<int32_t>& table, int positions) {
  const int needed = blocks_for(positions) - static_cast<int>(table.size());
  if (needed <= 0) return true;
  if (needed > free_blocks()) return false;
  for (int i = 0; i < needed; ++i) {
    table.push_back(free_.back());
    free_.pop_back();
  }
  return true;
}

void kv_block_pool::release(std::vector<int32_t>& table) {
  for (auto b = table.rbegin(); b != table.rend(); ++b)
    free_.push_back(*b);
  table.clear();
}

}  // namespace troupe::actors

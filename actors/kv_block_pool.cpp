#include "actors/kv_block_pool.hpp"

#include <algorithm>
#include <functional>

#include "absl/hash/hash.h"
#include "absl/types/span.h"

namespace troupe::actors {

kv_block_pool::kv_block_pool(int blocks, int block_size)
    : total_(blocks), block_size_(block_size), blocks_(blocks) {
  free_.reserve(blocks);
  for (int b = 0; b < blocks; ++b)
    free_.push_back(b);  // ascending: a min-heap already
}

int32_t kv_block_pool::take() {
  if (!free_.empty()) {
    std::pop_heap(free_.begin(), free_.end(), std::greater<>());
    const int32_t b = free_.back();
    free_.pop_back();
    return b;
  }
  const int32_t b = evictable_.front();
  evictable_.pop_front();
  cached_.erase(blocks_[b].hash);
  blocks_[b].cached = false;
  return b;
}

bool kv_block_pool::reserve(std::vector<int32_t>& table, int positions) {
  const int needed = blocks_for(positions) - static_cast<int>(table.size());
  if (needed <= 0) return true;
  if (needed > free_blocks()) return false;
  for (int i = 0; i < needed; ++i) {
    const int32_t b = take();
    blocks_[b].refs = 1;
    table.push_back(b);
  }
  return true;
}

void kv_block_pool::release(std::vector<int32_t>& table) {
  for (const int32_t b : table) {
    block_state& s = blocks_[b];
    if (--s.refs > 0) continue;
    if (s.cached) {
      s.lru = evictable_.insert(evictable_.end(), b);
    } else {
      free_.push_back(b);
      std::push_heap(free_.begin(), free_.end(), std::greater<>());
    }
  }
  table.clear();
}

void kv_block_pool::extend_hashes(std::vector<uint64_t>& chain, std::span<const int32_t> tokens,
                                  int block_size, uint64_t salt) {
  if (chain.empty()) chain.push_back(salt);
  const size_t full = tokens.size() / block_size;
  for (size_t i = chain.size() - 1; i < full; ++i) {
    chain.push_back(
        absl::HashOf(chain[i], absl::MakeConstSpan(tokens.data() + i * block_size, block_size)));
  }
}

int kv_block_pool::share_cached(std::vector<int32_t>& table, std::span<const uint64_t> chain,
                                std::span<const int32_t> tokens, int max_blocks) {
  const int n = std::min(max_blocks, static_cast<int>(chain.size()) - 1);
  int shared = 0;
  for (; shared < n; ++shared) {
    const auto it = cached_.find(chain[shared + 1]);
    if (it == cached_.end()) break;
    const int32_t b = it->second;
    block_state& s = blocks_[b];
    const auto* want = tokens.data() + int64_t{shared} * block_size_;
    const auto* held = tokens_.data() + int64_t{b} * block_size_;
    if (s.parent != chain[shared] || !std::equal(want, want + block_size_, held)) {
      break;  // a hash collision: not this prefix
    }
    if (s.refs++ == 0) evictable_.erase(s.lru);
    table.push_back(b);
  }
  return shared;
}

void kv_block_pool::cache(std::span<const int32_t> table, std::span<const uint64_t> chain,
                          std::span<const int32_t> tokens, int first, int last) {
  if (tokens_.empty()) tokens_.resize(static_cast<size_t>(total_) * block_size_);
  for (int i = first; i < last; ++i) {
    const int32_t b = table[i];
    block_state& s = blocks_[b];
    if (s.cached || !cached_.try_emplace(chain[i + 1], b).second) continue;
    s.cached = true;
    s.hash = chain[i + 1];
    s.parent = chain[i];
    std::copy_n(tokens.data() + int64_t{i} * block_size_, block_size_,
                tokens_.data() + int64_t{b} * block_size_);
  }
}

void kv_block_pool::forget_cached() {
  for (const int32_t b : evictable_) {
    free_.push_back(b);
    std::push_heap(free_.begin(), free_.end(), std::greater<>());
  }
  evictable_.clear();
  for (auto& s : blocks_)
    s.cached = false;
  cached_.clear();
}

}  // namespace troupe::actors

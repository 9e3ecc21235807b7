#include "actors/prefix_affinity.hpp"

#include <vector>

#include "absl/hash/hash.h"
#include "absl/types/span.h"

namespace troupe::actors {
namespace {

// Each full block's hash, chained over the blocks before it.
std::vector<uint64_t> chain_of(std::span<const int32_t> prompt, int block_size) {
  std::vector<uint64_t> chain;
  uint64_t parent = 0;
  for (size_t at = 0; at + block_size <= prompt.size(); at += block_size) {
    parent = absl::HashOf(parent, absl::MakeConstSpan(prompt.data() + at, block_size));
    chain.push_back(parent);
  }
  return chain;
}

}  // namespace

int prefix_affinity::matched(const std::string& worker, std::span<const int32_t> prompt) const {
  const auto it = workers_.find(worker);
  if (it == workers_.end()) return 0;
  int blocks = 0;
  for (const uint64_t h : chain_of(prompt, block_size_)) {
    if (!it->second.where.contains(h)) break;
    ++blocks;
  }
  return blocks * block_size_;
}

void prefix_affinity::routed(const std::string& worker, std::span<const int32_t> prompt) {
  blocks_of& w = workers_[worker];
  // The last block first, so that a prefix's blocks are forgotten from its end, as the
  // workers' caches evict them (a block whose parent is forgotten would never match).
  const std::vector<uint64_t> chain = chain_of(prompt, block_size_);
  for (auto h = chain.rbegin(); h != chain.rend(); ++h) {
    if (auto it = w.where.find(*h); it != w.where.end()) w.lru.erase(it->second);
    w.where[*h] = w.lru.insert(w.lru.end(), *h);
  }
  while (static_cast<int>(w.lru.size()) > capacity_) {
    w.where.erase(w.lru.front());
    w.lru.pop_front();
  }
}

}  // namespace troupe::actors

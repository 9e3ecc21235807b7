#include "actors/prefix_affinity.hpp"

#include "actors/kv_block_pool.hpp"

namespace troupe::actors {

std::vector<uint64_t> prefix_affinity::chain_of(std::span<const int32_t> prompt) const {
  std::vector<uint64_t> chain;
  kv_block_pool::extend_hashes(chain, prompt, block_size_, 0);
  return chain;
}

int prefix_affinity::matched(const std::string& worker, std::span<const uint64_t> chain) const {
  const auto it = workers_.find(worker);
  if (it == workers_.end()) return 0;
  int blocks = 0;
  while (blocks + 1 < static_cast<int>(chain.size()) &&
         it->second.where.contains(chain[blocks + 1])) {
    ++blocks;
  }
  return blocks * block_size_;
}

void prefix_affinity::routed(const std::string& worker, std::span<const uint64_t> chain) {
  blocks_of& w = workers_[worker];
  // The last block first, so that a prefix's blocks are forgotten from its end, as the
  // workers' caches evict them (a block whose parent is forgotten would never match). chain[0]
  // is the salt, not a block.
  for (size_t i = chain.size(); i-- > 1;) {
    if (auto it = w.where.find(chain[i]); it != w.where.end()) w.lru.erase(it->second);
    w.where[chain[i]] = w.lru.insert(w.lru.end(), chain[i]);
  }
  while (static_cast<int>(w.lru.size()) > capacity_) {
    w.where.erase(w.lru.front());
    w.lru.pop_front();
  }
}

}  // namespace troupe::actors

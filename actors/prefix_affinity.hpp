#pragma once

#include <cstdint>
#include <list>
#include <span>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"

namespace troupe::actors {

/// Which worker probably holds a prompt's prefix in its KV cache, for cache-aware routing
/// (SGLang's router). Like SGLang's, it is an approximation kept from what was routed where,
/// never asked of the workers: per worker, the hash chains of the prompts sent to it by blocks
/// of `block_size` tokens (the workers' KV block size), at most `capacity` blocks a worker (the
/// workers' KV blocks), the least recently routed forgotten first.
class prefix_affinity {
 public:
  prefix_affinity(int block_size, int capacity) : block_size_(block_size), capacity_(capacity) {}

  /// A prompt's block hash chain (kv_block_pool::extend_hashes, salt 0): made once per request.
  [[nodiscard]] std::vector<uint64_t> chain_of(std::span<const int32_t> prompt) const;
  /// The tokens of the longest prefix of `chain`'s blocks that went to `worker`.
  [[nodiscard]] int matched(const std::string& worker, std::span<const uint64_t> chain) const;
  /// A prompt of hash chain `chain` went to `worker`: its blocks are the most recently used there.
  void routed(const std::string& worker, std::span<const uint64_t> chain);
  /// `worker` is gone.
  void forget(const std::string& worker) { workers_.erase(worker); }

 private:
  struct blocks_of {
    std::list<uint64_t> lru;  // most recently routed last
    absl::flat_hash_map<uint64_t, std::list<uint64_t>::iterator> where;
  };

  int block_size_;
  int capacity_;
  absl::flat_hash_map<std::string, blocks_of> workers_;
};

}  // namespace troupe::actors

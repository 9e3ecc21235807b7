#pragma once

#include <cstdint>
#include <list>
#include <span>
#include <vector>

#include "absl/container/flat_hash_map.h"

namespace troupe::actors {

/// The blocks of a paged KV cache (vLLM's block manager): `blocks` fixed-size blocks of
/// `block_size` positions, the lowest-numbered free block handed out first, so that an engine
/// that ran many batches lays a new one out in the cache as a fresh engine does (handed out
/// again in the order their sequences ended, they came back scattered, and iterations over 256
/// sequences ran about 3% slower). A sequence owns a block table, the blocks holding its
/// positions in order, which grows as the sequence does.
///
/// Automatic prefix caching (vLLM's): a full block is known by a hash chain over the tokens of
/// its sequence up to its end, rooted in a salt (the weights version), and kept when its
/// sequences end, so that a later sequence with the same prefix shares it instead of computing
/// it again. Blocks are reference-counted; one that no sequence holds but whose contents are
/// cached is evicted, least recently released first, only when no uncached block is free. A hit
/// is checked against the block's own tokens and its parent's hash, so that a hash collision
/// cannot hand out another prefix's keys and values.
class kv_block_pool {
 public:
  kv_block_pool(int blocks, int block_size);

  [[nodiscard]] int block_size() const { return block_size_; }
  [[nodiscard]] int total() const { return total_; }
  /// Blocks that no sequence holds (cached ones included: they can be evicted).
  [[nodiscard]] int free_blocks() const {
    return static_cast<int>(free_.size() + evictable_.size());
  }
  [[nodiscard]] int used_blocks() const { return total_ - free_blocks(); }
  /// Blocks whose contents are cached (held or evictable).
  [[nodiscard]] int cached_blocks() const { return static_cast<int>(cached_.size()); }
  /// Blocks needed to hold `positions` positions.
  [[nodiscard]] int blocks_for(int positions) const {
    return (positions + block_size_ - 1) / block_size_;
  }

  /// Grows `table` to hold `positions` positions, evicting cached blocks when no other is free.
  /// False, and `table` unchanged, when the free blocks are too few.
  [[nodiscard]] bool reserve(std::vector<int32_t>& table, int positions);
  /// Drops `table`'s hold on each of its blocks and empties it; a block no sequence holds is
  /// free again, its cached contents kept until it is evicted.
  void release(std::vector<int32_t>& table);

  /// The hash chain of `tokens`' full blocks: chain[0] is `salt` (the weights version), chain[i
  /// + 1] block i's hash, from chain[i] and the block's tokens. Appends the blocks past those
  /// already in `chain`, so that a growing sequence hashes each block once.
  static void extend_hashes(std::vector<uint64_t>& chain, std::span<const int32_t> tokens,
                            int block_size, uint64_t salt);
  /// Appends to the empty `table` the cached blocks of the longest prefix of `chain`'s blocks (at
  /// most `max_blocks`) whose tokens are `tokens`' and parents `chain`'s, and holds them.
  /// Returns how many.
  [[nodiscard]] int share_cached(std::vector<int32_t>& table, std::span<const uint64_t> chain,
                                 std::span<const int32_t> tokens, int max_blocks);
  /// Records that `table`'s blocks [first, last), now computed, hold blocks [first, last) of
  /// `tokens` (whose hash chain is `chain`). A block whose hash another block already holds
  /// stays uncached.
  void cache(std::span<const int32_t> table, std::span<const uint64_t> chain,
             std::span<const int32_t> tokens, int first, int last);
  /// Forgets every cached block (new weights: their keys and values are stale).
  void forget_cached();

 private:
  struct block_state {
    int refs = 0;
    bool cached = false;
    uint64_t hash = 0, parent = 0;     // its chain hash and its parent's (block 0's: the salt)
    std::list<int32_t>::iterator lru;  // in evictable_ while refs == 0 and cached
  };

  // Takes a free block: the lowest uncached one, else the least recently released cached one.
  int32_t take();
  void uncache(int32_t b);

  int total_;
  int block_size_;
  std::vector<int32_t> free_;     // uncached and unheld: a min-heap (the lowest goes out next)
  std::list<int32_t> evictable_;  // cached and unheld, least recently released first
  std::vector<block_state> blocks_;
  std::vector<int32_t> tokens_;                    // each cached block's tokens, block_size a block
  absl::flat_hash_map<uint64_t, int32_t> cached_;  // chain hash -> block
};

}  // namespace troupe::actors

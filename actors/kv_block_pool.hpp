#pragma once

#include <cstdint>
#include <vector>

namespace troupe::actors {

/// The blocks of a paged KV cache (vLLM's block manager): `blocks` fixed-size blocks of
/// `block_size` positions, handed out from a free list. A sequence owns a block table, the
/// blocks holding its positions in order, which grows as the sequence does.
class kv_block_pool {
 public:
  kv_block_pool(int blocks, int block_size);

  [[nodiscard]] int block_size() const { return block_size_; }
  [[nodiscard]] int total() const { return total_; }
  [[nodiscard]] int free_blocks() const { return static_cast<int>(free_.size()); }
  [[nodiscard]] int used_blocks() const { return total_ - free_blocks(); }
  /// Blocks needed to hold `positions` positions.
  [[nodiscard]] int blocks_for(int positions) const {
    return (positions + block_size_ - 1) / block_size_;
  }

  /// Grows `table` to hold `positions` positions. False, and `table` unchanged, when the free
  /// list is too short.
  [[nodiscard]] bool reserve(std::vector<int32_t>& table, int positions);
  /// Returns every block of `table` to the free list and empties it.
  void release(std::vector<int32_t>& table);

 private:
  int total_;
  int block_size_;
  std::vector<int32_t> free_;  // the next block handed out is at the back
};

}  // namespace troupe::actors

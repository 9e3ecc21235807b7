#include "kernels/kv_cache.hpp"

#include <algorithm>
#include <cstring>

namespace troupe::kernels::cpu {
namespace {
float* slot(float* cache, const int32_t* block_table, const kv_layout& l, int64_t position) {
  const int64_t block = block_table[position / l.block_size];
  return cache + (block * l.block_size + position % l.block_size) * l.width;
}
}  // namespace

void kv_append(float* cache, const int32_t* block_table, const kv_layout& l, int64_t first_position,
               const float* values, int64_t value_stride, int n) {
  for (int i = 0; i < n; ++i) {
    std::memcpy(slot(cache, block_table, l, first_position + i), values + i * value_stride,
                l.width * sizeof(float));
  }
}

void kv_gather(float* out, const float* cache, const int32_t* block_table, const kv_layout& l,
               int64_t n) {
  // A block's positions are contiguous in the cache: one copy per block.
  for (int64_t i = 0; i < n; i += l.block_size) {
    const int64_t rows = std::min<int64_t>(l.block_size, n - i);
    std::memcpy(out + i * l.width, slot(const_cast<float*>(cache), block_table, l, i),
                rows * l.width * sizeof(float));
  }
}

void kv_rows(const float** rows, const float* cache, const int32_t* block_table, const kv_layout& l,
             int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    rows[i] = slot(const_cast<float*>(cache), block_table, l, i);
}

}  // namespace troupe::kernels::cpu

#include "kernels/kv_cache.hpp"

#include <algorithm>
#include <cmath>
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

void kv_append_int8(int8_t* cache, float* scales, const int32_t* block_table, const kv_layout& l,
                    int heads, int64_t first_position, const float* values, int64_t value_stride,
                    int n) {
  const int head = l.width / heads;
  for (int i = 0; i < n; ++i) {
    const int64_t position = first_position + i;
    const int64_t row =
        int64_t{block_table[position / l.block_size]} * l.block_size + position % l.block_size;
    const float* v = values + i * value_stride;
    for (int h = 0; h < heads; ++h) {
      float largest = 0;
      for (int d = 0; d < head; ++d)
        largest = std::max(largest, std::fabs(v[h * head + d]));
      const float scale = largest / 127.0f;
      scales[row * heads + h] = scale;
      int8_t* out = cache + row * l.width + h * head;
      for (int d = 0; d < head; ++d) {
        out[d] = static_cast<int8_t>(scale > 0 ? std::nearbyint(v[h * head + d] / scale) : 0.0f);
      }
    }
  }
}

void kv_gather_int8(float* out, const int8_t* cache, const float* scales,
                    const int32_t* block_table, const kv_layout& l, int heads, int64_t n) {
  const int head = l.width / heads;
  for (int64_t position = 0; position < n; ++position) {
    const int64_t row =
        int64_t{block_table[position / l.block_size]} * l.block_size + position % l.block_size;
    const int8_t* in = cache + row * l.width;
    float* dst = out + position * l.width;
    for (int h = 0; h < heads; ++h) {
      const float scale = scales[row * heads + h];
      for (int d = 0; d < head; ++d)
        dst[h * head + d] = scale * static_cast<float>(in[h * head + d]);
    }
  }
}

}  // namespace troupe::kernels::cpu

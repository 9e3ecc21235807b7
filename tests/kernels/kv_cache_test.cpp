#include "kernels/kv_cache.hpp"

#include <cmath>

#include <gtest/gtest.h>

#include "tests/kernels/gradient_check.hpp"

namespace troupe::kernels {
namespace {

TEST(KvCache, AppendThenGatherThroughAScrambledBlockTable) {
  const kv_layout l{4, 6};
  const int blocks = 8, n = 13;  // 13 positions need 4 blocks
  std::vector<float> cache(blocks * l.block_size * l.width, -1.0f);
  std::vector<int32_t> table = {6, 1, 7, 3};
  auto values = testing::random_values(n * 2 * l.width, 1);  // rows of stride 2 * width
  cpu::kv_append(cache.data(), table.data(), l, 0, values.data(), 2 * l.width, 5);
  cpu::kv_append(cache.data(), table.data(), l, 5, values.data() + 5 * 2 * l.width, 2 * l.width,
                 n - 5);
  std::vector<float> out(n * l.width);
  cpu::kv_gather(out.data(), cache.data(), table.data(), l, n);
  for (int i = 0; i < n; ++i) {
    for (int c = 0; c < l.width; ++c)
      EXPECT_EQ(out[i * l.width + c], values[i * 2 * l.width + c]);
  }
  // Position 0 lives in physical block 6; blocks outside the table stay untouched.
  EXPECT_EQ(cache[6 * l.block_size * l.width], values[0]);
  EXPECT_EQ(cache[0], -1.0f);
  EXPECT_EQ(cache[5 * l.block_size * l.width], -1.0f);
}

// The int8 pool: each head of each position within half its scale of the value written, its
// scale the head's largest magnitude over 127, through a scrambled table, in two appends.
TEST(KvCache, Int8RowsComeBackWithinHalfAStepOfTheirHead) {
  const kv_layout l{4, 12};
  const int heads = 3, head = 4, blocks = 8, n = 13;
  std::vector<int8_t> cache(blocks * l.block_size * l.width, 0);
  std::vector<float> scales(blocks * l.block_size * heads, -1.0f);
  std::vector<int32_t> table = {6, 1, 7, 3};
  auto values = testing::random_values(n * l.width, 2, -3.0f, 3.0f);
  cpu::kv_append_int8(cache.data(), scales.data(), table.data(), l, heads, 0, values.data(),
                      l.width, 6);
  cpu::kv_append_int8(cache.data(), scales.data(), table.data(), l, heads, 6,
                      values.data() + 6 * l.width, l.width, n - 6);
  std::vector<float> out(n * l.width);
  cpu::kv_gather_int8(out.data(), cache.data(), scales.data(), table.data(), l, heads, n);
  for (int i = 0; i < n; ++i) {
    for (int h = 0; h < heads; ++h) {
      float largest = 0;
      for (int d = 0; d < head; ++d)
        largest = std::max(largest, std::fabs(values[i * l.width + h * head + d]));
      const float step = largest / 127.0f;
      for (int d = 0; d < head; ++d) {
        const int c = h * head + d;
        EXPECT_LE(std::fabs(out[i * l.width + c] - values[i * l.width + c]), step * 0.5f + 1e-6f)
            << "position " << i << ", value " << c;
      }
    }
  }
  EXPECT_EQ(scales[0], -1.0f);  // block 0 is outside the table
}

}  // namespace
}  // namespace troupe::kernels

#include "kernels/kv_cache.hpp"

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

}  // namespace
}  // namespace troupe::kernels

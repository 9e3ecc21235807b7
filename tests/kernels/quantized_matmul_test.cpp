#include "kernels/quantized_matmul.hpp"

#include <cmath>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/cpu/thread_pool.hpp"
#include "tests/kernels/gradient_check.hpp"

namespace troupe::kernels {
namespace {

using testing::random_values;

// A quantized matrix and the storage its view points into.
struct stored_matrix {
  std::vector<uint8_t> q;
  std::vector<float> scales, zeros;
  quantized_matrix view;
};

stored_matrix quantize(const std::vector<float>& w, int bits, int rows, int cols, int group) {
  stored_matrix s;
  s.view = {bits, rows, cols, group};
  s.q.resize(rows * s.view.row_bytes());
  s.scales.resize(rows * s.view.groups());
  cpu::quantize_symmetric(w.data(), cols, 1, bits, rows, cols, group, s.q.data(), s.scales.data());
  s.view.q = s.q.data();
  s.view.scales = s.scales.data();
  return s;
}

// out[i][r] = sum_k x[i][k] w[r][k] + bias[r] in double.
std::vector<float> reference(const std::vector<float>& x, const std::vector<float>& w,
                             const float* bias, int m, int rows, int cols) {
  std::vector<float> out(m * rows);
  for (int i = 0; i < m; ++i) {
    for (int r = 0; r < rows; ++r) {
      double s = bias != nullptr ? bias[r] : 0.0;
      for (int k = 0; k < cols; ++k)
        s += double{x[i * cols + k]} * w[r * cols + k];
      out[i * rows + r] = static_cast<float>(s);
    }
  }
  return out;
}

TEST(QuantizedMatmul, RoundingKeepsEachWeightWithinHalfAStepOfItsGroup) {
  const int rows = 5, cols = 64;
  const auto w = random_values(rows * cols, 1);
  for (const auto& [bits, group] : {std::pair{8, 64}, std::pair{8, 16}, std::pair{4, 32}}) {
    const stored_matrix s = quantize(w, bits, rows, cols, group);
    std::vector<float> back(rows * cols);
    cpu::dequantize(s.view, back.data());
    const float vmax = bits == 8 ? 127.0f : 7.0f;
    for (int r = 0; r < rows; ++r) {
      for (int g = 0; g < cols / group; ++g) {
        float largest = 0;
        for (int k = g * group; k < (g + 1) * group; ++k)
          largest = std::max(largest, std::fabs(w[r * cols + k]));
        const float scale = s.scales[r * (cols / group) + g];
        EXPECT_FLOAT_EQ(scale, largest / vmax);
        for (int k = g * group; k < (g + 1) * group; ++k)
          EXPECT_LE(std::fabs(back[r * cols + k] - w[r * cols + k]), scale * 0.5f + 1e-7f)
              << bits << " bits, row " << r << ", input " << k;
      }
    }
  }
}

TEST(QuantizedMatmul, Int4PacksSixteenInputsInEightBytesLowNibblesFirst) {
  // Inputs 0..7 in the low nibbles of bytes 0..7, inputs 8..15 in their high nibbles, stored + 8.
  std::vector<uint8_t> q(8);
  for (int i = 0; i < 8; ++i)
    q[i] = static_cast<uint8_t>((i + 8) | ((15 - i - 8 + 8) << 4));  // low: i, high: 7 - i
  const float scale = 0.5f;
  const quantized_matrix w{4, 1, 16, 16, q.data(), &scale, nullptr};
  std::vector<float> back(16);
  cpu::dequantize(w, back.data());
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(back[i], 0.5f * static_cast<float>(i));
    EXPECT_EQ(back[8 + i], 0.5f * static_cast<float>(7 - i));
  }
}

TEST(QuantizedMatmul, MatchesTheDequantizedProductWithBiasAndZeroPoints) {
  const int rows = 70, cols = 96;  // a tile and a part, and six 16-input blocks
  const auto w = random_values(rows * cols, 2);
  const auto bias = random_values(rows, 3);
  for (const auto& [bits, group] :
       {std::pair{8, 96}, std::pair{8, 32}, std::pair{4, 32}, std::pair{4, 16}}) {
    stored_matrix s = quantize(w, bits, rows, cols, group);
    for (const bool with_zeros : {false, true}) {
      if (with_zeros) {  // GPTQ's asymmetric groups: any zero point
        s.zeros = random_values(rows * s.view.groups(), 4);
        s.view.zeros = s.zeros.data();
      }
      std::vector<float> dense(rows * cols);
      cpu::dequantize(s.view, dense.data());
      for (const int m : {1, 3, 4, 9}) {
        const auto x = random_values(m * cols, 5 + m);
        std::vector<float> out(m * rows, 99.0f);
        cpu::quantized_matmul(out.data(), x.data(), s.view, bias.data(), m);
        const auto want = reference(x, dense, bias.data(), m, rows, cols);
        for (int i = 0; i < m * rows; ++i)
          ASSERT_NEAR(out[i], want[i], 1e-4f * (1 + std::fabs(want[i])))
              << bits << " bits, group " << group << ", zeros " << with_zeros << ", m " << m
              << ", element " << i;
      }
    }
  }
}

TEST(QuantizedMatmul, ARowsResultIsTheSameBitsWhateverRowsComeWithIt) {
  const int rows = 40, cols = 128, m = 11;
  const auto w = random_values(rows * cols, 6);
  const auto x = random_values(m * cols, 7);
  for (const int bits : {8, 4}) {
    const stored_matrix s = quantize(w, bits, rows, cols, 32);
    std::vector<float> batch(m * rows);
    cpu::quantized_matmul(batch.data(), x.data(), s.view, nullptr, m);
    for (int i = 0; i < m; ++i) {
      std::vector<float> alone(rows);
      cpu::quantized_matmul(alone.data(), x.data() + i * cols, s.view, nullptr, 1);
      for (int r = 0; r < rows; ++r)
        ASSERT_EQ(alone[r], batch[i * rows + r]) << bits << " bits, row " << i << ", output " << r;
    }
  }
}

// Tiles of output channels spread over a pool give the caller's bits, zero points included.
TEST(QuantizedMatmul, TilesSpreadOverAPoolAreTheSameBits) {
  cpu::thread_pool pool(3, std::chrono::microseconds(0));
  const int rows = 200, cols = 256, m = 3;  // tiles of 64 outputs, the last one partial
  const auto w = random_values(rows * cols, 11), x = random_values(m * cols, 12);
  const auto bias = random_values(rows, 13);
  for (const int bits : {8, 4}) {
    stored_matrix s = quantize(w, bits, rows, cols, 64);
    s.zeros.assign(rows * s.view.groups(), 3.0f);
    s.view.zeros = s.zeros.data();
    std::vector<float> alone(m * rows), split(m * rows, -1.0f);
    cpu::quantized_matmul(alone.data(), x.data(), s.view, bias.data(), m);
    cpu::quantized_matmul(split.data(), x.data(), s.view, bias.data(), m, &pool);
    ASSERT_EQ(split, alone) << bits << " bits";
  }
}

TEST(QuantizedMatmul, ShapesItCannotTakeAreRefusedWithWhatToChoose) {
  EXPECT_TRUE(cpu::check_quantizable(8, 4, 64, 64).ok());
  EXPECT_TRUE(cpu::check_quantizable(4, 4, 256, 128).ok());
  const auto bits = cpu::check_quantizable(3, 4, 64, 64);
  EXPECT_NE(bits.message().find("8 or 4"), std::string::npos) << bits;
  const auto width = cpu::check_quantizable(8, 4, 40, 40);
  EXPECT_NE(width.message().find("multiple of 16"), std::string::npos) << width;
  const auto group = cpu::check_quantizable(4, 4, 96, 64);
  EXPECT_NE(group.message().find("divides the inputs"), std::string::npos) << group;
}

}  // namespace
}  // namespace troupe::kernels

#include "kernels/quantized_matmul.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include <immintrin.h>

#include "absl/strings/str_cat.h"
#include "kernels/cpu/thread_pool.hpp"

namespace troupe::kernels::cpu {
namespace {

// The largest stored magnitude of a symmetric group: v in [-127, 127] or [-7, 7] (int4's -8 is
// only reached by a zero point other than 0, as GPTQ's asymmetric groups).
int symmetric_max(int bits) {
  return bits == 8 ? 127 : 7;
}

// Stored integer k of a row, read as signed.
int stored_value(const quantized_matrix& w, const uint8_t* row, int k) {
  if (w.bits == 8) return static_cast<int8_t>(row[k]);
  const uint8_t byte = row[(k / 16) * 8 + k % 8];
  return (k % 16 < 8 ? byte & 15 : byte >> 4) - 8;
}

// Widens 8 stored values to f32: an int8 run, or the low or high nibbles of 8 bytes.
inline __m256 widen_int8(const uint8_t* q) {
  return _mm256_cvtepi32_ps(
      _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(q))));
}
inline void widen_int4(const uint8_t* q, __m256& lo, __m256& hi) {
  const __m256i bytes = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(q)));
  const __m256i eight = _mm256_set1_epi32(8);
  lo = _mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_and_si256(bytes, _mm256_set1_epi32(15)), eight));
  hi = _mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_srli_epi32(bytes, 4), eight));
}

// The sum of a vector's lanes in a fixed order.
inline float lane_sum(__m256 v) {
  const __m128 four = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 two = _mm_add_ps(four, _mm_movehl_ps(four, four));
  return _mm_cvtss_f32(_mm_add_ss(two, _mm_movehdup_ps(two)));
}

// O consecutive outputs from r of R rows of x (rows apart by `ldx`) into out (rows apart by
// `ldo`). Each (output, row) pair keeps two chains per group (inputs k % 16 < 8 and >= 8), summed
// and scaled into its total at the group's end; the zero points' share, scale * zero * (the
// group's sum of x), is subtracted at the end. That sequence is the same whatever R and O are, so
// an output's bits do not depend on them; R x O pairs at once only hide the FMA latency (one
// output alone would wait on its two chains) and share each widened weight among R rows.
template <int Bits, int R, int O>
inline void output_block(const quantized_matrix& w, const float* x, int64_t ldx, const float* xsums,
                         const float* bias, float* out, int64_t ldo, int r) {
  const int groups = w.groups(), G = w.group_size;
  const int64_t row_bytes = w.row_bytes();
  const uint8_t* rows = w.q + int64_t{r} * row_bytes;
  __m256 total[O][R];
  for (int o = 0; o < O; ++o)
    for (int i = 0; i < R; ++i)
      total[o][i] = _mm256_setzero_ps();
  for (int g = 0; g < groups; ++g) {
    __m256 a[O][R], b[O][R];
    for (int o = 0; o < O; ++o)
      for (int i = 0; i < R; ++i)
        a[o][i] = b[o][i] = _mm256_setzero_ps();
    for (int k = g * G; k < (g + 1) * G; k += 16) {
      for (int o = 0; o < O; ++o) {
        __m256 lo, hi;
        if constexpr (Bits == 8) {
          lo = widen_int8(rows + o * row_bytes + k);
          hi = widen_int8(rows + o * row_bytes + k + 8);
        } else {
          widen_int4(rows + o * row_bytes + k / 2, lo, hi);
        }
        for (int i = 0; i < R; ++i) {
          a[o][i] = _mm256_fmadd_ps(_mm256_loadu_ps(x + i * ldx + k), lo, a[o][i]);
          b[o][i] = _mm256_fmadd_ps(_mm256_loadu_ps(x + i * ldx + k + 8), hi, b[o][i]);
        }
      }
    }
    for (int o = 0; o < O; ++o) {
      const __m256 scale = _mm256_set1_ps(w.scales[int64_t{r + o} * groups + g]);
      for (int i = 0; i < R; ++i)
        total[o][i] = _mm256_fmadd_ps(_mm256_add_ps(a[o][i], b[o][i]), scale, total[o][i]);
    }
  }
  for (int o = 0; o < O; ++o) {
    const float* scales = w.scales + int64_t{r + o} * groups;
    for (int i = 0; i < R; ++i) {
      float y = lane_sum(total[o][i]);
      if (w.zeros != nullptr) {
        const float* zeros = w.zeros + int64_t{r + o} * groups;
        for (int g = 0; g < groups; ++g)
          y -= scales[g] * zeros[g] * xsums[i * groups + g];
      }
      out[i * ldo + r + o] = bias != nullptr ? y + bias[r + o] : y;
    }
  }
}

// Outputs [r0, r1) of R rows of x, up to 4 (row, output) pairs at once.
template <int Bits, int R>
void rows_kernel(const quantized_matrix& w, const float* x, int64_t ldx, const float* xsums,
                 const float* bias, float* out, int64_t ldo, int r0, int r1) {
  constexpr int O = R == 1 ? 4 : R == 2 ? 2 : 1;
  int r = r0;
  for (; r + O <= r1; r += O)
    output_block<Bits, R, O>(w, x, ldx, xsums, bias, out, ldo, r);
  for (; r < r1; ++r)
    output_block<Bits, R, 1>(w, x, ldx, xsums, bias, out, ldo, r);
}

using quantized_rows_fn = void (*)(const quantized_matrix&, const float*, int64_t, const float*,
                                   const float*, float*, int64_t, int, int);
constexpr int block_rows = 4;
template <int Bits>
constexpr quantized_rows_fn row_kernels[block_rows + 1] = {
    nullptr, rows_kernel<Bits, 1>, rows_kernel<Bits, 2>, rows_kernel<Bits, 3>,
    rows_kernel<Bits, 4>};
// Outputs per tile: a tile's integers (64 rows of up to a few KiB) stay in L2 while every block of
// x's rows passes over them.
constexpr int tile_rows = 64;

}  // namespace

absl::Status check_quantizable(int bits, int rows, int cols, int group_size) {
  if (bits != 8 && bits != 4) {
    return absl::InvalidArgumentError(
        absl::StrCat("weight quantization to ", bits, " bits: troupe quantizes to 8 or 4"));
  }
  if (rows < 1 || cols < 16 || cols % 16 != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("a [", rows, ", ", cols,
                     "] weight cannot be quantized: its input width must be a "
                     "positive multiple of 16"));
  }
  if (group_size < 16 || group_size % 16 != 0 || cols % group_size != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "quantization group size ", group_size, " for a weight of ", cols,
        " inputs: it must be a multiple of 16 that divides the inputs (e.g. 32, 128, or ", cols,
        " for one scale per output channel)"));
  }
  return absl::OkStatus();
}

void quantize_symmetric(const float* w, int64_t row_stride, int64_t col_stride, int bits, int rows,
                        int cols, int group_size, uint8_t* q, float* scales) {
  const quantized_matrix shape{bits, rows, cols, group_size};
  const int groups = shape.groups(), vmax = symmetric_max(bits);
  std::vector<int> values(cols);
  for (int r = 0; r < rows; ++r) {
    const float* src = w + r * row_stride;
    for (int g = 0; g < groups; ++g) {
      float largest = 0;
      for (int k = g * group_size; k < (g + 1) * group_size; ++k)
        largest = std::max(largest, std::fabs(src[k * col_stride]));
      const float scale = largest / static_cast<float>(vmax);
      scales[int64_t{r} * groups + g] = scale;
      for (int k = g * group_size; k < (g + 1) * group_size; ++k) {
        const float v = scale > 0 ? std::nearbyint(src[k * col_stride] / scale) : 0.0f;
        values[k] =
            static_cast<int>(std::clamp(v, static_cast<float>(-vmax), static_cast<float>(vmax)));
      }
    }
    uint8_t* row = q + r * shape.row_bytes();
    if (bits == 8) {
      for (int k = 0; k < cols; ++k)
        row[k] = static_cast<uint8_t>(static_cast<int8_t>(values[k]));
    } else {
      for (int k0 = 0; k0 < cols; k0 += 16) {
        for (int i = 0; i < 8; ++i) {
          row[k0 / 2 + i] =
              static_cast<uint8_t>((values[k0 + i] + 8) | ((values[k0 + 8 + i] + 8) << 4));
        }
      }
    }
  }
}

void dequantize_row(const quantized_matrix& w, int r, float* out) {
  const uint8_t* row = w.q + r * w.row_bytes();
  for (int k = 0; k < w.cols; ++k) {
    const int64_t g = int64_t{r} * w.groups() + k / w.group_size;
    const float zero = w.zeros != nullptr ? w.zeros[g] : 0.0f;
    out[k] = w.scales[g] * (static_cast<float>(stored_value(w, row, k)) - zero);
  }
}

void dequantize(const quantized_matrix& w, float* out) {
  for (int r = 0; r < w.rows; ++r)
    dequantize_row(w, r, out + int64_t{r} * w.cols);
}

void quantized_matmul(float* out, const float* x, const quantized_matrix& w, const float* bias,
                      int m, thread_pool* pool) {
  const int groups = w.groups();
  // Each row's sum of x over each group, for the zero points' share.
  thread_local std::vector<float> xsums;
  if (w.zeros != nullptr) {
    xsums.resize(int64_t{m} * groups);
    for (int i = 0; i < m; ++i) {
      for (int g = 0; g < groups; ++g) {
        float s = 0;
        for (int k = g * w.group_size; k < (g + 1) * w.group_size; ++k)
          s += x[int64_t{i} * w.cols + k];
        xsums[int64_t{i} * groups + g] = s;
      }
    }
  }
  // Tiles of output channels, each computed alone (the same bits however they are spread).
  const float* sums = w.zeros != nullptr ? xsums.data() : nullptr;
  parallel_for(pool, (w.rows + tile_rows - 1) / tile_rows, [&](int64_t tile) {
    const int r0 = static_cast<int>(tile) * tile_rows, r1 = std::min(w.rows, r0 + tile_rows);
    for (int i = 0; i < m; i += block_rows) {
      const int R = std::min(block_rows, m - i);
      (w.bits == 8 ? row_kernels<8> : row_kernels<4>)[R](
          w, x + int64_t{i} * w.cols, w.cols,
          sums != nullptr ? sums + int64_t{i} * groups : nullptr, bias, out + int64_t{i} * w.rows,
          w.rows, r0, r1);
    }
  });
}

}  // namespace troupe::kernels::cpu

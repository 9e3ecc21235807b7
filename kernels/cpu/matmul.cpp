#include "kernels/matmul.hpp"

#include <algorithm>
#include <cstring>
#include <vector>

#include <cblas.h>
#include <immintrin.h>

#include "kernels/cpu/thread_pool.hpp"

namespace troupe::kernels::cpu {
namespace {

// The row-invariant GEMM: out[i][j] = bias[j] (or 0) followed by one fused multiply-add per
// k = 0, 1, ..., K-1, in that order, whatever m is and wherever row i falls in a block. (Blocking
// K continues the same chain from the stored partial sum, so it changes nothing.) OpenBLAS gives
// no such promise: its micro-kernels for 4 or 8 rows round differently from those for 1 or 12,
// so a row's result depends on how many rows come with it.
//
// GotoBLAS's structure at AVX2 size: B is packed into panels of 16 columns (two registers),
// a micro-kernel keeps a block of up to 6 rows x 16 columns in 12 registers and streams the
// panel; panels of kc x nc floats stay in L2 while blocks of 6 rows of A stay in L1.
constexpr int panel = 16;
constexpr int max_rows = 6;
constexpr int kc_block = 256;  // k per packed chunk
constexpr int nc_block = 256;  // columns per packed chunk: 256 KiB of panels

// Lanes [0, cols) of a 16-float row as two masks.
struct column_mask {
  __m256i lo, hi;
  explicit column_mask(int cols) {
    const __m256i index = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    lo = _mm256_cmpgt_epi32(_mm256_set1_epi32(cols), index);
    hi = _mm256_cmpgt_epi32(_mm256_set1_epi32(cols - 8), index);
  }
};

// Rows [0, R) x panel columns [0, cols) of out: from the partial sums in out (`resume`), else
// from bias16 (the panel's bias, zero-padded), then one FMA per k of the chunk. The 12
// accumulators are named variables: in an array GCC spills them to the stack every iteration.
// A whole panel (cols 16) is loaded and stored plainly: masked stores are microcoded on AMD's
// cores, where twelve of them cost a quarter of a 64-deep block.
#define TROUPE_ROWS(X) X(0) X(1) X(2) X(3) X(4) X(5)
template <int R>
void micro_kernel(const float* a, int64_t lda, const float* panel_b, int kc, float* out,
                  int64_t ldo, int cols, const float* bias16, bool resume) {
  const column_mask mask(cols);
  const bool whole = cols == panel;
  const __m256 bias_lo = _mm256_loadu_ps(bias16), bias_hi = _mm256_loadu_ps(bias16 + 8);
#define TROUPE_INIT(r)                                                                             \
  __m256 lo##r = bias_lo, hi##r = bias_hi;                                                         \
  if constexpr (r < R) {                                                                           \
    if (resume) {                                                                                  \
      lo##r = whole ? _mm256_loadu_ps(out + (r)*ldo) : _mm256_maskload_ps(out + (r)*ldo, mask.lo); \
      hi##r = whole ? _mm256_loadu_ps(out + (r)*ldo + 8)                                           \
                    : _mm256_maskload_ps(out + (r)*ldo + 8, mask.hi);                              \
    }                                                                                              \
  }
  TROUPE_ROWS(TROUPE_INIT)
#undef TROUPE_INIT
  for (int kk = 0; kk < kc; ++kk) {
    const __m256 b0 = _mm256_loadu_ps(panel_b + kk * panel);
    const __m256 b1 = _mm256_loadu_ps(panel_b + kk * panel + 8);
#define TROUPE_FMA(r)                                       \
  if constexpr (r < R) {                                    \
    const __m256 x = _mm256_broadcast_ss(a + (r)*lda + kk); \
    lo##r = _mm256_fmadd_ps(x, b0, lo##r);                  \
    hi##r = _mm256_fmadd_ps(x, b1, hi##r);                  \
  }
    TROUPE_ROWS(TROUPE_FMA)
#undef TROUPE_FMA
  }
#define TROUPE_STORE(r)                                       \
  if constexpr (r < R) {                                      \
    if (whole) {                                              \
      _mm256_storeu_ps(out + (r)*ldo, lo##r);                 \
      _mm256_storeu_ps(out + (r)*ldo + 8, hi##r);             \
    } else {                                                  \
      _mm256_maskstore_ps(out + (r)*ldo, mask.lo, lo##r);     \
      _mm256_maskstore_ps(out + (r)*ldo + 8, mask.hi, hi##r); \
    }                                                         \
  }
  TROUPE_ROWS(TROUPE_STORE)
#undef TROUPE_STORE
}
#undef TROUPE_ROWS

using kernel_fn = void (*)(const float*, int64_t, const float*, int, float*, int64_t, int,
                           const float*, bool);
constexpr kernel_fn kernels[max_rows + 1] = {nullptr,         micro_kernel<1>, micro_kernel<2>,
                                             micro_kernel<3>, micro_kernel<4>, micro_kernel<5>,
                                             micro_kernel<6>};

// Transposes the 8x8 block r[0..7] (rows) in registers: r[t] becomes column t.
inline void transpose8(__m256 r[8]) {
  const __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
  const __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
  const __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
  const __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
  const __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE);
  const __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE);
  const __m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE);
  const __m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
  r[0] = _mm256_permute2f128_ps(u0, u4, 0x20);
  r[1] = _mm256_permute2f128_ps(u1, u5, 0x20);
  r[2] = _mm256_permute2f128_ps(u2, u6, 0x20);
  r[3] = _mm256_permute2f128_ps(u3, u7, 0x20);
  r[4] = _mm256_permute2f128_ps(u0, u4, 0x31);
  r[5] = _mm256_permute2f128_ps(u1, u5, 0x31);
  r[6] = _mm256_permute2f128_ps(u2, u6, 0x31);
  r[7] = _mm256_permute2f128_ps(u3, u7, 0x31);
}

// One panel of a b stored [n, k] (the Llama family's [out, in] weights): dst[kk][c] =
// b[j + c][k0 + kk], a whole panel's 8x8 blocks transposed in registers (the same values as
// element by element, several times faster: a decode step's products pack every weight).
void pack_transposed_panel(float* dst, const float* b, int64_t ldb, int j, int k0, int kc,
                           int cols) {
  int kk = 0;
  if (cols == panel) {
    for (; kk + 8 <= kc; kk += 8) {
      for (int half = 0; half < 2; ++half) {
        __m256 r[8];
        for (int c = 0; c < 8; ++c)
          r[c] = _mm256_loadu_ps(b + int64_t{j + half * 8 + c} * ldb + k0 + kk);
        transpose8(r);
        for (int t = 0; t < 8; ++t)
          _mm256_storeu_ps(dst + (kk + t) * panel + half * 8, r[t]);
      }
    }
  }
  for (; kk < kc; ++kk) {
    for (int c = 0; c < cols; ++c)
      dst[kk * panel + c] = b[int64_t{j + c} * ldb + k0 + kk];
  }
}

// Packs op(b)[k0, k0 + kc) x [j0, j0 + nc) into panels of 16 columns, zero-padded.
void pack(float* packed, const float* b, const gemm& g, int k0, int kc, int j0, int nc) {
  const int panels = (nc + panel - 1) / panel;
  if (nc % panel != 0)  // a partial last panel's padding; whole panels are written through
    std::memset(packed + int64_t{panels - 1} * kc * panel, 0, sizeof(float) * kc * panel);
  for (int p = 0; p < panels; ++p) {
    float* dst = packed + int64_t{p} * kc * panel;
    const int cols = std::min(panel, nc - p * panel), j = j0 + p * panel;
    if (g.trans_b) {  // b is [n, k]
      pack_transposed_panel(dst, b, g.k, j, k0, kc, cols);
      continue;
    }
    for (int kk = 0; kk < kc; ++kk)  // b is [k, n]
      std::memcpy(dst + kk * panel, b + int64_t{k0 + kk} * g.n + j, cols * sizeof(float));
  }
}

// Columns [j_begin, j_end) of the product: each column's outputs are computed alone, so any
// split of the columns gives the same bits.
void row_invariant_matmul(float* out, const float* a, const float* b, const float* bias,
                          const gemm& g, int j_begin, int j_end) {
  if (g.k == 0) {  // the chain's start alone
    for (int i = 0; i < g.m; ++i) {
      float* row = out + int64_t{i} * g.n;
      if (bias != nullptr) {
        std::copy(bias + j_begin, bias + j_end, row + j_begin);
      } else {
        std::fill(row + j_begin, row + j_end, 0.0f);
      }
    }
    return;
  }
  thread_local std::vector<float> packed;
  packed.resize(int64_t{kc_block} * nc_block);
  alignas(32) float chunk_bias[nc_block];
  for (int j0 = j_begin; j0 < j_end; j0 += nc_block) {
    const int nc = std::min(nc_block, j_end - j0);
    std::fill(chunk_bias, chunk_bias + nc_block, 0.0f);
    if (bias != nullptr) std::copy(bias + j0, bias + j0 + nc, chunk_bias);
    for (int k0 = 0; k0 < g.k; k0 += kc_block) {
      const int kc = std::min(kc_block, g.k - k0);
      pack(packed.data(), b, g, k0, kc, j0, nc);
      // A block of rows stays in L1 while the chunk's panels stream from L2.
      for (int i = 0; i < g.m; i += max_rows) {
        const int rows = std::min(max_rows, g.m - i);
        for (int p = 0; p * panel < nc; ++p) {
          const int j = j0 + p * panel;
          kernels[rows](a + int64_t{i} * g.k + k0, g.k, packed.data() + int64_t{p} * kc * panel, kc,
                        out + int64_t{i} * g.n + j, g.n, std::min(panel, nc - p * panel),
                        chunk_bias + p * panel, k0 > 0);
        }
      }
    }
  }
}

}  // namespace

void matmul(float* out, const float* a, const float* b, const float* bias, const gemm& g,
            thread_pool* pool) {
  if (g.trans_a || g.accumulate) return matmul(out, a, b, bias, g);
  // Chunks of the packing's width, so that no chunk packs a partial block it need not.
  const int64_t chunks = (g.n + nc_block - 1) / nc_block;
  parallel_for(pool, chunks, [&](int64_t c) {
    const int j0 = static_cast<int>(c) * nc_block;
    row_invariant_matmul(out, a, b, bias, g, j0, std::min(g.n, j0 + nc_block));
  });
}

void matmul(float* out, const float* a, const float* b, const float* bias, const gemm& g) {
  if (!g.trans_a && !g.accumulate) return row_invariant_matmul(out, a, b, bias, g, 0, g.n);
  // The weight gradients (a^T @ dout, accumulated): OpenBLAS.
  float beta = g.accumulate ? 1.0f : 0.0f;
  if (bias != nullptr && !g.accumulate) {
    for (int i = 0; i < g.m; ++i)
      std::memcpy(out + int64_t{i} * g.n, bias, g.n * sizeof(float));
    beta = 1.0f;
  } else if (bias != nullptr) {
    for (int i = 0; i < g.m; ++i) {
      float* row = out + int64_t{i} * g.n;
      for (int j = 0; j < g.n; ++j)
        row[j] += bias[j];
    }
  }
  const int lda = g.trans_a ? g.m : g.k;
  const int ldb = g.trans_b ? g.k : g.n;
  cblas_sgemm(CblasRowMajor, g.trans_a ? CblasTrans : CblasNoTrans,
              g.trans_b ? CblasTrans : CblasNoTrans, g.m, g.n, g.k, 1.0f, a, lda, b, ldb, beta, out,
              g.n);
}

void bias_backward(float* dbias, const float* dout, int m, int n) {
  for (int i = 0; i < m; ++i) {
    const float* row = dout + int64_t{i} * n;
    for (int j = 0; j < n; ++j)
      dbias[j] += row[j];
  }
}

const char* blas_config() {
  return openblas_get_config();
}

void set_blas_threads(int threads) {
  openblas_set_num_threads(threads);
}

}  // namespace troupe::kernels::cpu

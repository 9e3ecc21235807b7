#include "kernels/attention.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include <cblas.h>
#include <immintrin.h>

#include "kernels/cpu/thread_pool.hpp"

namespace troupe::kernels::cpu {
namespace {

// The backward pass works on blocks of query rows: block [r0, r0 + block) needs only keys
// [0, r0 + block), so its GEMMs skip most of the masked upper triangle.
constexpr int row_block = 32;

constexpr int lanes = 8;
int padded(int n) {
  return (n + lanes - 1) / lanes * lanes;
}

// fast_exp's arithmetic on eight lanes.
__m256 exp8(__m256 x) {
  x = _mm256_max_ps(x, _mm256_set1_ps(-87.0f));
  x = _mm256_min_ps(x, _mm256_set1_ps(88.0f));
  const __m256 magic = _mm256_set1_ps(12582912.0f);
  const __m256 n =
      _mm256_sub_ps(_mm256_fmadd_ps(x, _mm256_set1_ps(1.44269504088896341f), magic), magic);
  const __m256 r = _mm256_fmadd_ps(n, _mm256_set1_ps(2.12194440e-4f),
                                   _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x));
  __m256 p = _mm256_set1_ps(1.9875691500e-4f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
  p = _mm256_fmadd_ps(_mm256_mul_ps(p, r), r, _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
  const __m256i e =
      _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}

// Lanes [0, n) of a block of eight.
__m256 first_lanes(int n) {
  const __m256i index = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32(n), index));
}

// The scaled scores q . k[s] of keys [s0, s0 + 8 C) into p: C chunks of eight keys, each its own
// chain of one FMA per dimension in order (so a key's score is the same bits whichever chunks
// run beside it), side by side so that the FMAs' latency overlaps.
template <int C>
void scores(const float* q, const float* kt, int64_t ldk, int s0, int hd, __m256 scale, float* p) {
  __m256 acc[C];
  for (int c = 0; c < C; ++c)
    acc[c] = _mm256_setzero_ps();
  for (int d = 0; d < hd; ++d) {
    const __m256 x = _mm256_broadcast_ss(q + d);
    const float* k = kt + d * ldk + s0;
    for (int c = 0; c < C; ++c)
      acc[c] = _mm256_fmadd_ps(x, _mm256_loadu_ps(k + c * lanes), acc[c]);
  }
  for (int c = 0; c < C; ++c)
    _mm256_storeu_ps(p + s0 + c * lanes, _mm256_mul_ps(acc[c], scale));
}

// out[d0, d0 + 8 C) = sum_s p[s] v[s][d0, ...) for C chunks of eight dimensions, each in two
// chains (even and odd keys), the chunks side by side. `mask` holds the lanes of a last, partial
// chunk (C 1); whole chunks are loaded and stored plainly (masked stores are slow on AMD's
// cores).
template <int C, bool Masked = false>
void weighted_values(const float* p, const float* const* v, int n, int d0, float* out,
                     __m256i mask = _mm256_setzero_si256()) {
  static_assert(!Masked || C == 1);
  const auto load = [&](const float* at) {
    if constexpr (Masked) return _mm256_maskload_ps(at, mask);
    return _mm256_loadu_ps(at);
  };
  __m256 even[C], odd[C];
  for (int c = 0; c < C; ++c)
    even[c] = odd[c] = _mm256_setzero_ps();
  int s = 0;
  for (; s + 1 < n; s += 2) {
    const __m256 pe = _mm256_broadcast_ss(p + s), po = _mm256_broadcast_ss(p + s + 1);
    for (int c = 0; c < C; ++c) {
      even[c] = _mm256_fmadd_ps(pe, load(v[s] + d0 + c * lanes), even[c]);
      odd[c] = _mm256_fmadd_ps(po, load(v[s + 1] + d0 + c * lanes), odd[c]);
    }
  }
  if (s < n) {
    const __m256 pe = _mm256_broadcast_ss(p + s);
    for (int c = 0; c < C; ++c)
      even[c] = _mm256_fmadd_ps(pe, load(v[s] + d0 + c * lanes), even[c]);
  }
  for (int c = 0; c < C; ++c) {
    if constexpr (Masked) {
      _mm256_maskstore_ps(out + d0, mask, _mm256_add_ps(even[c], odd[c]));
    } else {
      _mm256_storeu_ps(out + d0 + c * lanes, _mm256_add_ps(even[c], odd[c]));
    }
  }
}

// 1 / sqrt(hd) on eight lanes: what each score is multiplied by.
__m256 score_scale(int hd) {
  return _mm256_set1_ps(1.0f / std::sqrt(static_cast<float>(hd)));
}

// The attention of one query row against keys [0, n): the one function both the training
// forward and the decoder run, each on the row's own data, so that a row's output does not
// depend on which rows come with it (batch invariance: a decoder's log-probs are the
// training forward's, bit for bit). q holds hd values; kt is K^T, hd rows of stride ldk with
// room for padded(n) keys (what lies past n is never read into a result); v[s] points at key
// s's hd values. p receives the softmax probabilities in [0, n) and zeros up to padded(n); out
// receives hd values. `scale` is score_scale(hd), made once by the caller for all its rows.
void attend_row(const float* q, const float* kt, int64_t ldk, const float* const* v, int n, int hd,
                __m256 scale, float* p, float* out) {
  const int np = padded(n);
  int s0 = 0;
  for (; s0 + 4 * lanes <= np; s0 += 4 * lanes)
    scores<4>(q, kt, ldk, s0, hd, scale, p);
  switch ((np - s0) / lanes) {
    case 3:
      scores<3>(q, kt, ldk, s0, hd, scale, p);
      break;
    case 2:
      scores<2>(q, kt, ldk, s0, hd, scale, p);
      break;
    case 1:
      scores<1>(q, kt, ldk, s0, hd, scale, p);
      break;
    default:
      break;
  }
  float max = p[0];
  for (int s = 1; s < n; ++s)
    max = p[s] > max ? p[s] : max;
  __m256 sum = _mm256_setzero_ps();
  for (s0 = 0; s0 < np; s0 += lanes) {
    const __m256 e = _mm256_and_ps(
        exp8(_mm256_sub_ps(_mm256_loadu_ps(p + s0), _mm256_set1_ps(max))), first_lanes(n - s0));
    _mm256_storeu_ps(p + s0, e);
    sum = _mm256_add_ps(sum, e);
  }
  alignas(32) float part[lanes];
  _mm256_store_ps(part, sum);
  const float total =
      ((part[0] + part[1]) + (part[2] + part[3])) + ((part[4] + part[5]) + (part[6] + part[7]));
  const __m256 inv = _mm256_set1_ps(1.0f / total);
  for (s0 = 0; s0 < np; s0 += lanes)
    _mm256_storeu_ps(p + s0, _mm256_mul_ps(_mm256_loadu_ps(p + s0), inv));
  // out = sum_s p[s] v[s]: whole chunks of eight dimensions two at a time, then the rest.
  int d0 = 0;
  for (; d0 + 2 * lanes <= hd; d0 += 2 * lanes)
    weighted_values<2>(p, v, n, d0, out);
  if (d0 + lanes <= hd) {
    weighted_values<1>(p, v, n, d0, out);
    d0 += lanes;
  }
  if (d0 < hd) {
    weighted_values<1, true>(p, v, n, d0, out, _mm256_castps_si256(first_lanes(hd - d0)));
  }
}

// r[j][i] = r[i][j] for an 8 x 8 block of floats held in eight registers.
void transpose8(__m256 (&r)[lanes]) {
  __m256 t[lanes], u[lanes];
  for (int i = 0; i < lanes; i += 2) {  // interleave rows pairwise
    t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int i = 0; i < lanes; i += 4) {  // then pairs of pairs
    u[i] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(1, 0, 1, 0));
    u[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(3, 2, 3, 2));
    u[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(1, 0, 1, 0));
    u[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(3, 2, 3, 2));
  }
  for (int i = 0; i < 4; ++i) {  // then the 128-bit halves
    r[i] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x20);
    r[i + 4] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x31);
  }
}

// K^T of one head: kt[d][s] = k[s][d] for s < n, in rows of stride padded(n) whose padding is
// zero; blocks of eight keys by eight dimensions go through registers.
void transpose_keys(float* kt, const float* const* k, int n, int hd) {
  const int np = padded(n);
  int s = 0;
  for (; s + lanes <= n; s += lanes) {
    int d = 0;
    for (; d + lanes <= hd; d += lanes) {
      __m256 r[lanes];
      for (int i = 0; i < lanes; ++i)
        r[i] = _mm256_loadu_ps(k[s + i] + d);
      transpose8(r);
      for (int j = 0; j < lanes; ++j)
        _mm256_storeu_ps(kt + int64_t{d + j} * np + s, r[j]);
    }
    for (; d < hd; ++d)
      for (int i = 0; i < lanes; ++i)
        kt[int64_t{d} * np + s + i] = k[s + i][d];
  }
  for (; s < n; ++s)
    for (int d = 0; d < hd; ++d)
      kt[int64_t{d} * np + s] = k[s][d];
  for (int d = 0; d < hd; ++d)
    std::fill(kt + int64_t{d} * np + n, kt + int64_t{d} * np + np, 0.0f);
}

// Head h's query columns, and its key/value head's key and value columns, in a row of qkv.
struct head_columns {
  int q, k, v;
};
head_columns columns_of(const attention_shape& sh, int h) {
  const int hd = sh.head_dim(), g = h / (sh.heads / sh.kv_head_count());
  const int kv_dim = sh.kv_head_count() * hd;
  return {h * hd, sh.dim + g * hd, sh.dim + kv_dim + g * hd};
}

void head_forward(float* out, float* probs, const float* qkv, const attention_shape& sh, int b,
                  int h) {
  const int T = sh.seq, C = sh.dim, hd = sh.head_dim();
  const int ld = sh.row_width();
  const head_columns at = columns_of(sh, h);
  const float* row0 = qkv + int64_t{b} * T * ld;
  const float* q = row0 + at.q;
  thread_local std::vector<float> kt, row;
  thread_local std::vector<const float*> keys, values;
  kt.resize(int64_t{hd} * padded(T));
  row.resize(padded(T));
  keys.resize(T);
  values.resize(T);
  for (int s = 0; s < T; ++s) {
    keys[s] = row0 + int64_t{s} * ld + at.k;
    values[s] = row0 + int64_t{s} * ld + at.v;
  }
  transpose_keys(kt.data(), keys.data(), T, hd);
  float* p = probs + (int64_t{b} * sh.heads + h) * T * T;
  float* o = out + int64_t{b} * T * C + h * hd;
  const __m256 scale = score_scale(hd);
  for (int t = 0; t < T; ++t) {
    attend_row(q + int64_t{t} * ld, kt.data(), padded(T), values.data(), t + 1, hd, scale,
               row.data(), o + int64_t{t} * C);
    std::copy(row.data(), row.data() + t + 1, p + int64_t{t} * T);
    std::fill(p + int64_t{t} * T + t + 1, p + int64_t{t + 1} * T, 0.0f);
  }
}

// Query head h's part of the backward pass: its dq, and its share of its key/value head's dk
// and dv, added to what the heads before it in the group gave (`first`: overwritten instead).
void head_backward(float* dqkv, const float* dout, const float* qkv, const float* probs,
                   const attention_shape& sh, int b, int h, bool first,
                   std::vector<float>& scratch) {
  const int T = sh.seq, C = sh.dim, hd = sh.head_dim();
  const int ld = sh.row_width();
  const head_columns at = columns_of(sh, h);
  const int64_t base = int64_t{b} * T * ld;
  const float* q = qkv + base + at.q;
  const float* k = qkv + base + at.k;
  const float* v = qkv + base + at.v;
  float* dq = dqkv + base + at.q;
  float* dk = dqkv + base + at.k;
  float* dv = dqkv + base + at.v;
  const float beta = first ? 0.0f : 1.0f;
  const float* p = probs + (int64_t{b} * sh.heads + h) * T * T;
  const float* d_out = dout + int64_t{b} * T * C + h * hd;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  scratch.resize(int64_t{T} * T);
  float* ds = scratch.data();

  // dV = P^T dO (P is zero above the diagonal, so the full product is exact).
  cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, T, hd, T, 1.0f, p, T, d_out, C, beta, dv,
              ld);
  for (int r0 = 0; r0 < T; r0 += row_block) {
    const int rows = std::min(row_block, T - r0), keys = r0 + rows;
    float* dsb = ds + int64_t{r0} * T;
    // dP = dO V^T, then dS = P * (dP - sum(P * dP)) * scale, row by row.
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, keys, hd, 1.0f,
                d_out + int64_t{r0} * C, C, v, ld, 0.0f, dsb, T);
    for (int i = 0; i < rows; ++i) {
      const int t = r0 + i;
      const float* pr = p + int64_t{t} * T;
      float* dr = dsb + int64_t{i} * T;
      float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
      for (int s = 0; s <= t; ++s)
        dot += pr[s] * dr[s];
      for (int s = 0; s <= t; ++s)
        dr[s] = pr[s] * (dr[s] - dot) * scale;
      for (int s = t + 1; s < T; ++s)
        dr[s] = 0.0f;
    }
    // dQ rows = dS K.
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, hd, keys, 1.0f, dsb, T, k, ld,
                0.0f, dq + int64_t{r0} * ld, ld);
  }
  // dK = dS^T Q.
  cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, T, hd, T, 1.0f, ds, T, q, ld, beta, dk, ld);
}

}  // namespace

void attention_forward(float* out, float* probs, const float* qkv, const attention_shape& s,
                       thread_pool* pool) {
  parallel_for(pool, int64_t{s.batch} * s.heads, [&](int64_t task) {
    head_forward(out, probs, qkv, s, static_cast<int>(task / s.heads),
                 static_cast<int>(task % s.heads));
  });
}

void attention_backward(float* dqkv, const float* dout, const float* qkv, const float* probs,
                        const attention_shape& s, thread_pool* pool) {
  // One task per key/value head, its query heads in order: their dk and dv sums are the same
  // bits however the tasks are scheduled.
  const int groups = s.kv_head_count(), group = s.heads / groups;
  parallel_for(pool, int64_t{s.batch} * groups, [&](int64_t task) {
    thread_local std::vector<float> scratch;
    const int b = static_cast<int>(task / groups), g = static_cast<int>(task % groups);
    for (int h = g * group; h < (g + 1) * group; ++h)
      head_backward(dqkv, dout, qkv, probs, s, b, h, h == g * group, scratch);
  });
}

void cached_attention_forward(float* out, const float* q, int64_t q_stride,
                              const float* const* keys, const float* const* values, int queries,
                              int first_position, int dim, int heads, int kv_heads) {
  const int hd = dim / heads;
  const int groups = kv_heads > 0 ? kv_heads : heads, group = heads / groups;
  const int n = first_position + queries;
  thread_local std::vector<float> kt, row;
  thread_local std::vector<const float*> head_keys, head_values;
  kt.resize(int64_t{hd} * padded(n));
  row.resize(padded(n));
  head_keys.resize(n);
  head_values.resize(n);
  const __m256 scale = score_scale(hd);
  // Each key/value head is transposed once for the query heads that share it.
  for (int g = 0; g < groups; ++g) {
    for (int s = 0; s < n; ++s) {
      head_keys[s] = keys[s] + g * hd;
      head_values[s] = values[s] + g * hd;
    }
    transpose_keys(kt.data(), head_keys.data(), n, hd);
    for (int h = g * group; h < (g + 1) * group; ++h) {
      for (int i = 0; i < queries; ++i) {
        attend_row(q + i * q_stride + h * hd, kt.data(), padded(n), head_values.data(),
                   first_position + i + 1, hd, scale, row.data(), out + int64_t{i} * dim + h * hd);
      }
    }
  }
}

}  // namespace troupe::kernels::cpu

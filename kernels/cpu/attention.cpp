#include "kernels/attention.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include <cblas.h>

#include "kernels/cpu/fast_math.hpp"
#include "kernels/cpu/thread_pool.hpp"

namespace troupe::kernels::cpu {
namespace {

// Query rows are processed in blocks: block [r0, r0 + block) needs only keys [0, r0 + block),
// so the GEMMs skip most of the masked upper triangle.
constexpr int row_block = 32;

// Softmax of row t over keys [0, t], scaled logits in place; keys after t become 0.
void causal_softmax_row(float* row, int t, int width) {
  float max = row[0];
  for (int s = 1; s <= t; ++s)
    max = row[s] > max ? row[s] : max;
  float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
  for (int s = 0; s <= t; ++s) {
    row[s] = fast_exp(row[s] - max);
    sum += row[s];
  }
  const float inv = 1.0f / sum;
  for (int s = 0; s <= t; ++s)
    row[s] *= inv;
  for (int s = t + 1; s < width; ++s)
    row[s] = 0.0f;
}

void head_forward(float* out, float* probs, const float* qkv, const attention_shape& sh, int b,
                  int h) {
  const int T = sh.seq, C = sh.dim, hd = sh.head_dim();
  const int ld = 3 * C;
  const float* q = qkv + int64_t{b} * T * ld + h * hd;
  const float* k = q + C;
  const float* v = q + 2 * C;
  float* p = probs + (int64_t{b} * sh.heads + h) * T * T;
  float* o = out + int64_t{b} * T * C + h * hd;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  for (int r0 = 0; r0 < T; r0 += row_block) {
    const int rows = std::min(row_block, T - r0), keys = r0 + rows;
    float* pb = p + int64_t{r0} * T;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, keys, hd, scale,
                q + int64_t{r0} * ld, ld, k, ld, 0.0f, pb, T);
    for (int i = 0; i < rows; ++i)
      causal_softmax_row(pb + int64_t{i} * T, r0 + i, T);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, hd, keys, 1.0f, pb, T, v, ld, 0.0f,
                o + int64_t{r0} * C, C);
  }
}

void head_backward(float* dqkv, const float* dout, const float* qkv, const float* probs,
                   const attention_shape& sh, int b, int h, std::vector<float>& scratch) {
  const int T = sh.seq, C = sh.dim, hd = sh.head_dim();
  const int ld = 3 * C;
  const int64_t base = int64_t{b} * T * ld + h * hd;
  const float* q = qkv + base;
  const float* k = q + C;
  const float* v = q + 2 * C;
  float* dq = dqkv + base;
  float* dk = dq + C;
  float* dv = dq + 2 * C;
  const float* p = probs + (int64_t{b} * sh.heads + h) * T * T;
  const float* d_out = dout + int64_t{b} * T * C + h * hd;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  scratch.resize(int64_t{T} * T);
  float* ds = scratch.data();

  // dV = P^T dO (P is zero above the diagonal, so the full product is exact).
  cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, T, hd, T, 1.0f, p, T, d_out, C, 0.0f, dv,
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
  cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, T, hd, T, 1.0f, ds, T, q, ld, 0.0f, dk, ld);
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
  parallel_for(pool, int64_t{s.batch} * s.heads, [&](int64_t task) {
    thread_local std::vector<float> scratch;
    head_backward(dqkv, dout, qkv, probs, s, static_cast<int>(task / s.heads),
                  static_cast<int>(task % s.heads), scratch);
  });
}

void cached_attention_forward(float* out, const float* q, int64_t q_stride, const float* k,
                              const float* v, int64_t kv_stride, int queries, int first_position,
                              int dim, int heads) {
  const int hd = dim / heads;
  const int keys = first_position + queries;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  thread_local std::vector<float> scores;
  scores.resize(int64_t{queries} * keys);
  for (int h = 0; h < heads; ++h) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, queries, keys, hd, scale, q + h * hd,
                q_stride, k + h * hd, kv_stride, 0.0f, scores.data(), keys);
    for (int i = 0; i < queries; ++i) {
      causal_softmax_row(scores.data() + int64_t{i} * keys, first_position + i, keys);
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, queries, hd, keys, 1.0f, scores.data(),
                keys, v + h * hd, kv_stride, 0.0f, out + h * hd, dim);
  }
}

}  // namespace troupe::kernels::cpu

#include <algorithm>
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "kernels/attention.hpp"
#include "kernels/cuda/common.cuh"
#include "kernels/matmul.hpp"

namespace troupe::kernels::cuda {
namespace {

// Attention as cuBLASLt batched GEMMs over the (batch, head) pairs, in head-major copies of q, k
// and v ([batch * heads, seq, head_dim]), with the scores of a chunk of heads materialised: f32
// scores, then bf16 probabilities (zero above the diagonal) with the log-sum-exp per row. The
// backward recomputes the probabilities from it.

// Between token rows and head-major matrices [B, H, T, hd]. A row holds `parts` parts: the
// queries (H heads; the output and its gradient are that part alone), then with qkv the keys
// and the values (KVH heads each). Key/value head j serves query heads [j g, (j + 1) g), g = H /
// KVH: going to heads it is repeated for each of them (HF's repeat_kv), coming back their
// gradients are summed in head order (fixed: deterministic). VEC values per thread: 8 (16-byte
// accesses; head_dim is a multiple of 8, so they stay in one head) or 1.
struct head_geometry {
  int B, T, H, KVH, hd, parts;
  __host__ __device__ int64_t q_width() const { return int64_t{H} * hd; }
  __host__ __device__ int64_t kv_width() const { return int64_t{KVH} * hd; }
  __host__ __device__ int64_t row_width() const { return q_width() + (parts - 1) * kv_width(); }
  __host__ __device__ int64_t per_part() const { return int64_t{B} * T * q_width(); }
};

template <int VEC>
__device__ void load(float* out, const __nv_bfloat16* p) {
  if constexpr (VEC == 8) {
    const uint4 pack = *reinterpret_cast<const uint4*>(p);
    const auto* v = reinterpret_cast<const __nv_bfloat16*>(&pack);
#pragma unroll
    for (int e = 0; e < 8; ++e)
      out[e] = __bfloat162float(v[e]);
  } else {
    out[0] = __bfloat162float(*p);
  }
}

template <int VEC>
__device__ void store(__nv_bfloat16* p, const float* in) {
  if constexpr (VEC == 8) {
    uint4 pack;
    auto* v = reinterpret_cast<__nv_bfloat16*>(&pack);
#pragma unroll
    for (int e = 0; e < 8; ++e)
      v[e] = __float2bfloat16(in[e]);
    *reinterpret_cast<uint4*>(p) = pack;
  } else {
    *p = __float2bfloat16(in[0]);
  }
}

// One thread per VEC values of the head-major matrices, reading the row value it repeats.
template <int VEC>
__global__ void rows_to_heads(__nv_bfloat16* heads, const __nv_bfloat16* rows, head_geometry g) {
  const int64_t i = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) * VEC;
  if (i >= g.per_part() * g.parts) return;
  const int part = static_cast<int>(i / g.per_part());
  const int64_t in_part = i % g.per_part(), bht = in_part / g.hd;
  const int d = static_cast<int>(in_part % g.hd), t = static_cast<int>(bht % g.T),
            h = static_cast<int>(bht / g.T % g.H), b = static_cast<int>(bht / g.T / g.H);
  const int64_t col =
      part == 0 ? int64_t{h} * g.hd + d
                : g.q_width() + (part - 1) * g.kv_width() + int64_t{h / (g.H / g.KVH)} * g.hd + d;
  float v[VEC];
  load<VEC>(v, rows + (int64_t{b} * g.T + t) * g.row_width() + col);
  store<VEC>(heads + i, v);
}

// One thread per VEC values of the rows, summing the query heads that share a key/value head.
template <int VEC>
__global__ void heads_to_rows(__nv_bfloat16* rows, const __nv_bfloat16* heads, head_geometry g) {
  const int64_t i = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) * VEC;
  if (i >= int64_t{g.B} * g.T * g.row_width()) return;
  const int64_t row = i / g.row_width(), col = i % g.row_width();
  const int b = static_cast<int>(row / g.T), t = static_cast<int>(row % g.T);
  auto at = [&](int part, int h, int64_t d) {
    return heads + part * g.per_part() + ((int64_t{b} * g.H + h) * g.T + t) * g.hd + d;
  };
  float sum[VEC];
  if (col < g.q_width()) {
    load<VEC>(sum, at(0, static_cast<int>(col / g.hd), col % g.hd));
  } else {
    const int part = 1 + static_cast<int>((col - g.q_width()) / g.kv_width());
    const int64_t in_part = (col - g.q_width()) % g.kv_width();
    const int group = g.H / g.KVH, first = static_cast<int>(in_part / g.hd) * group;
    load<VEC>(sum, at(part, first, in_part % g.hd));
    for (int h = first + 1; h < first + group; ++h) {
      float v[VEC];
      load<VEC>(v, at(part, h, in_part % g.hd));
#pragma unroll
      for (int e = 0; e < VEC; ++e)
        sum[e] += v[e];
    }
  }
  store<VEC>(rows + i, sum);
}

// Moves `parts` parts of the [B, T, ...] rows to or from head-major matrices (`heads` is
// scratch from the pool; `rows` is the caller's and may be less aligned).
absl::Status reorder(bool to_heads, __nv_bfloat16* heads, const void* rows, int parts,
                     const attention_shape& s, cudaStream_t st) {
  const head_geometry g{s.batch, s.seq, s.heads, s.kv_head_count(), s.head_dim(), parts};
  const int64_t n = to_heads ? g.per_part() * parts : int64_t{g.B} * g.T * g.row_width();
  auto* r = static_cast<__nv_bfloat16*>(const_cast<void*>(rows));
  const bool wide = aligned16(rows);
  const int grid = blocks_for(wide ? n / 8 : n, 256);
  if (wide && to_heads) {
    rows_to_heads<8><<<grid, 256, 0, st>>>(heads, r, g);
  } else if (wide) {
    heads_to_rows<8><<<grid, 256, 0, st>>>(r, heads, g);
  } else if (to_heads) {
    rows_to_heads<1><<<grid, 256, 0, st>>>(heads, r, g);
  } else {
    heads_to_rows<1><<<grid, 256, 0, st>>>(r, heads, g);
  }
  return TROUPE_CUDA_LAUNCH_STATUS();
}

// One warp per score row (head n, query t) of a chunk: p = exp(scale * s - lse) for keys up to t,
// 0 after. Without lse_in the row's log-sum-exp is computed and written to lse_out.
__global__ void causal_softmax(__nv_bfloat16* p, float* lse_out, const float* scores,
                               const float* lse_in, int rows, int T, int64_t ld, float scale) {
  const int64_t warp = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (warp >= rows) return;
  const int t = static_cast<int>(warp % T);
  const float* s = scores + warp * ld;
  __nv_bfloat16* out = p + warp * ld;
  float lse;
  if (lse_in != nullptr) {
    lse = lse_in[warp];
  } else {
    float max = -INFINITY;
    for (int j = lane; j <= t; j += 32)
      max = fmaxf(max, s[j] * scale);
    for (int o = 16; o > 0; o /= 2)
      max = fmaxf(max, __shfl_xor_sync(0xffffffff, max, o));
    float sum = 0.0f;
    for (int j = lane; j <= t; j += 32)
      sum += __expf(s[j] * scale - max);
    lse = max + logf(warp_sum(sum));
    if (lane == 0) lse_out[warp] = lse;
  }
  for (int j = lane; j < T; j += 32)
    out[j] = __float2bfloat16(j <= t ? __expf(s[j] * scale - lse) : 0.0f);
}

// In place over a chunk's probabilities, up to the diagonal (above it p, and so ds, is 0):
// ds = p * (dp - delta_row) * scale. Eight columns a thread, loaded 16 bytes at a time (rows
// padded to ld, a multiple of 8, keep every pack aligned); packs wholly above the diagonal are
// skipped (a row per warp would leave the triangle's short rows idle), and a pack crossing it
// writes its columns above it back unchanged.
__global__ void softmax_backward(__nv_bfloat16* p_then_ds, const float* dp, const float* delta,
                                 int rows, int T, int64_t ld, float scale) {
  const int64_t packs_per_row = ld / 8;
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= rows * packs_per_row) return;
  const int64_t row = i / packs_per_row;
  const int first = static_cast<int>(i % packs_per_row) * 8, t = static_cast<int>(row % T);
  if (first > t) return;
  const int64_t at = row * ld + first;
  uint4 pack = *reinterpret_cast<const uint4*>(p_then_ds + at);
  const float4 dp_low = reinterpret_cast<const float4*>(dp + at)[0],
               dp_high = reinterpret_cast<const float4*>(dp + at)[1];
  const float dps[8] = {dp_low.x,  dp_low.y,  dp_low.z,  dp_low.w,
                        dp_high.x, dp_high.y, dp_high.z, dp_high.w};
  const float row_term = delta[row];
  auto* p = reinterpret_cast<__nv_bfloat16*>(&pack);
#pragma unroll
  for (int e = 0; e < 8; ++e) {
    if (first + e <= t)
      p[e] = __float2bfloat16(__bfloat162float(p[e]) * (dps[e] - row_term) * scale);
  }
  *reinterpret_cast<uint4*>(p_then_ds + at) = pack;
}

// delta[b, h, t] = dout_t . out_t, the softmax backward's row term.
__global__ void delta_kernel(float* delta, const __nv_bfloat16* dout, const __nv_bfloat16* out,
                             int B, int T, int C, int H) {
  const int64_t warp = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (warp >= static_cast<int64_t>(B) * H * T) return;
  const int t = static_cast<int>(warp % T), h = static_cast<int>((warp / T) % H),
            b = static_cast<int>(warp / (static_cast<int64_t>(T) * H));
  const int hd = C / H;
  const int64_t off = (static_cast<int64_t>(b) * T + t) * C + h * hd;
  float s = 0.0f;
  for (int i = lane; i < hd; i += 32) {
    s += __bfloat162float(dout[off + i]) * __bfloat162float(out[off + i]);
  }
  s = warp_sum(s);
  if (lane == 0) delta[warp] = s;
}

absl::Status check_shape(const attention_shape& s) {
  if (s.batch < 1 || s.seq < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("cuda attention: batch ", s.batch, " and seq ", s.seq, " must be positive"));
  }
  if (s.heads < 1 || s.kv_head_count() < 1 || s.heads % s.kv_head_count() != 0) {
    return absl::InvalidArgumentError(absl::StrCat("cuda attention: ", s.kv_head_count(),
                                                   " key/value heads must divide the ", s.heads,
                                                   " query heads"));
  }
  if (s.heads < 1 || s.dim % s.heads != 0 || s.head_dim() % 8 != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cuda attention: head_dim ", s.heads > 0 ? s.head_dim() : 0, " (dim ", s.dim, " / heads ",
        s.heads, ") must be a whole multiple of 8 (cuBLASLt's bf16 alignment)"));
  }
  return absl::OkStatus();
}

// The geometry of one call: head-major matrices of T x hd, score rows padded to ld (a multiple
// of 8 elements, for cuBLASLt's alignment), heads taken `chunk` at a time (each head's scores
// take 6 bytes an element: f32 scores and bf16 probabilities), and the chunk's products.
struct plan {
  int T, hd, heads_total;
  int64_t ld, chunk;
  float scale;
  cudaStream_t stream;
  plan(const attention_shape& s, int64_t scores_limit, cudaStream_t st)
      : T(s.seq),
        hd(s.head_dim()),
        heads_total(s.batch * s.heads),
        ld((s.seq + 7) / 8 * 8),
        chunk(std::clamp<int64_t>(scores_limit / (int64_t{s.seq} * ld * 6), 1,
                                  int64_t{s.batch} * s.heads)),
        scale(rsqrtf(static_cast<float>(hd))),
        stream(st) {}
  int64_t mat() const { return int64_t{T} * hd; }  // one head's q, k or v
  int64_t score_matrix() const { return int64_t{T} * ld; }

  // scores[i] = x[i] y[i]^T (f32) for `n` heads.
  absl::Status head_products(float* scores, const bf16* x, const bf16* y, int n) const {
    const batched_gemm g{.shape = {.m = T, .n = T, .k = hd, .trans_b = true},
                         .lda = hd,
                         .ldb = hd,
                         .ld_out = ld,
                         .batch = n,
                         .stride_a = mat(),
                         .stride_b = mat(),
                         .stride_out = score_matrix()};
    return matmul_batched(scores, tensor::dtype::f32, x, y, g, stream);
  }

  // out[i] = p[i] y[i], or p[i]^T y[i], for `n` heads' probabilities (or their gradients) p.
  absl::Status weighted(bf16* out, const __nv_bfloat16* p, bool transpose_p, const bf16* y,
                        int n) const {
    const batched_gemm g{.shape = {.m = T, .n = hd, .k = T, .trans_a = transpose_p},
                         .lda = ld,
                         .ldb = hd,
                         .ld_out = hd,
                         .batch = n,
                         .stride_a = score_matrix(),
                         .stride_b = mat(),
                         .stride_out = mat()};
    return matmul_batched(out, tensor::dtype::bf16, reinterpret_cast<const bf16*>(p), y, g, stream);
  }

  // probs = softmax(scale q k^T), causal, for `n` heads (scores is the f32 scratch), with the
  // rows' log-sum-exp written to lse_out, or taken from lse_in (the backward's recompute).
  absl::Status probabilities(__nv_bfloat16* probs, float* scores, const bf16* q, const bf16* k,
                             float* lse_out, const float* lse_in, int n) const {
    TROUPE_RETURN_IF_ERROR(head_products(scores, q, k, n));
    causal_softmax<<<blocks_for(int64_t{n} * T * 32, 256), 256, 0, stream>>>(
        probs, lse_out, scores, lse_in, n * T, T, ld, scale);
    return TROUPE_CUDA_LAUNCH_STATUS();
  }
};

}  // namespace

absl::Status attention_forward(bf16* out, float* lse, const bf16* qkv, const attention_shape& s,
                               void* stream, int64_t scores_limit) {
  TROUPE_RETURN_IF_ERROR(check_shape(s));
  cudaStream_t st = to_stream(stream);
  const plan p(s, scores_limit, st);
  // q, and k and v repeated for every query head: three [B, H, T, hd] matrices.
  const int64_t n_out = int64_t{s.batch} * s.seq * s.dim, n_qkv = 3 * n_out;
  device_scratch mem(st);
  TROUPE_ASSIGN_OR_RETURN(__nv_bfloat16 * heads, mem.take<__nv_bfloat16>(n_qkv));
  TROUPE_ASSIGN_OR_RETURN(__nv_bfloat16 * out_heads, mem.take<__nv_bfloat16>(n_out));
  TROUPE_ASSIGN_OR_RETURN(float* scores, mem.take<float>(p.chunk * p.score_matrix()));
  TROUPE_ASSIGN_OR_RETURN(__nv_bfloat16 * probs,
                          mem.take<__nv_bfloat16>(p.chunk * p.score_matrix()));
  TROUPE_RETURN_IF_ERROR(reorder(true, heads, qkv, 3, s, st));
  const auto* all = reinterpret_cast<const bf16*>(heads);
  for (int64_t first = 0; first < p.heads_total; first += p.chunk) {
    const int n = static_cast<int>(std::min<int64_t>(p.chunk, p.heads_total - first));
    const bf16 *q = all + first * p.mat(), *k = q + n_out, *v = k + n_out;
    TROUPE_RETURN_IF_ERROR(p.probabilities(probs, scores, q, k, lse + first * p.T, nullptr, n));
    TROUPE_RETURN_IF_ERROR(
        p.weighted(reinterpret_cast<bf16*>(out_heads) + first * p.mat(), probs, false, v, n));
  }
  return reorder(false, out_heads, out, 1, s, st);
}

absl::Status attention_backward(bf16* dqkv, const bf16* dout, const bf16* qkv, const bf16* out,
                                const float* lse, const attention_shape& s, void* stream,
                                int64_t scores_limit) {
  TROUPE_RETURN_IF_ERROR(check_shape(s));
  cudaStream_t st = to_stream(stream);
  const plan p(s, scores_limit, st);
  const int64_t n_out = int64_t{s.batch} * s.seq * s.dim, n_qkv = 3 * n_out;
  const int64_t rows = int64_t{s.batch} * s.heads * s.seq;
  device_scratch mem(st);
  TROUPE_ASSIGN_OR_RETURN(__nv_bfloat16 * heads, mem.take<__nv_bfloat16>(n_qkv));
  TROUPE_ASSIGN_OR_RETURN(__nv_bfloat16 * dout_heads, mem.take<__nv_bfloat16>(n_out));
  TROUPE_ASSIGN_OR_RETURN(__nv_bfloat16 * dheads, mem.take<__nv_bfloat16>(n_qkv));
  TROUPE_ASSIGN_OR_RETURN(float* delta, mem.take<float>(rows));
  TROUPE_ASSIGN_OR_RETURN(float* scores, mem.take<float>(p.chunk * p.score_matrix()));
  TROUPE_ASSIGN_OR_RETURN(__nv_bfloat16 * probs,
                          mem.take<__nv_bfloat16>(p.chunk * p.score_matrix()));
  delta_kernel<<<blocks_for(rows * 32, 256), 256, 0, st>>>(delta, dev(dout), dev(out), s.batch,
                                                           s.seq, s.dim, s.heads);
  TROUPE_RETURN_IF_ERROR(TROUPE_CUDA_LAUNCH_STATUS());
  TROUPE_RETURN_IF_ERROR(reorder(true, heads, qkv, 3, s, st));
  TROUPE_RETURN_IF_ERROR(reorder(true, dout_heads, dout, 1, s, st));
  const auto* all = reinterpret_cast<const bf16*>(heads);
  auto* d_all = reinterpret_cast<bf16*>(dheads);
  for (int64_t first = 0; first < p.heads_total; first += p.chunk) {
    const int n = static_cast<int>(std::min<int64_t>(p.chunk, p.heads_total - first));
    const bf16 *q = all + first * p.mat(), *k = q + n_out, *v = k + n_out;
    const bf16* d_o = reinterpret_cast<const bf16*>(dout_heads) + first * p.mat();
    bf16 *dq = d_all + first * p.mat(), *dk = dq + n_out, *dv = dk + n_out;
    TROUPE_RETURN_IF_ERROR(
        p.probabilities(probs, scores, q, k, nullptr, lse + first * p.T, n));  // again
    // dv = p^T dout; dp = dout v^T (into the scores' memory); ds = p (dp - delta) scale, in
    // the probabilities' place; dq = ds k; dk = ds^T q.
    TROUPE_RETURN_IF_ERROR(p.weighted(dv, probs, true, d_o, n));
    TROUPE_RETURN_IF_ERROR(p.head_products(scores, d_o, v, n));
    softmax_backward<<<blocks_for(int64_t{n} * p.T * (p.ld / 8), 256), 256, 0, st>>>(
        probs, scores, delta + first * p.T, n * p.T, p.T, p.ld, p.scale);
    TROUPE_RETURN_IF_ERROR(TROUPE_CUDA_LAUNCH_STATUS());
    TROUPE_RETURN_IF_ERROR(p.weighted(dq, probs, false, k, n));
    TROUPE_RETURN_IF_ERROR(p.weighted(dk, probs, true, q, n));
  }
  return reorder(false, dheads, dqkv, 3, s, st);
}

}  // namespace troupe::kernels::cuda

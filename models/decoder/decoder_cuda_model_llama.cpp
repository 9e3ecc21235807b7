// decoder_cuda_model's blocks of the Llama family (Llama, Mistral, Qwen 2 and 3), as
// decoder_cpu_stage_llama.cpp computes them, in bf16 with f32 accumulation: RMSNorm; q, k and v
// in one GEMM (the layout keeps their weights and biases back to back) into rows of [q | k | v];
// Qwen 3's per-head q/k RMSNorm; RoPE; grouped-query attention; the output projection; the
// residual; RMSNorm; gate and up in one GEMM into rows of [gate | up]; down(silu(gate) * up); the
// residual. Weights are nn.Linear's [out, in].

#include "kernels/attention.hpp"
#include "kernels/matmul.hpp"
#include "kernels/residual.hpp"
#include "kernels/rmsnorm.hpp"
#include "kernels/rope.hpp"
#include "kernels/swiglu.hpp"
#include "models/decoder/decoder_cuda_model.hpp"
#include "runtime/tensor/cuda_memory.hpp"

namespace troupe::models {

namespace cuda = kernels::cuda;
using kernels::gemm;
using tensor::bf16;
using tensor::dtype;

namespace {

// One block's widths: tokens, model, head, q, k (or v), MLP hidden units, and a [q | k | v] row.
struct llama_block_widths {
  int N, C, D, heads, kv_heads, Q, KV, F;
  [[nodiscard]] int row() const { return Q + 2 * KV; }
  [[nodiscard]] kernels::attention_shape attention(int batch, int seq) const {
    return {batch, seq, Q, heads, kv_heads};
  }
  // Qwen 3's norms: each token's query heads, or its key heads, inside its [q | k | v] row.
  [[nodiscard]] cuda::norm_rows query_heads() const {
    return {.tokens = N, .dim = D, .per_token = heads, .stride = row()};
  }
  [[nodiscard]] cuda::norm_rows key_heads() const {
    return {.tokens = N, .dim = D, .per_token = kv_heads, .stride = row()};
  }
};

llama_block_widths llama_widths_of(const decoder_config& c, int rows) {
  return {rows,        c.dim,        c.head_size(), c.heads, c.kv_head_count(),
          c.q_width(), c.kv_width(), c.ffn_width()};
}

}  // namespace

absl::Status decoder_cuda_model::llama_block_forward(int layer, int batch, int seq, const bf16* in,
                                                     bf16* out) {
  const decoder_config& c = layout_.config();
  const auto& o = layout_.block(layer);
  auto& a = blocks_[layer];
  const llama_block_widths w = llama_widths_of(c, batch * seq);
  const int N = w.N, C = w.C, R = w.row(), F = w.F;
  const bf16* p = weights_.data<bf16>();
  auto bias = [&](int64_t at) { return at >= 0 ? p + at : nullptr; };
  bf16 *qkv = a.qkv.data<bf16>(), *tmp = dtmp_.data<bf16>();
  const float *cos = rope_cos_.data<float>(), *sin = rope_sin_.data<float>();
  void* st = cuda::default_stream;
  const cuda::norm_rows rows{.tokens = N, .dim = C};

  TROUPE_RETURN_IF_ERROR(cuda::rmsnorm_forward(a.ln1.data<bf16>(), a.ln1_rstd.data<float>(), in,
                                               p + o.ln1_w, rows, c.norm_eps, st));
  TROUPE_RETURN_IF_ERROR(cuda::matmul(qkv, dtype::bf16, a.ln1.data<bf16>(), p + o.q_w, bias(o.q_b),
                                      gemm{N, R, C, false, true}, st));
  if (c.qk_norm) {  // each head's query and key over its D values; the raw rows kept
    TROUPE_RETURN_IF_ERROR(tensor::cuda_copy(a.qk_raw.raw(), qkv, int64_t{N} * R * sizeof(bf16),
                                             tensor::copy_kind::device_to_device));
    float* rstd = a.qk_rstd.data<float>();
    TROUPE_RETURN_IF_ERROR(
        cuda::rmsnorm_forward(qkv, rstd, qkv, p + o.q_norm, w.query_heads(), c.norm_eps, st));
    TROUPE_RETURN_IF_ERROR(cuda::rmsnorm_forward(qkv + w.Q, rstd + int64_t{N} * w.heads, qkv + w.Q,
                                                 p + o.k_norm, w.key_heads(), c.norm_eps, st));
  }
  TROUPE_RETURN_IF_ERROR(cuda::rope_forward(qkv, R, N, w.heads, w.D, cos, sin, st));
  TROUPE_RETURN_IF_ERROR(cuda::rope_forward(qkv + w.Q, R, N, w.kv_heads, w.D, cos, sin, st));
  TROUPE_RETURN_IF_ERROR(cuda::attention_forward(a.atty.data<bf16>(), a.lse.data<float>(), qkv,
                                                 w.attention(batch, seq), st));
  TROUPE_RETURN_IF_ERROR(cuda::matmul(tmp, dtype::bf16, a.atty.data<bf16>(), p + o.o_w, bias(o.o_b),
                                      gemm{N, C, w.Q, false, true}, st));
  TROUPE_RETURN_IF_ERROR(cuda::residual_forward(a.mid.data<bf16>(), in, tmp, int64_t{N} * C, st));

  TROUPE_RETURN_IF_ERROR(cuda::rmsnorm_forward(a.ln2.data<bf16>(), a.ln2_rstd.data<float>(),
                                               a.mid.data<bf16>(), p + o.ln2_w, rows, c.norm_eps,
                                               st));
  TROUPE_RETURN_IF_ERROR(cuda::matmul(a.fc.raw(), dtype::bf16, a.ln2.data<bf16>(), p + o.gate_w,
                                      nullptr, gemm{N, 2 * F, C, false, true}, st));
  TROUPE_RETURN_IF_ERROR(cuda::swiglu_forward(a.fc_gelu.data<bf16>(), a.fc.data<bf16>(), N, F, st));
  TROUPE_RETURN_IF_ERROR(cuda::matmul(tmp, dtype::bf16, a.fc_gelu.data<bf16>(), p + o.down_w,
                                      nullptr, gemm{N, C, F, false, true}, st));
  return cuda::residual_forward(out, a.mid.data<bf16>(), tmp, int64_t{N} * C, st);
}

// dx_ holds d(out) and becomes d(in): each norm's backward adds its input's gradient to it, the
// residual's own path.
absl::Status decoder_cuda_model::llama_block_backward(int layer, int batch, int seq,
                                                      const bf16* in) {
  const decoder_config& c = layout_.config();
  const auto& o = layout_.block(layer);
  auto& a = blocks_[layer];
  const llama_block_widths w = llama_widths_of(c, batch * seq);
  const int N = w.N, C = w.C, R = w.row(), F = w.F;
  const bf16* p = weights_.data<bf16>();
  float* g = grads_.data<float>();
  bf16 *dx = dx_.data<bf16>(), *dtmp = dtmp_.data<bf16>(), *dqkv = dqkv_.data<bf16>();
  bf16* dfc = dfc_.data<bf16>();          // d [gate | up]
  bf16* dact = dfc + int64_t{N} * 2 * F;  // d silu(gate) up
  const float *cos = rope_cos_.data<float>(), *sin = rope_sin_.data<float>();
  void* st = cuda::default_stream;
  const cuda::norm_rows rows{.tokens = N, .dim = C};

  // MLP: out = mid + (silu(gate) * up) @ down^T; [gate | up] = ln2 @ [gate; up]^T.
  TROUPE_RETURN_IF_ERROR(
      cuda::matmul(dact, dtype::bf16, dx, p + o.down_w, nullptr, gemm{N, F, C}, st));
  TROUPE_RETURN_IF_ERROR(cuda::matmul(g + o.down_w, dtype::f32, dx, a.fc_gelu.data<bf16>(), nullptr,
                                      gemm{C, F, N, true, false, true}, st));
  TROUPE_RETURN_IF_ERROR(cuda::swiglu_backward(dfc, a.fc.data<bf16>(), dact, N, F, st));
  TROUPE_RETURN_IF_ERROR(
      cuda::matmul(dtmp, dtype::bf16, dfc, p + o.gate_w, nullptr, gemm{N, C, 2 * F}, st));
  TROUPE_RETURN_IF_ERROR(cuda::matmul(g + o.gate_w, dtype::f32, dfc, a.ln2.data<bf16>(), nullptr,
                                      gemm{2 * F, C, N, true, false, true}, st));
  TROUPE_RETURN_IF_ERROR(cuda::rmsnorm_backward(dx, g + o.ln2_w, dtmp, a.mid.data<bf16>(),
                                                p + o.ln2_w, a.ln2_rstd.data<float>(), rows, st));

  // Attention: mid = in + attention(rope(norm(ln1 @ [q; k; v]^T))) @ o^T.
  TROUPE_RETURN_IF_ERROR(
      cuda::matmul(dtmp, dtype::bf16, dx, p + o.o_w, nullptr, gemm{N, w.Q, C}, st));
  TROUPE_RETURN_IF_ERROR(cuda::matmul(g + o.o_w, dtype::f32, dx, a.atty.data<bf16>(), nullptr,
                                      gemm{C, w.Q, N, true, false, true}, st));
  if (o.o_b >= 0) TROUPE_RETURN_IF_ERROR(cuda::bias_backward(g + o.o_b, dx, N, C, st));
  TROUPE_RETURN_IF_ERROR(cuda::attention_backward(dqkv, dtmp, a.qkv.data<bf16>(),
                                                  a.atty.data<bf16>(), a.lse.data<float>(),
                                                  w.attention(batch, seq), st));
  TROUPE_RETURN_IF_ERROR(cuda::rope_backward(dqkv, R, N, w.heads, w.D, cos, sin, st));
  TROUPE_RETURN_IF_ERROR(cuda::rope_backward(dqkv + w.Q, R, N, w.kv_heads, w.D, cos, sin, st));
  if (c.qk_norm) {  // d raw q and k (into dqk_, then over their columns of dqkv)
    bf16* draw = dqk_.data<bf16>();
    const bf16* raw = a.qk_raw.data<bf16>();
    const float* rstd = a.qk_rstd.data<float>();
    TROUPE_RETURN_IF_ERROR(tensor::cuda_zero(draw, int64_t{N} * R * sizeof(bf16)));
    TROUPE_RETURN_IF_ERROR(cuda::rmsnorm_backward(draw, g + o.q_norm, dqkv, raw, p + o.q_norm, rstd,
                                                  w.query_heads(), st));
    TROUPE_RETURN_IF_ERROR(cuda::rmsnorm_backward(draw + w.Q, g + o.k_norm, dqkv + w.Q, raw + w.Q,
                                                  p + o.k_norm, rstd + int64_t{N} * w.heads,
                                                  w.key_heads(), st));
    TROUPE_RETURN_IF_ERROR(tensor::cuda_copy_rows(dqkv, R * sizeof(bf16), draw, R * sizeof(bf16),
                                                  (w.Q + w.KV) * sizeof(bf16), N));
  }
  TROUPE_RETURN_IF_ERROR(
      cuda::matmul(dtmp, dtype::bf16, dqkv, p + o.q_w, nullptr, gemm{N, C, R}, st));
  TROUPE_RETURN_IF_ERROR(cuda::matmul(g + o.q_w, dtype::f32, dqkv, a.ln1.data<bf16>(), nullptr,
                                      gemm{R, C, N, true, false, true}, st));
  if (o.q_b >= 0) TROUPE_RETURN_IF_ERROR(cuda::bias_backward(g + o.q_b, dqkv, N, R, st));
  return cuda::rmsnorm_backward(dx, g + o.ln1_w, dtmp, in, p + o.ln1_w, a.ln1_rstd.data<float>(),
                                rows, st);
}

}  // namespace troupe::models

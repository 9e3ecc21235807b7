// decoder_cpu_stage's blocks of the Llama family (Llama, Mistral, Qwen 2 and 3), as Hugging Face's
// LlamaDecoderLayer computes them: RMSNorm; q, k and v in one GEMM (the layout keeps their
// weights back to back), with Qwen 2's biases and Qwen 3's per-head q/k RMSNorm; RoPE;
// grouped-query attention; the output projection; the residual; RMSNorm; gate and up in one
// GEMM, down(silu(gate) * up); the residual. Weights are nn.Linear's [out, in]. With tensor
// parallelism a rank holds its heads' q, k and v rows and its share of the MLP's hidden units,
// and the output projections sum the ranks' parts (Megatron).

#include <cstring>

#include "kernels/attention.hpp"
#include "kernels/matmul.hpp"
#include "kernels/residual.hpp"
#include "kernels/rmsnorm.hpp"
#include "kernels/rope.hpp"
#include "kernels/swiglu.hpp"
#include "models/decoder/decoder_cpu_stage.hpp"

namespace troupe::models {

namespace k = kernels::cpu;
using kernels::gemm;

namespace {

// This rank's widths of one block.
struct llama_widths {
  int N, C, D, heads, kv_heads, Q, KV, F;
  [[nodiscard]] int qkv() const { return Q + 2 * KV; }
  [[nodiscard]] kernels::attention_shape attention(int batch, int seq) const {
    return {batch, seq, Q, heads, kv_heads};
  }
};

llama_widths widths_of(const decoder_layout& layout, int rows) {
  return {rows,
          layout.config().dim,
          layout.config().head_size(),
          layout.local_heads(),
          layout.local_kv_heads(),
          layout.local_q_width(),
          layout.local_kv_width(),
          layout.local_ffn()};
}

}  // namespace

void decoder_cpu_stage::llama_block_forward(const float* params, int layer, const float* in,
                                            float* out) {
  const decoder_config& c = layout_.config();
  const auto& o = layout_.block(layer);
  auto& a = activations(layer);
  const llama_widths w = widths_of(layout_, batch_ * seq_);
  const int N = w.N, C = w.C, R = w.qkv(), F = w.F;
  auto at = [&](int64_t offset) { return offset >= 0 ? params + offset : nullptr; };
  float* tmp = dtmp_.data();

  k::rmsnorm_forward(a.ln1.data(), a.ln1_rstd.data(), in, params + o.ln1_w, N, C, c.norm_eps);
  k::matmul(a.qkv.data(), a.ln1.data(), params + o.q_w, at(o.q_b), gemm{N, R, C, false, true});
  if (c.qk_norm) {  // each head's query and key over its D floats; the raw ones kept
    const int stats = w.heads + w.kv_heads;
    for (int r = 0; r < N; ++r) {
      float* q = a.qkv.data() + int64_t{r} * R;
      std::memcpy(a.qk_raw.data() + int64_t{r} * (w.Q + w.KV), q, (w.Q + w.KV) * sizeof(float));
      float* rstd = a.qk_rstd.data() + int64_t{r} * stats;
      k::rmsnorm_forward(q, rstd, q, params + o.q_norm, w.heads, w.D, c.norm_eps);
      k::rmsnorm_forward(q + w.Q, rstd + w.heads, q + w.Q, params + o.k_norm, w.kv_heads, w.D,
                         c.norm_eps);
    }
  }
  k::rope_forward(a.qkv.data(), R, N, w.heads, w.D, rope_cos_.data(), rope_sin_.data());
  k::rope_forward(a.qkv.data() + w.Q, R, N, w.kv_heads, w.D, rope_cos_.data(), rope_sin_.data());
  k::attention_forward(a.atty.data(), a.probs.data(), a.qkv.data(), w.attention(batch_, seq_),
                       pool_);
  row_parallel(tmp, a.atty.data(), params + o.o_w, at(o.o_b), N, w.Q, true);
  k::residual_forward(a.mid.data(), in, tmp, int64_t{N} * C);

  k::rmsnorm_forward(a.ln2.data(), a.ln2_rstd.data(), a.mid.data(), params + o.ln2_w, N, C,
                     c.norm_eps);
  k::matmul(a.fc.data(), a.ln2.data(), params + o.gate_w, nullptr, gemm{N, 2 * F, C, false, true});
  for (int r = 0; r < N; ++r) {  // each token's [gate | up]
    const float* gate = a.fc.data() + int64_t{r} * 2 * F;
    k::swiglu_forward(a.fc_gelu.data() + int64_t{r} * F, gate, gate + F, F);
  }
  row_parallel(tmp, a.fc_gelu.data(), params + o.down_w, nullptr, N, F, true);
  k::residual_forward(out, a.mid.data(), tmp, int64_t{N} * C);
}

void decoder_cpu_stage::llama_block_input_grads(const float* params, float* grads, int layer,
                                                linear_output_grads& d) {
  const decoder_config& c = layout_.config();
  const auto& o = layout_.block(layer);
  const int i = layer - layout_.range().first;
  auto& a = activations(layer);
  const llama_widths w = widths_of(layout_, batch_ * seq_);
  const int N = w.N, C = w.C, R = w.qkv(), F = w.F;
  const bool split = layout_.tp().size > 1;
  float* dx = dx_.data();
  float* dtmp = dtmp_.data();
  float* scratch = block_scratch_.data();

  // MLP: out = mid + (silu(gate) * up) @ down^T; [gate | up] = ln2 @ [gate; up]^T.
  std::memcpy(d.mlp_out.data(), dx, int64_t{N} * C * sizeof(float));
  k::matmul(scratch, dx, params + o.down_w, nullptr, gemm{N, F, C});
  for (int r = 0; r < N; ++r) {
    const float* gate = a.fc.data() + int64_t{r} * 2 * F;
    float* dgate = d.fc.data() + int64_t{r} * 2 * F;
    k::swiglu_backward(dgate, dgate + F, gate, gate + F, scratch + int64_t{r} * F, F);
  }
  k::matmul(dtmp, d.fc.data(), params + o.gate_w, nullptr, gemm{N, C, 2 * F});
  if (split) tensor_sum(dtmp, int64_t{N} * C);
  k::rmsnorm_backward(dx, grads + o.ln2_w, dtmp, a.mid.data(), params + o.ln2_w, a.ln2_rstd.data(),
                      N, C);

  // Attention: mid = in + attention(rope(norm(ln1 @ [q; k; v]^T))) @ o^T.
  std::memcpy(d.attn_out.data(), dx, int64_t{N} * C * sizeof(float));
  k::matmul(scratch, dx, params + o.o_w, nullptr, gemm{N, w.Q, C});
  k::attention_backward(d.qkv.data(), scratch, a.qkv.data(), a.probs.data(),
                        w.attention(batch_, seq_), pool_);
  k::rope_backward(d.qkv.data(), R, N, w.heads, w.D, rope_cos_.data(), rope_sin_.data());
  k::rope_backward(d.qkv.data() + w.Q, R, N, w.kv_heads, w.D, rope_cos_.data(), rope_sin_.data());
  if (c.qk_norm) qk_norm_backward(params, grads, layer, d);
  k::matmul(dtmp, d.qkv.data(), params + o.q_w, nullptr, gemm{N, C, R});
  if (split) tensor_sum(dtmp, int64_t{N} * C);
  k::rmsnorm_backward(dx, grads + o.ln1_w, dtmp, x_[i].data(), params + o.ln1_w, a.ln1_rstd.data(),
                      N, C);
}

// Through Qwen 3's per-head q and k norms, in place in d.qkv: each token's d(raw q and k). Their
// weights' gradients of this batch are summed over a tensor-parallel group (each rank norms only
// its heads) before they are added.
void decoder_cpu_stage::qk_norm_backward(const float* params, float* grads, int layer,
                                         linear_output_grads& d) {
  const auto& o = layout_.block(layer);
  const auto& a = activations(layer);
  const llama_widths w = widths_of(layout_, batch_ * seq_);
  const int R = w.qkv(), QK = w.Q + w.KV, stats = w.heads + w.kv_heads;
  float* din = block_scratch_.data();
  std::vector<float>& dnorm = qk_norm_grads_;  // d q_norm, d k_norm of this batch
  std::fill(dnorm.begin(), dnorm.end(), 0.0f);
  for (int r = 0; r < w.N; ++r) {
    float* dq = d.qkv.data() + int64_t{r} * R;
    const float* raw = a.qk_raw.data() + int64_t{r} * QK;
    const float* rstd = a.qk_rstd.data() + int64_t{r} * stats;
    std::fill(din, din + QK, 0.0f);
    k::rmsnorm_backward(din, dnorm.data(), dq, raw, params + o.q_norm, rstd, w.heads, w.D);
    k::rmsnorm_backward(din + w.Q, dnorm.data() + w.D, dq + w.Q, raw + w.Q, params + o.k_norm,
                        rstd + w.heads, w.kv_heads, w.D);
    std::memcpy(dq, din, QK * sizeof(float));
  }
  if (layout_.tp().size > 1) tensor_sum(dnorm.data(), 2 * w.D);
  k::accumulate(grads + o.q_norm, dnorm.data(), w.D);
  k::accumulate(grads + o.k_norm, dnorm.data() + w.D, w.D);
}

// d weight = d output^T @ input ([out, in], as the weights) and d bias = the sum of d output
// over the tokens, for the linear maps; their inputs are the activations the forward kept.
void decoder_cpu_stage::llama_block_weight_grads(float* grads, int layer,
                                                 const linear_output_grads& d) {
  const auto& o = layout_.block(layer);
  const auto& a = activations(layer);
  const llama_widths w = widths_of(layout_, batch_ * seq_);
  const int N = w.N, C = w.C, R = w.qkv(), F = w.F;
  k::matmul(grads + o.down_w, d.mlp_out.data(), a.fc_gelu.data(), nullptr,
            gemm{C, F, N, true, false, true});
  k::matmul(grads + o.gate_w, d.fc.data(), a.ln2.data(), nullptr,
            gemm{2 * F, C, N, true, false, true});
  k::matmul(grads + o.o_w, d.attn_out.data(), a.atty.data(), nullptr,
            gemm{C, w.Q, N, true, false, true});
  if (o.o_b >= 0) k::bias_backward(grads + o.o_b, d.attn_out.data(), N, C);
  k::matmul(grads + o.q_w, d.qkv.data(), a.ln1.data(), nullptr, gemm{R, C, N, true, false, true});
  if (o.q_b >= 0) k::bias_backward(grads + o.q_b, d.qkv.data(), N, R);
}

}  // namespace troupe::models

#include "models/decoder/decoder_cpu_stage.hpp"

#include <algorithm>
#include <cstring>

#include "kernels/cross_entropy.hpp"
#include "kernels/embedding.hpp"
#include "kernels/entropy.hpp"
#include "kernels/gelu.hpp"
#include "kernels/layernorm.hpp"
#include "kernels/matmul.hpp"
#include "kernels/residual.hpp"
#include "kernels/rmsnorm.hpp"
#include "kernels/rope.hpp"
#include "models/decoder/rope_frequencies.hpp"
#include "runtime/base/status.hpp"

namespace troupe::models {

namespace k = kernels::cpu;
using kernels::gemm;

namespace {

// The floats of each of a block's activations for N tokens of `max_batch` sequences, by family
// (decoder_cpu_stage::block_activations), on this tensor-parallel rank.
struct block_sizes {
  int64_t ln = 0, mean = 0, rstd = 0, qkv = 0, qk_raw = 0, qk_rstd = 0, probs = 0, atty = 0, fc = 0,
          act = 0;

  block_sizes(const decoder_layout& layout, int max_batch) {
    const decoder_config& c = layout.config();
    const int64_t N = int64_t{max_batch} * c.ctx;
    ln = N * c.dim, rstd = N;
    probs = int64_t{max_batch} * layout.local_heads() * c.ctx * c.ctx;
    if (c.family == decoder_family::gpt2) {
      const int64_t L = layout.local_dim();
      mean = N, qkv = N * 3 * L, atty = N * L, fc = N * 4 * L, act = N * 4 * L;
      return;
    }
    const int64_t Q = layout.local_q_width(), KV = layout.local_kv_width();
    qkv = N * (Q + 2 * KV), atty = N * Q, fc = N * 2 * layout.local_ffn(),
    act = N * layout.local_ffn();
    if (c.qk_norm) {
      qk_raw = N * (Q + KV), qk_rstd = N * (layout.local_heads() + layout.local_kv_heads());
    }
  }
  // One block's: both norms' (input, output, statistics), the residual between, the rest.
  [[nodiscard]] int64_t block() const {
    return 3 * ln + 2 * (mean + rstd) + qkv + qk_raw + qk_rstd + probs + atty + fc + act;
  }
  // The gradients of its linear maps' outputs (decoder_cpu_stage::linear_output_grads).
  [[nodiscard]] int64_t linear_grads() const { return 2 * ln + fc + qkv; }
};

void size_linear_grads(auto& d, const block_sizes& z) {
  d.mlp_out.resize(z.ln), d.fc.resize(z.fc), d.attn_out.resize(z.ln), d.qkv.resize(z.qkv);
}

// The RoPE tables' floats (cosines and sines) for N tokens; 0 for GPT-2.
int64_t rope_floats(const decoder_config& c, int64_t N) {
  return c.family == decoder_family::llama ? N * c.head_size() : 0;
}

// out[i, :] += bias for each of the m rows.
void add_bias(float* out, const float* bias, int m, int n) {
  for (int i = 0; i < m; ++i)
    k::accumulate(out + int64_t{i} * n, bias, n);
}

}  // namespace

decoder_cpu_stage::decoder_cpu_stage(const decoder_layout& layout, int max_batch,
                                     kernels::cpu::thread_pool* pool, int checkpoint_segment,
                                     bool defer_weight_gradients)
    : layout_(layout), pool_(pool) {
  const decoder_config& c = layout.config();
  const int64_t N = int64_t{max_batch} * c.ctx, C = c.dim;
  const int blocks = layout.range().last - layout.range().first;
  segment_ = checkpoint_segment > 0 && checkpoint_segment < blocks ? checkpoint_segment : 0;
  x_.assign(blocks + 1, std::vector<float>(N * C));
  blocks_.resize(segment_ > 0 ? segment_ : blocks);
  const block_sizes z(layout, max_batch);
  for (auto& b : blocks_) {
    b.ln1.resize(z.ln), b.ln1_mean.resize(z.mean), b.ln1_rstd.resize(z.rstd), b.qkv.resize(z.qkv);
    b.qk_raw.resize(z.qk_raw), b.qk_rstd.resize(z.qk_rstd), b.probs.resize(z.probs);
    b.atty.resize(z.atty), b.mid.resize(z.ln), b.ln2.resize(z.ln), b.ln2_mean.resize(z.mean);
    b.ln2_rstd.resize(z.rstd), b.fc.resize(z.fc), b.fc_gelu.resize(z.act);
  }
  if (c.family == decoder_family::llama) {
    inv_freq_ = rope_inverse_frequencies(c);
    rope_cos_.resize(rope_floats(c, N) / 2), rope_sin_.resize(rope_floats(c, N) / 2);
    block_scratch_.resize(
        N * std::max(layout.local_ffn(), layout.local_q_width() + layout.local_kv_width()));
    if (c.qk_norm) qk_norm_grads_.resize(2 * c.head_size());
  }
  if (layout.range().has_head(c)) {
    lnf_.resize(N * C), lnf_mean_.resize(z.mean), lnf_rstd_.resize(N);
    if (layout.has_value_head()) {
      values_.resize(N);
    } else {
      probs_.resize(N * layout.local_vocab()), losses_.resize(N), targets_.resize(N);
      if (layout.tp().size > 1) vocab_scratch_.resize((layout.tp().size + 2) * N);
    }
  }
  tokens_.resize(N), positions_.resize(N);
  dx_.resize(N * C), dtmp_.resize(N * C);
  size_linear_grads(dlinear_, z);
  if (defer_weight_gradients) {
    TROUPE_CHECK(segment_ == 0);  // the weight half needs every block's activations
    deferred_.resize(blocks);
    for (auto& d : deferred_)
      size_linear_grads(d, z);
  }
}

loss_sum decoder_cpu_stage::forward(const float* params, int batch, int seq, const int32_t* tokens,
                                    const float* hidden, const int32_t* targets,
                                    float temperature) {
  const decoder_config& c = layout_.config();
  batch_ = batch;
  seq_ = seq;
  temperature_ = temperature;
  const int N = batch * seq, C = c.dim;
  for (int i = 0; i < N; ++i)
    positions_[i] = i % seq;
  const bool gpt2 = c.family == decoder_family::gpt2;
  if (!gpt2) {  // RoPE's angles, shared by every block's queries and keys
    k::rope_angles(rope_cos_.data(), rope_sin_.data(), positions_.data(), N, c.head_size(),
                   inv_freq_.data());
  }
  if (layout_.range().has_embedding()) {
    std::memcpy(tokens_.data(), tokens, N * sizeof(int32_t));
    if (layout_.tp().size > 1 || !gpt2) {  // this rank's rows (all without tp), summed
      k::embedding_part_forward(x_[0].data(), tokens, N, params + layout_.wte(),
                                layout_.vocab_first(), layout_.local_vocab(), C);
      if (layout_.tp().size > 1) tensor_sum(x_[0].data(), int64_t{N} * C);
      if (gpt2) k::add_positions(x_[0].data(), positions_.data(), N, params + layout_.wpe(), C);
    } else {
      k::embedding_forward(x_[0].data(), tokens, positions_.data(), N, params + layout_.wte(),
                           params + layout_.wpe(), C);
    }
  } else {
    std::memcpy(x_[0].data(), hidden, int64_t{N} * C * sizeof(float));
  }
  for (int l = layout_.range().first; l < layout_.range().last; ++l) {
    const int i = l - layout_.range().first;
    if (hooks_.acquire) hooks_.acquire(l, false);
    block_forward(params, l, x_[i].data(), x_[i + 1].data());
    if (hooks_.release) hooks_.release(l, false);
  }
  loss_sum loss;
  if (!layout_.range().has_head(c)) return loss;
  final_norm_forward(params);
  if (layout_.has_value_head()) {  // values = ln_f(x) @ classifier^T + bias
    k::matmul(values_.data(), lnf_.data(), params + layout_.value_w(), params + layout_.value_b(),
              gemm{N, 1, C, false, true});
    return loss;
  }
  const int V = layout_.local_vocab();
  k::matmul(probs_.data(), lnf_.data(), params + layout_.head_weight(), nullptr,
            gemm{N, V, C, false, true, false});
  if (temperature != 1.0f) {
    const float inv = 1.0f / temperature;
    for (int64_t i = 0; i < int64_t{N} * V; ++i)
      probs_[i] *= inv;
  }
  std::memcpy(targets_.data(), targets, N * sizeof(int32_t));
  if (layout_.tp().size > 1) {  // this rank's columns of the vocabulary
    k::vocab_parallel_cross_entropy_forward(
        losses_.data(), probs_.data(), probs_.data(), targets, N, V, layout_.vocab_first(),
        layout_.tp().rank, layout_.tp().size, vocab_scratch_.data(),
        [this](float* data, int64_t n) { tensor_sum(data, n); });
  } else {
    k::cross_entropy_forward(losses_.data(), probs_.data(), probs_.data(), targets, N, V);
  }
  for (int i = 0; i < N; ++i) {
    if (targets[i] < 0) continue;
    loss.sum += losses_[i];
    ++loss.tokens;
  }
  return loss;
}

int64_t decoder_cpu_stage::activation_bytes() const {
  int64_t floats = 0;
  for (const auto& x : x_)
    floats += static_cast<int64_t>(x.size());
  for (const auto& b : blocks_) {
    for (const auto* v : {&b.ln1, &b.ln1_mean, &b.ln1_rstd, &b.qkv, &b.qk_raw, &b.qk_rstd, &b.probs,
                          &b.atty, &b.mid, &b.ln2, &b.ln2_mean, &b.ln2_rstd, &b.fc, &b.fc_gelu}) {
      floats += static_cast<int64_t>(v->size());
    }
  }
  for (const auto* v :
       {&lnf_, &lnf_mean_, &lnf_rstd_, &probs_, &losses_, &values_, &rope_cos_, &rope_sin_})
    floats += static_cast<int64_t>(v->size());
  for (const auto& d : deferred_) {
    for (const auto* v : {&d.mlp_out, &d.fc, &d.attn_out, &d.qkv})
      floats += static_cast<int64_t>(v->size());
  }
  return floats * static_cast<int64_t>(sizeof(float));
}

int64_t decoder_cpu_stage::activation_bytes(const decoder_layout& layout, int max_batch,
                                            int checkpoint_segment, bool defer_weight_gradients) {
  const decoder_config& c = layout.config();
  const int64_t N = int64_t{max_batch} * c.ctx, C = c.dim;
  const int blocks = layout.range().last - layout.range().first;
  const int held =
      checkpoint_segment > 0 && checkpoint_segment < blocks ? checkpoint_segment : blocks;
  // As the constructor sizes them: the residual stream, each held block's, RoPE's tables, the
  // head's.
  const block_sizes z(layout, max_batch);
  int64_t floats = (blocks + 1) * N * C + held * z.block() + rope_floats(c, N);
  if (defer_weight_gradients) floats += blocks * z.linear_grads();
  if (layout.range().has_head(c)) {
    floats += N * C + z.mean + N;
    floats += layout.has_value_head() ? N : N * layout.local_vocab() + N;
  }
  return floats * static_cast<int64_t>(sizeof(float));
}

decoder_cpu_stage::block_activations& decoder_cpu_stage::activations(int layer) {
  const int i = layer - layout_.range().first;
  return blocks_[segment_ > 0 ? i % segment_ : i];
}

void decoder_cpu_stage::materialize(const float* params, int layer) {
  if (segment_ == 0) return;
  const int i = layer - layout_.range().first, segment = i / segment_;
  if (segment == held_segment_) return;
  const int first = segment * segment_;
  const int last = std::min(first + segment_, layout_.range().last - layout_.range().first);
  for (int b = first; b < last; ++b)  // the same forward again: the same activations
    block_forward(params, layout_.range().first + b, x_[b].data(), x_[b + 1].data());
  held_segment_ = segment;
}

void decoder_cpu_stage::block_forward(const float* params, int layer, const float* in, float* out) {
  if (segment_ > 0) held_segment_ = (layer - layout_.range().first) / segment_;
  if (layout_.config().family == decoder_family::gpt2) {
    gpt2_block_forward(params, layer, in, out);
  } else {
    llama_block_forward(params, layer, in, out);
  }
}

void decoder_cpu_stage::gpt2_block_forward(const float* params, int layer, const float* in,
                                           float* out) {
  const decoder_config& c = layout_.config();
  const auto& o = layout_.block(layer);
  auto& a = activations(layer);
  const int N = batch_ * seq_, C = c.dim, L = layout_.local_dim();
  float* tmp = dtmp_.data();
  k::layernorm_forward(a.ln1.data(), a.ln1_mean.data(), a.ln1_rstd.data(), in, params + o.ln1_w,
                       params + o.ln1_b, N, C);
  k::matmul(a.qkv.data(), a.ln1.data(), params + o.attn_w, params + o.attn_b, gemm{N, 3 * L, C});
  k::attention_forward(a.atty.data(), a.probs.data(), a.qkv.data(),
                       {batch_, seq_, L, layout_.local_heads()}, pool_);
  row_parallel(tmp, a.atty.data(), params + o.proj_w, params + o.proj_b, N, L);
  k::residual_forward(a.mid.data(), in, tmp, int64_t{N} * C);
  k::layernorm_forward(a.ln2.data(), a.ln2_mean.data(), a.ln2_rstd.data(), a.mid.data(),
                       params + o.ln2_w, params + o.ln2_b, N, C);
  k::matmul(a.fc.data(), a.ln2.data(), params + o.fc_w, params + o.fc_b, gemm{N, 4 * L, C});
  k::gelu_forward(a.fc_gelu.data(), a.fc.data(), int64_t{N} * 4 * L);
  row_parallel(tmp, a.fc_gelu.data(), params + o.fc2_w, params + o.fc2_b, N, 4 * L);
  k::residual_forward(out, a.mid.data(), tmp, int64_t{N} * C);
}

void decoder_cpu_stage::row_parallel(float* out, const float* in, const float* w, const float* bias,
                                     int rows, int k_local, bool w_transposed) {
  const int C = layout_.config().dim;
  const gemm g{rows, C, k_local, false, w_transposed};
  if (layout_.tp().size == 1) return k::matmul(out, in, w, bias, g);
  // Each rank's part of the inner dimension makes a part of the sum: all-reduced, then the
  // bias once.
  k::matmul(out, in, w, nullptr, g);
  tensor_sum(out, int64_t{rows} * C);
  if (bias != nullptr) add_bias(out, bias, rows, C);
}

void decoder_cpu_stage::final_norm_forward(const float* params) {
  const decoder_config& c = layout_.config();
  const int N = batch_ * seq_;
  if (c.family == decoder_family::gpt2) {
    k::layernorm_forward(lnf_.data(), lnf_mean_.data(), lnf_rstd_.data(), x_.back().data(),
                         params + layout_.lnf_w(), params + layout_.lnf_b(), N, c.dim);
  } else {
    k::rmsnorm_forward(lnf_.data(), lnf_rstd_.data(), x_.back().data(), params + layout_.lnf_w(), N,
                       c.dim, c.norm_eps);
  }
}

void decoder_cpu_stage::tensor_sum(float* data, int64_t n) {
  if (!comm_status_.ok()) return;  // the group failed: what follows is discarded
  comm_status_ =
      tensor_allreduce_
          ? tensor_allreduce_(data, n)
          : absl::FailedPreconditionError("a tensor-parallel stage has no all-reduce to sum with");
}

absl::Status decoder_cpu_stage::take_comm_status() {
  return std::exchange(comm_status_, absl::OkStatus());
}

void decoder_cpu_stage::backward(const float* params, float* grads, const float* dhidden,
                                 float loss_scale) {
  backward_head(params, grads, dhidden, loss_scale);
  backward_below_head(params, grads);
}

void decoder_cpu_stage::backward_input(const float* params, float* grads, const float* dhidden,
                                       float loss_scale) {
  TROUPE_CHECK(!deferred_.empty());
  const decoder_config& c = layout_.config();
  if (layout_.range().has_head(c)) {
    TROUPE_CHECK(!layout_.has_value_head());
    loss_backward(loss_scale);
    head_input_grads(params, grads);
  } else {
    std::memcpy(dx_.data(), dhidden, int64_t{batch_} * seq_ * c.dim * sizeof(float));
  }
  for (int l = layout_.range().last - 1; l >= layout_.range().first; --l)
    block_input_grads(params, grads, l, deferred_[l - layout_.range().first]);
}

void decoder_cpu_stage::backward_weights(float* grads) {
  TROUPE_CHECK(!deferred_.empty());
  // In backward()'s order for each parameter: the tied embedding's head part before its
  // embedding part.
  if (layout_.range().has_head(layout_.config())) head_weight_grads(grads);
  for (int l = layout_.range().last - 1; l >= layout_.range().first; --l)
    block_weight_grads(grads, l, deferred_[l - layout_.range().first]);
  backward_embedding(grads);
}

void decoder_cpu_stage::backward_below_head(const float* params, float* grads) {
  for (int l = layout_.range().last - 1; l >= layout_.range().first; --l) {
    if (hooks_.acquire) hooks_.acquire(l, true);
    backward_block(params, grads, l);
    if (hooks_.release) hooks_.release(l, true);
  }
  backward_embedding(grads);
}

void decoder_cpu_stage::entropies(float* h) const {
  k::entropy_forward(h, probs_.data(), batch_ * seq_, layout_.config().vocab);
}

void decoder_cpu_stage::backward(const float* params, float* grads,
                                 const token_objective_grad& objective) {
  backward_head(params, grads, objective);
  backward_below_head(params, grads);
}

void decoder_cpu_stage::backward(const float* params, float* grads,
                                 const value_objective_grad& objective) {
  backward_head(params, grads, objective);
  backward_below_head(params, grads);
}

void decoder_cpu_stage::backward_head(const float* params, float* grads,
                                      const value_objective_grad& objective) {
  TROUPE_CHECK(layout_.has_value_head());
  const int N = batch_ * seq_, C = layout_.config().dim;
  // d ln_f(x) = dvalues [N, 1] @ classifier [1, C]; d classifier += dvalues^T @ ln_f(x).
  k::matmul(dtmp_.data(), objective.dvalues, params + layout_.value_w(), nullptr, gemm{N, C, 1});
  k::matmul(grads + layout_.value_w(), objective.dvalues, lnf_.data(), nullptr,
            gemm{1, C, N, true, false, true});
  k::bias_backward(grads + layout_.value_b(), objective.dvalues, N, 1);
  final_norm_backward(params, grads);
}

void decoder_cpu_stage::backward_head(const float* params, float* grads,
                                      const token_objective_grad& objective) {
  const decoder_config& c = layout_.config();
  // (An RL objective is the whole vocabulary's: not on a tensor-parallel rank.)
  TROUPE_CHECK(layout_.range().has_head(c) && !layout_.has_value_head() && layout_.tp().size == 1);
  k::cross_entropy_backward(probs_.data(), probs_.data(), targets_.data(), objective.dloss,
                            objective.entropies, objective.dentropy, batch_ * seq_, c.vocab);
  head_backward(params, grads);
}

void decoder_cpu_stage::backward_head(const float* params, float* grads, const float* dhidden,
                                      float loss_scale) {
  const decoder_config& c = layout_.config();
  const int N = batch_ * seq_, C = c.dim;
  if (layout_.range().has_head(c)) {
    TROUPE_CHECK(!layout_.has_value_head());  // a critic trains on an objective of its values
    loss_backward(loss_scale);
    head_backward(params, grads);
  } else {
    std::memcpy(dx_.data(), dhidden, int64_t{N} * C * sizeof(float));
  }
}

void decoder_cpu_stage::loss_backward(float loss_scale) {
  const int N = batch_ * seq_, V = layout_.local_vocab();
  if (layout_.tp().size > 1) {
    k::vocab_parallel_cross_entropy_backward(probs_.data(), probs_.data(), targets_.data(),
                                             loss_scale, N, V, layout_.vocab_first());
  } else {
    k::cross_entropy_backward(probs_.data(), probs_.data(), targets_.data(), loss_scale, N, V);
  }
}

void decoder_cpu_stage::head_backward(const float* params, float* grads) {
  head_input_grads(params, grads);
  head_weight_grads(grads);
}

void decoder_cpu_stage::head_input_grads(const float* params, float* grads) {
  const int N = batch_ * seq_, C = layout_.config().dim, V = layout_.local_vocab();
  if (temperature_ != 1.0f) {  // the logits were divided by the temperature
    const float inv = 1.0f / temperature_;
    for (int64_t i = 0; i < int64_t{N} * V; ++i)
      probs_[i] *= inv;
  }
  k::matmul(dtmp_.data(), probs_.data(), params + layout_.head_weight(), nullptr, gemm{N, C, V});
  // Vocab-parallel: each rank's columns' part of d(final norm output), summed.
  if (layout_.tp().size > 1) tensor_sum(dtmp_.data(), int64_t{N} * C);
  final_norm_backward(params, grads);
}

void decoder_cpu_stage::head_weight_grads(float* grads) {
  const int N = batch_ * seq_, C = layout_.config().dim, V = layout_.local_vocab();
  k::matmul(grads + layout_.head_weight(), probs_.data(), lnf_.data(), nullptr,
            gemm{V, C, N, true, false, true});
}

void decoder_cpu_stage::final_norm_backward(const float* params, float* grads) {
  const decoder_config& c = layout_.config();
  const int N = batch_ * seq_, C = c.dim;
  std::memset(dx_.data(), 0, int64_t{N} * C * sizeof(float));
  if (c.family == decoder_family::gpt2) {
    k::layernorm_backward(dx_.data(), grads + layout_.lnf_w(), grads + layout_.lnf_b(),
                          dtmp_.data(), x_.back().data(), params + layout_.lnf_w(),
                          lnf_mean_.data(), lnf_rstd_.data(), N, C);
  } else {
    k::rmsnorm_backward(dx_.data(), grads + layout_.lnf_w(), dtmp_.data(), x_.back().data(),
                        params + layout_.lnf_w(), lnf_rstd_.data(), N, C);
  }
}

void decoder_cpu_stage::backward_embedding(float* grads) {
  if (!layout_.range().has_embedding()) return;
  const int N = batch_ * seq_;
  const bool positions = layout_.wpe() >= 0;  // GPT-2's learned positions
  k::embedding_part_backward(grads + layout_.wte(), positions ? grads + layout_.wpe() : nullptr,
                             dx_.data(), tokens_.data(), positions_.data(), N,
                             layout_.vocab_first(), layout_.local_vocab(), layout_.config().dim);
}

// dx_ holds d(block output) on entry and d(block input) on return.
void decoder_cpu_stage::backward_block(const float* params, float* grads, int layer) {
  block_input_grads(params, grads, layer, dlinear_);
  block_weight_grads(grads, layer, dlinear_);
}

void decoder_cpu_stage::block_input_grads(const float* params, float* grads, int layer,
                                          linear_output_grads& d) {
  materialize(params, layer);
  if (layout_.config().family == decoder_family::gpt2) {
    gpt2_block_input_grads(params, grads, layer, d);
  } else {
    llama_block_input_grads(params, grads, layer, d);
  }
}

void decoder_cpu_stage::block_weight_grads(float* grads, int layer, const linear_output_grads& d) {
  if (layout_.config().family == decoder_family::gpt2) {
    gpt2_block_weight_grads(grads, layer, d);
  } else {
    llama_block_weight_grads(grads, layer, d);
  }
}

void decoder_cpu_stage::gpt2_block_input_grads(const float* params, float* grads, int layer,
                                               linear_output_grads& d) {
  const decoder_config& c = layout_.config();
  const auto& o = layout_.block(layer);
  const int i = layer - layout_.range().first;
  auto& a = activations(layer);
  const int N = batch_ * seq_, C = c.dim, L = layout_.local_dim();
  const bool split = layout_.tp().size > 1;
  float* dx = dx_.data();
  float* dtmp = dtmp_.data();

  // MLP: out = mid + fc_gelu @ fc2_w + fc2_b. With tensor parallelism each rank's hidden units
  // give a part of d(ln2), summed over the ranks.
  std::memcpy(d.mlp_out.data(), dx, int64_t{N} * C * sizeof(float));
  k::matmul(d.fc.data(), dx, params + o.fc2_w, nullptr, gemm{N, 4 * L, C, false, true});
  k::gelu_backward(d.fc.data(), a.fc.data(), d.fc.data(), int64_t{N} * 4 * L);
  k::matmul(dtmp, d.fc.data(), params + o.fc_w, nullptr, gemm{N, C, 4 * L, false, true});
  if (split) tensor_sum(dtmp, int64_t{N} * C);
  k::layernorm_backward(dx, grads + o.ln2_w, grads + o.ln2_b, dtmp, a.mid.data(), params + o.ln2_w,
                        a.ln2_mean.data(), a.ln2_rstd.data(), N, C);

  // Attention: mid = in + attention(ln1 @ attn_w + attn_b) @ proj_w + proj_b.
  std::memcpy(d.attn_out.data(), dx, int64_t{N} * C * sizeof(float));
  k::matmul(dtmp, dx, params + o.proj_w, nullptr, gemm{N, L, C, false, true});
  k::attention_backward(d.qkv.data(), dtmp, a.qkv.data(), a.probs.data(),
                        {batch_, seq_, L, layout_.local_heads()}, pool_);
  k::matmul(dtmp, d.qkv.data(), params + o.attn_w, nullptr, gemm{N, C, 3 * L, false, true});
  if (split) tensor_sum(dtmp, int64_t{N} * C);
  k::layernorm_backward(dx, grads + o.ln1_w, grads + o.ln1_b, dtmp, x_[i].data(), params + o.ln1_w,
                        a.ln1_mean.data(), a.ln1_rstd.data(), N, C);
}

// d weight = input^T @ d output and d bias = the sum of d output over the tokens, for the four
// linear maps; their inputs are the activations the forward pass kept.
void decoder_cpu_stage::gpt2_block_weight_grads(float* grads, int layer,
                                                const linear_output_grads& d) {
  const decoder_config& c = layout_.config();
  const auto& o = layout_.block(layer);
  const auto& a = activations(layer);
  const int N = batch_ * seq_, C = c.dim, L = layout_.local_dim();
  k::matmul(grads + o.fc2_w, a.fc_gelu.data(), d.mlp_out.data(), nullptr,
            gemm{4 * L, C, N, true, false, true});
  k::bias_backward(grads + o.fc2_b, d.mlp_out.data(), N, C);
  k::matmul(grads + o.fc_w, a.ln2.data(), d.fc.data(), nullptr,
            gemm{C, 4 * L, N, true, false, true});
  k::bias_backward(grads + o.fc_b, d.fc.data(), N, 4 * L);
  k::matmul(grads + o.proj_w, a.atty.data(), d.attn_out.data(), nullptr,
            gemm{L, C, N, true, false, true});
  k::bias_backward(grads + o.proj_b, d.attn_out.data(), N, C);
  k::matmul(grads + o.attn_w, a.ln1.data(), d.qkv.data(), nullptr,
            gemm{C, 3 * L, N, true, false, true});
  k::bias_backward(grads + o.attn_b, d.qkv.data(), N, 3 * L);
}

}  // namespace troupe::models

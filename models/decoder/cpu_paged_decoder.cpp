#include "models/decoder/cpu_paged_decoder.hpp"

#include <algorithm>
#include <cstring>

#include "kernels/attention.hpp"
#include "kernels/embedding.hpp"
#include "kernels/gelu.hpp"
#include "kernels/layernorm.hpp"
#include "kernels/matmul.hpp"
#include "kernels/quantized_matmul.hpp"
#include "kernels/residual.hpp"
#include "kernels/rmsnorm.hpp"
#include "kernels/rope.hpp"
#include "kernels/swiglu.hpp"
#include "models/decoder/rope_frequencies.hpp"
#include "runtime/base/status.hpp"

namespace troupe::models {

namespace k = kernels::cpu;
using kernels::gemm;

std::vector<size_t> decode_group_bounds(std::span<const decode_request> requests,
                                        const decoder_config& config, int groups) {
  // Each request's work in multiply-adds over the width C: a token's GEMMs in each block (12 C^2
  // for GPT-2: QKV, output, and an MLP of two 4C matrices; the Llama family's from its widths),
  // V C for its head row, and per block about (3 + 2 count) C a key for gathering its keys and
  // values and attending to them.
  const int64_t C = config.dim, mlp_matrices = config.family == decoder_family::gpt2 ? 2 : 3;
  const int64_t gemm_work = (C * (config.q_width() + 2 * config.kv_width()) + config.q_width() * C +
                             mlp_matrices * C * config.ffn_width()) /
                            C;
  std::vector<int64_t> done = {0};  // the work of requests [0, i)
  for (const auto& r : requests) {
    const int64_t keys = r.first_position + r.count;
    done.push_back(done.back() + gemm_work * config.layers * r.count + config.vocab +
                   int64_t{config.layers} * keys * (3 + 2 * r.count));
  }
  // Bound k is the prefix whose work is nearest k / groups of the whole.
  std::vector<size_t> bounds = {0};
  for (int k = 1; k < groups; ++k) {
    const double target = static_cast<double>(done.back()) * k / groups;
    auto at =
        std::lower_bound(done.begin() + static_cast<int64_t>(bounds.back()), done.end(), target);
    if (at - done.begin() > static_cast<int64_t>(bounds.back()) &&
        target - static_cast<double>(*(at - 1)) < static_cast<double>(*at) - target) {
      --at;
    }
    bounds.push_back(static_cast<size_t>(at - done.begin()));
  }
  bounds.push_back(requests.size());
  return bounds;
}

cpu_paged_decoder::cpu_paged_decoder(const decoder_layout& layout, const float* params,
                                     int max_tokens, int cache_blocks, int block_size,
                                     kernels::cpu::thread_pool* pool, kv_cache_dtype kv_dtype)
    : layout_(layout),
      params_(params),
      block_(layout.config().family == decoder_family::gpt2 ? &cpu_paged_decoder::gpt2_block
                                                            : &cpu_paged_decoder::llama_block),
      max_tokens_(max_tokens),
      cache_(layout.config(), cache_blocks, block_size, kv_dtype),
      pool_(pool),
      scratch_(pool != nullptr ? pool->size() : 1) {
  const decoder_config& c = layout.config();
  if (c.family == decoder_family::llama) inv_freq_ = rope_inverse_frequencies(c);
  const int64_t N = max_tokens, C = c.dim, T = c.ctx, Q = c.q_width(), KV = c.kv_width();
  const int64_t mlp = c.family == decoder_family::gpt2 ? 4 * C : 2 * int64_t{c.ffn_width()};
  for (scratch& s : scratch_) {
    s.x.resize(N * C), s.ln.resize(N * C), s.qkv.resize(N * (Q + 2 * KV)), s.atty.resize(N * Q);
    s.tmp.resize(N * C), s.fc.resize(N * mlp), s.k.resize(T), s.v.resize(T);
    s.last.resize(N * C), s.tokens.resize(N), s.positions.resize(N);
    if (kv_dtype == kv_cache_dtype::int8) s.keys_f32.resize(T * KV), s.values_f32.resize(T * KV);
    if (c.family == decoder_family::llama) {
      s.rope_cos.resize(N * c.head_size() / 2), s.rope_sin.resize(N * c.head_size() / 2);
    }
  }
}

absl::Status cpu_paged_decoder::set_weights(const float* params) {
  if (prequantized_) {
    return absl::FailedPreconditionError(
        "the decoder runs block weights quantized before it was made (a GPTQ checkpoint's, or "
        "quantized at load), which new f32 weights cannot replace");
  }
  if (quantization_.enabled()) {
    TROUPE_ASSIGN_OR_RETURN(quantized_,
                            quantized_weights::quantize(layout_, params, quantization_));
  }
  params_ = params;
  return absl::OkStatus();
}

void cpu_paged_decoder::use_quantized(std::shared_ptr<const quantized_weights> weights) {
  quantized_ = std::move(weights);
  quantization_ = {};
  prequantized_ = quantized_ != nullptr;
}

absl::Status cpu_paged_decoder::quantize(weight_quantization q) {
  quantized_.reset();
  prequantized_ = false;
  if (q.enabled()) {
    TROUPE_ASSIGN_OR_RETURN(quantized_, quantized_weights::quantize(layout_, params_, q));
  }
  quantization_ = q;
  return absl::OkStatus();
}

void cpu_paged_decoder::linear(float* out, const float* x, int64_t weight, const float* bias, int N,
                               int outputs, int inputs, bool out_in, k::thread_pool* pool) const {
  if (quantized_ != nullptr) {
    if (const kernels::quantized_matrix* q = quantized_->find(weight)) {
      k::quantized_matmul(out, x, *q, bias, N, pool);
      return;
    }
  }
  k::matmul(out, x, params_ + weight, bias, gemm{N, outputs, inputs, false, out_in}, pool);
}

absl::Status cpu_paged_decoder::forward(std::span<const decode_request> requests, float* logits,
                                        float* hidden) {
  TROUPE_RETURN_IF_ERROR(validate_decode_batch(layout_.config(), cache_.blocks(),
                                               cache_.layout().block_size, max_tokens_, requests));
  if (hidden == nullptr && hidden_rows(requests) > 0) {
    return absl::InvalidArgumentError("a decode batch with hidden-state requests needs `hidden`");
  }
  const int groups = std::min<int>(static_cast<int>(scratch_.size()), requests.size());
  const std::vector<size_t> bounds = decode_group_bounds(requests, layout_.config(), groups);
  const int vocab = layout_.config().vocab;
  for (size_t g = 0; g + 1 < bounds.size(); ++g)
    scratch_[g].columns_pool = bounds.size() == 2 ? pool_ : nullptr;
  k::parallel_for(pool_, static_cast<int64_t>(bounds.size()) - 1, [&](int64_t g) {
    const size_t first = bounds[g], last = bounds[g + 1];
    if (first == last) return;
    const int64_t row = logit_rows(requests.first(first));
    const int64_t hidden_row = hidden_rows(requests.first(first));
    forward_group(requests.subspan(first, last - first), logits + row * vocab,
                  hidden == nullptr ? nullptr : hidden + hidden_row * layout_.config().dim,
                  scratch_[g]);
  });
  return absl::OkStatus();
}

void cpu_paged_decoder::forward_group(std::span<const decode_request> requests, float* logits,
                                      float* hidden, scratch& s) {
  const float* params = params_;
  const decoder_config& c = layout_.config();
  const int C = c.dim;
  int N = 0;
  for (const auto& r : requests) {
    for (int t = 0; t < r.count; ++t, ++N) {
      s.tokens[N] = r.tokens[t];
      s.positions[N] = r.first_position + t;
    }
  }
  float* x = s.x.data();
  const bool gpt2 = c.family == decoder_family::gpt2;
  // Each token's embedding: a tied one quantized with the output head from its quantized row.
  const kernels::quantized_matrix* quantized_wte =
      quantized_ != nullptr ? quantized_->find(layout_.wte()) : nullptr;
  for (int i = 0; i < N; ++i) {
    float* row = x + int64_t{i} * C;
    if (quantized_wte != nullptr) {
      k::dequantize_row(*quantized_wte, s.tokens[i], row);
    } else {
      std::memcpy(row, params + layout_.wte() + int64_t{s.tokens[i]} * C, C * sizeof(float));
    }
    if (gpt2) {  // GPT-2's learned positions, added as kernels::cpu::embedding_forward adds them
      const float* position = params + layout_.wpe() + int64_t{s.positions[i]} * C;
      for (int j = 0; j < C; ++j)
        row[j] += position[j];
    }
  }
  if (!gpt2) {  // no learned positions: RoPE turns queries and keys in each block, by these angles
    k::rope_angles(s.rope_cos.data(), s.rope_sin.data(), s.positions.data(), N, c.head_size(),
                   inv_freq_.data());
  }
  for (int l = 0; l < c.layers; ++l)
    (this->*block_)(requests, l, N, s);
  // Only each request's last logit_rows rows go through the final norm, and the head after it
  // unless the request wants them as hidden states.
  const int R = logit_rows(requests) + hidden_rows(requests);
  int row = 0, out = 0;
  for (const auto& r : requests) {
    row += r.count;
    std::memcpy(s.last.data() + int64_t{out} * C, x + int64_t{row - r.logit_rows} * C,
                int64_t{r.logit_rows} * C * sizeof(float));
    out += r.logit_rows;
  }
  if (gpt2) {
    k::layernorm_forward(s.ln.data(), s.tmp.data(), s.tmp.data() + R, s.last.data(),
                         params + layout_.lnf_w(), params + layout_.lnf_b(), R, C);
  } else {
    k::rmsnorm_forward(s.ln.data(), nullptr, s.last.data(), params + layout_.lnf_w(), R, C,
                       c.norm_eps);
  }
  const float* head_rows = s.ln.data();
  int L = R;
  if (hidden_rows(requests) > 0) {  // hidden rows out; the others gathered for the head
    L = 0;
    int at = 0, hidden_at = 0;
    for (const auto& r : requests) {
      const int64_t n = int64_t{r.logit_rows} * C;
      float* to = r.hidden ? hidden + int64_t{hidden_at} * C : s.last.data() + int64_t{L} * C;
      std::memcpy(to, s.ln.data() + int64_t{at} * C, n * sizeof(float));
      (r.hidden ? hidden_at : L) += r.logit_rows;
      at += r.logit_rows;
    }
    head_rows = s.last.data();
  }
  if (L > 0)
    linear(logits, head_rows, layout_.head_weight(), nullptr, L, c.vocab, C, true, s.columns_pool);
}

void cpu_paged_decoder::attend(std::span<const decode_request> requests, int l, const float* q,
                               int64_t q_stride, const float* k, const float* v, int64_t kv_stride,
                               scratch& s) {
  const decoder_config& c = layout_.config();
  paged_kv_cache& cache = cache_;
  const int Q = c.q_width();
  int row = 0;
  const int KV = c.kv_width(), H = cache.heads();
  for (const auto& r : requests) {
    const int64_t at = int64_t{row};
    const int keys = r.first_position + r.count;
    if (cache.dtype() == kv_cache_dtype::int8) {
      // Appended as int8, read back dequantized: the new tokens see their own keys as every
      // later token will.
      for (const bool value : {false, true}) {
        k::kv_append_int8(cache.int8_pool(l, value), cache.scales(l, value), r.block_table,
                          cache.layout(), H, r.first_position, (value ? v : k) + at * kv_stride,
                          kv_stride, r.count);
        float* rows = (value ? s.values_f32 : s.keys_f32).data();
        k::kv_gather_int8(rows, cache.int8_pool(l, value), cache.scales(l, value), r.block_table,
                          cache.layout(), H, keys);
        for (int i = 0; i < keys; ++i)
          (value ? s.v : s.k)[i] = rows + int64_t{i} * KV;
      }
    } else {
      k::kv_append(cache.keys(l), r.block_table, cache.layout(), r.first_position,
                   k + at * kv_stride, kv_stride, r.count);
      k::kv_append(cache.values(l), r.block_table, cache.layout(), r.first_position,
                   v + at * kv_stride, kv_stride, r.count);
      k::kv_rows(s.k.data(), cache.keys(l), r.block_table, cache.layout(), keys);
      k::kv_rows(s.v.data(), cache.values(l), r.block_table, cache.layout(), keys);
    }
    k::cached_attention_forward(s.atty.data() + at * Q, q + at * q_stride, q_stride, s.k.data(),
                                s.v.data(), r.count, r.first_position, Q, c.heads,
                                c.kv_head_count());
    row += r.count;
  }
}

void cpu_paged_decoder::gpt2_block(std::span<const decode_request> requests, int l, int N,
                                   scratch& s) {
  const float* params = params_;
  const int C = layout_.config().dim;
  const auto& o = layout_.block(l);
  float* x = s.x.data();
  k::layernorm_forward(s.ln.data(), s.tmp.data(), s.tmp.data() + N, x, params + o.ln1_w,
                       params + o.ln1_b, N, C);
  linear(s.qkv.data(), s.ln.data(), o.attn_w, params + o.attn_b, N, 3 * C, C, false,
         s.columns_pool);
  const float* qkv = s.qkv.data();
  attend(requests, l, qkv, 3 * C, qkv + C, qkv + 2 * C, 3 * C, s);
  linear(s.tmp.data(), s.atty.data(), o.proj_w, params + o.proj_b, N, C, C, false, s.columns_pool);
  k::accumulate(x, s.tmp.data(), int64_t{N} * C);
  k::layernorm_forward(s.ln.data(), s.tmp.data(), s.tmp.data() + N, x, params + o.ln2_w,
                       params + o.ln2_b, N, C);
  linear(s.fc.data(), s.ln.data(), o.fc_w, params + o.fc_b, N, 4 * C, C, false, s.columns_pool);
  k::gelu_forward(s.fc.data(), s.fc.data(), int64_t{N} * 4 * C);
  linear(s.tmp.data(), s.fc.data(), o.fc2_w, params + o.fc2_b, N, C, 4 * C, false, s.columns_pool);
  k::accumulate(x, s.tmp.data(), int64_t{N} * C);
}

// Hugging Face's LlamaDecoderLayer (and Qwen 2's and 3's): RMSNorm, q/k/v projections (with
// biases, per-head q/k norms where the config has them), RoPE, grouped-query attention, the
// output projection, the residual; RMSNorm, down(silu(gate) * up), the residual. Weights are
// [out, in], so every GEMM multiplies by their transpose.
void cpu_paged_decoder::llama_block(std::span<const decode_request> requests, int l, int N,
                                    scratch& s) {
  const float* params = params_;
  const decoder_config& c = layout_.config();
  const int C = c.dim, Q = c.q_width(), KV = c.kv_width(), F = c.ffn_width(), D = c.head_size();
  const auto& o = layout_.block(l);
  auto bias = [&](int64_t at) { return at >= 0 ? params + at : nullptr; };
  float* x = s.x.data();
  float* q = s.qkv.data();
  float* key = q + int64_t{N} * Q;
  float* value = key + int64_t{N} * KV;
  k::rmsnorm_forward(s.ln.data(), nullptr, x, params + o.ln1_w, N, C, c.norm_eps);
  linear(q, s.ln.data(), o.q_w, bias(o.q_b), N, Q, C, true, s.columns_pool);
  linear(key, s.ln.data(), o.k_w, bias(o.k_b), N, KV, C, true, s.columns_pool);
  linear(value, s.ln.data(), o.v_w, bias(o.v_b), N, KV, C, true, s.columns_pool);
  if (c.qk_norm) {  // each head's query and key, over its D floats
    k::rmsnorm_forward(q, nullptr, q, params + o.q_norm, int64_t{N} * c.heads, D, c.norm_eps);
    k::rmsnorm_forward(key, nullptr, key, params + o.k_norm, int64_t{N} * c.kv_head_count(), D,
                       c.norm_eps);
  }
  k::rope_forward(q, Q, N, c.heads, D, s.rope_cos.data(), s.rope_sin.data());
  k::rope_forward(key, KV, N, c.kv_head_count(), D, s.rope_cos.data(), s.rope_sin.data());
  attend(requests, l, q, Q, key, value, KV, s);
  linear(s.tmp.data(), s.atty.data(), o.o_w, bias(o.o_b), N, C, Q, true, s.columns_pool);
  k::accumulate(x, s.tmp.data(), int64_t{N} * C);
  k::rmsnorm_forward(s.ln.data(), nullptr, x, params + o.ln2_w, N, C, c.norm_eps);
  float* gate = s.fc.data();
  float* up = gate + int64_t{N} * F;
  linear(gate, s.ln.data(), o.gate_w, nullptr, N, F, C, true, s.columns_pool);
  linear(up, s.ln.data(), o.up_w, nullptr, N, F, C, true, s.columns_pool);
  k::swiglu_forward(gate, gate, up, int64_t{N} * F);
  linear(s.tmp.data(), gate, o.down_w, nullptr, N, C, F, true, s.columns_pool);
  k::accumulate(x, s.tmp.data(), int64_t{N} * C);
}

}  // namespace troupe::models

#include "models/decoder/cuda_paged_decoder.hpp"

#include <cstring>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/embedding.hpp"
#include "kernels/gelu.hpp"
#include "kernels/kv_cache.hpp"
#include "kernels/layernorm.hpp"
#include "kernels/matmul.hpp"
#include "kernels/quantized_matmul.hpp"
#include "kernels/residual.hpp"
#include "kernels/rmsnorm.hpp"
#include "kernels/rope.hpp"
#include "kernels/swiglu.hpp"
#include "models/decoder/cuda_quantized_weights.hpp"
#include "models/decoder/rope_frequencies.hpp"
#include "runtime/tensor/cuda_device.hpp"
#include "runtime/tensor/tensor.hpp"

namespace troupe::models {
namespace {

namespace cuda = kernels::cuda;
using kernels::gemm;
using tensor::bf16;
using tensor::dtype;

class cuda_paged_decoder final : public paged_decoder {
 public:
  cuda_paged_decoder(const decoder_layout& layout, int max_tokens, int cache_blocks, int block_size,
                     int device, const decoder_options& options)
      : layout_(layout),
        max_tokens_(max_tokens),
        cache_blocks_(cache_blocks),
        kv_{block_size, layout.config().kv_width()},
        device_(device),
        quantization_(options.quantization),
        prequantized_(options.prequantized) {}

  absl::Status allocate(const float* params) {
    const decoder_config& c = layout_.config();
    const auto where = tensor::device::cuda(device_);
    const int64_t N = max_tokens_, C = c.dim;
    const bool gpt2 = c.family == decoder_family::gpt2;
    const int64_t qkv = gpt2 ? 3 * C : c.q_width() + 2 * int64_t{c.kv_width()};
    const int64_t mlp = gpt2 ? 4 * C : 3 * int64_t{c.ffn_width()};  // [gate | up], silu(gate) up
    const int64_t table_capacity = N * ((c.ctx + kv_.block_size - 1) / kv_.block_size);
    auto make = [&](tensor::tensor& t, int64_t n, dtype type) -> absl::Status {
      TROUPE_ASSIGN_OR_RETURN(t, tensor::tensor::zeros({n}, type, where));
      return absl::OkStatus();
    };
    TROUPE_RETURN_IF_ERROR(set_weights(params));
    pools_.resize(2 * c.layers);
    for (auto& pool : pools_) {
      TROUPE_RETURN_IF_ERROR(
          make(pool, int64_t{cache_blocks_} * kv_.block_size * kv_.width, dtype::bf16));
    }
    TROUPE_RETURN_IF_ERROR(make(x_, N * C, dtype::bf16));
    TROUPE_RETURN_IF_ERROR(make(ln_, N * C, dtype::bf16));
    TROUPE_RETURN_IF_ERROR(make(qkv_, N * qkv, dtype::bf16));
    TROUPE_RETURN_IF_ERROR(make(atty_, N * c.q_width(), dtype::bf16));
    TROUPE_RETURN_IF_ERROR(make(tmp_, N * C, dtype::bf16));
    TROUPE_RETURN_IF_ERROR(make(fc_, N * mlp, dtype::bf16));
    TROUPE_RETURN_IF_ERROR(make(last_, N * C, dtype::bf16));
    TROUPE_RETURN_IF_ERROR(make(mean_, N, dtype::f32));
    TROUPE_RETURN_IF_ERROR(make(rstd_, N, dtype::f32));
    TROUPE_RETURN_IF_ERROR(make(logits_, N * c.vocab, dtype::f32));
    if (quantized(layout_.head_weight()) != nullptr) {  // its logits come out in bf16
      TROUPE_RETURN_IF_ERROR(make(logits16_, N * c.vocab, dtype::bf16));
    }
    if (!gpt2) {  // RoPE's frequencies, once; each batch's angles
      const std::vector<float> inv_freq = rope_inverse_frequencies(c);
      tensor::tensor host =
          tensor::tensor::host({static_cast<int64_t>(inv_freq.size())}, dtype::f32);
      std::memcpy(host.raw(), inv_freq.data(), inv_freq.size() * sizeof(float));
      TROUPE_ASSIGN_OR_RETURN(inv_freq_, host.to(where));
      TROUPE_RETURN_IF_ERROR(make(rope_cos_, N * c.head_size() / 2, dtype::f32));
      TROUPE_RETURN_IF_ERROR(make(rope_sin_, N * c.head_size() / 2, dtype::f32));
    }
    // Per row: token, position, offset of its block table; then the block tables.
    TROUPE_RETURN_IF_ERROR(make(indices_, 3 * N + table_capacity, dtype::i32));
    host_indices_ = tensor::tensor::host({3 * N + table_capacity}, dtype::i32);
    return absl::OkStatus();
  }

  // The bf16 weights, and the quantized matrices: a checkpoint's, or `params`' quantized anew.
  absl::Status set_weights(const float* params) override {
    tensor::tensor host = tensor::tensor::host({layout_.total()}, dtype::bf16);
    for (int64_t i = 0; i < layout_.total(); ++i)
      host.data<bf16>()[i] = bf16(params[i]);
    std::shared_ptr<const quantized_weights> q = prequantized_;
    if (quantization_.enabled()) {
      TROUPE_ASSIGN_OR_RETURN(q, quantized_weights::quantize(layout_, params, quantization_));
    }
    if (q != nullptr) {
      // A quantized tied head is the token embedding too: its rows, looked up in bf16, are the
      // quantized ones (their f32 may be gone), as the CPU decoder reads them.
      const int64_t wte = layout_.wte();
      if (const kernels::quantized_matrix* m = q->find(wte)) {
        std::vector<float> row(m->cols);
        for (int r = 0; r < m->rows; ++r) {
          kernels::cpu::dequantize_row(*m, r, row.data());
          for (int k = 0; k < m->cols; ++k)
            host.data<bf16>()[wte + int64_t{r} * m->cols + k] = bf16(row[k]);
        }
      }
      TROUPE_ASSIGN_OR_RETURN(quantized_, cuda_quantized_weights::upload(layout_, *q, device_));
    }
    TROUPE_ASSIGN_OR_RETURN(weights_, host.to(tensor::device::cuda(device_)));
    return absl::OkStatus();
  }

  using paged_decoder::forward;
  absl::Status forward(std::span<const decode_request> requests, float* logits,
                       float* hidden) override {
    const decoder_config& c = layout_.config();
    TROUPE_RETURN_IF_ERROR(
        validate_decode_batch(c, cache_blocks_, kv_.block_size, max_tokens_, requests));
    const int H = hidden_rows(requests);
    if (hidden == nullptr && H > 0) {
      return absl::InvalidArgumentError("a decode batch with hidden-state requests needs `hidden`");
    }
    TROUPE_ASSIGN_OR_RETURN(const batch b, upload_batch(requests));
    const int C = c.dim, R = logit_rows(requests), N = b.rows;
    const bf16* w = weights_.data<bf16>();
    bf16* x = x_.data<bf16>();
    const bool gpt2 = c.family == decoder_family::gpt2;
    TROUPE_RETURN_IF_ERROR(cuda::embedding_forward(x, b.tokens, b.positions, N, w + layout_.wte(),
                                                   gpt2 ? w + layout_.wpe() : nullptr, C,
                                                   cuda::default_stream));
    if (!gpt2) {  // no learned positions: RoPE turns queries and keys in each block, by these
      TROUPE_RETURN_IF_ERROR(cuda::rope_angles(rope_cos_.data<float>(), rope_sin_.data<float>(),
                                               b.positions, N, c.head_size(),
                                               inv_freq_.data<float>(), cuda::default_stream));
    }
    for (int l = 0; l < c.layers; ++l)
      TROUPE_RETURN_IF_ERROR(gpt2 ? gpt2_block(b, l) : llama_block(b, l));
    // Only each request's last logit_rows rows go through the final norm: the rows for the head
    // first, then those wanted as hidden states (embeddings), each in request order.
    int row = 0, head_at = 0, hidden_at = R;
    for (const auto& r : requests) {
      row += r.count;
      const int64_t n = int64_t{r.logit_rows} * C;
      int& out = r.hidden ? hidden_at : head_at;
      TROUPE_ASSIGN_OR_RETURN(tensor::tensor from,
                              x_.narrow(0, int64_t{row - r.logit_rows} * C, n));
      TROUPE_ASSIGN_OR_RETURN(tensor::tensor to, last_.narrow(0, int64_t{out} * C, n));
      TROUPE_RETURN_IF_ERROR(tensor::copy(to, from));
      out += r.logit_rows;
    }
    bf16* ln = ln_.data<bf16>();
    if (gpt2) {
      TROUPE_RETURN_IF_ERROR(cuda::layernorm_forward(
          ln, mean_.data<float>(), rstd_.data<float>(), last_.data<bf16>(), w + layout_.lnf_w(),
          w + layout_.lnf_b(), R + H, C, cuda::default_stream));
    } else {
      TROUPE_RETURN_IF_ERROR(cuda::rmsnorm_forward(ln, nullptr, last_.data<bf16>(),
                                                   w + layout_.lnf_w(), {.tokens = R + H, .dim = C},
                                                   c.norm_eps, cuda::default_stream));
    }
    if (H > 0) {  // the final norm's output, bf16 widened to f32
      TROUPE_ASSIGN_OR_RETURN(tensor::tensor rows, ln_.narrow(0, int64_t{R} * C, int64_t{H} * C));
      TROUPE_ASSIGN_OR_RETURN(tensor::tensor on_host, rows.to(tensor::device::cpu()));
      for (int64_t i = 0; i < int64_t{H} * C; ++i)
        hidden[i] = static_cast<float>(on_host.data<bf16>()[i]);
    }
    if (R == 0) return absl::OkStatus();
    const int64_t n = int64_t{R} * c.vocab;
    if (const kernels::quantized_matrix* head = quantized(layout_.head_weight())) {  // bf16 out
      TROUPE_RETURN_IF_ERROR(cuda::quantized_matmul(logits16_.data<bf16>(), ln, *head, nullptr, R,
                                                    cuda::default_stream));
      TROUPE_ASSIGN_OR_RETURN(tensor::tensor produced, logits16_.narrow(0, 0, n));
      TROUPE_ASSIGN_OR_RETURN(tensor::tensor on_host, produced.to(tensor::device::cpu()));
      for (int64_t i = 0; i < n; ++i)
        logits[i] = static_cast<float>(on_host.data<bf16>()[i]);
      return absl::OkStatus();
    }
    TROUPE_RETURN_IF_ERROR(cuda::matmul(logits_.raw(), dtype::f32, ln, w + layout_.head_weight(),
                                        nullptr, gemm{R, c.vocab, C, false, true},
                                        cuda::default_stream));
    TROUPE_ASSIGN_OR_RETURN(tensor::tensor produced, logits_.narrow(0, 0, n));
    TROUPE_ASSIGN_OR_RETURN(tensor::tensor on_host, produced.to(tensor::device::cpu()));
    std::memcpy(logits, on_host.data<float>(), n * sizeof(float));
    return absl::OkStatus();
  }

 private:
  // A batch's indices on the device: per row its token, position and block table's offset.
  struct batch {
    std::span<const decode_request> requests;
    std::vector<int> table_of;  // each request's block table's offset in `tables`
    int rows = 0;
    const int32_t *tokens = nullptr, *positions = nullptr, *offsets = nullptr, *tables = nullptr;
  };

  // Fills host_indices_ from the requests and uploads them in four copies.
  absl::StatusOr<batch> upload_batch(std::span<const decode_request> requests) {
    batch b{.requests = requests, .table_of = std::vector<int>(requests.size())};
    int32_t* host = host_indices_.data<int32_t>();
    int32_t *tokens = host, *positions = host + max_tokens_, *offsets = host + 2 * max_tokens_;
    int32_t* tables = host + 3 * max_tokens_;
    int table_size = 0;
    for (size_t i = 0; i < requests.size(); ++i) {
      const decode_request& r = requests[i];
      const int blocks = (r.first_position + r.count + kv_.block_size - 1) / kv_.block_size;
      b.table_of[i] = table_size;
      std::memcpy(tables + table_size, r.block_table, blocks * sizeof(int32_t));
      for (int t = 0; t < r.count; ++t, ++b.rows) {
        tokens[b.rows] = r.tokens[t];
        positions[b.rows] = r.first_position + t;
        offsets[b.rows] = table_size;
      }
      table_size += blocks;
    }
    TROUPE_RETURN_IF_ERROR(upload(0, b.rows));
    TROUPE_RETURN_IF_ERROR(upload(max_tokens_, b.rows));
    TROUPE_RETURN_IF_ERROR(upload(2 * max_tokens_, b.rows));
    TROUPE_RETURN_IF_ERROR(upload(3 * max_tokens_, table_size));
    const int32_t* dev = indices_.data<int32_t>();
    b.tokens = dev, b.positions = dev + max_tokens_, b.offsets = dev + 2 * max_tokens_;
    b.tables = dev + 3 * max_tokens_;
    return b;
  }

  // Copies host_indices_[first, first + n) to the device.
  absl::Status upload(int64_t first, int64_t n) {
    if (n == 0) return absl::OkStatus();
    TROUPE_ASSIGN_OR_RETURN(tensor::tensor to, indices_.narrow(0, first, n));
    TROUPE_ASSIGN_OR_RETURN(tensor::tensor from, host_indices_.narrow(0, first, n));
    return tensor::copy(to, from);
  }

  // Appends the batch's keys and values (rows of `stride`) to layer l's cache, then attends
  // each query row (q, row stride `stride`) to its sequence's cache, into atty_.
  absl::Status attend(const batch& b, int l, const bf16* q, const bf16* k, const bf16* v,
                      int64_t stride) {
    const decoder_config& c = layout_.config();
    bf16 *keys = pools_[2 * l].data<bf16>(), *values = pools_[2 * l + 1].data<bf16>();
    int row = 0;
    for (size_t i = 0; i < b.requests.size(); ++i) {
      const decode_request& r = b.requests[i];
      const int64_t at = int64_t{row} * stride;
      TROUPE_RETURN_IF_ERROR(cuda::kv_append(keys, b.tables + b.table_of[i], kv_, r.first_position,
                                             k + at, stride, r.count, cuda::default_stream));
      TROUPE_RETURN_IF_ERROR(cuda::kv_append(values, b.tables + b.table_of[i], kv_,
                                             r.first_position, v + at, stride, r.count,
                                             cuda::default_stream));
      row += r.count;
    }
    return cuda::paged_attention(atty_.data<bf16>(), q, stride, keys, values, b.tables, b.offsets,
                                 b.positions, kv_, b.rows, c.heads, c.kv_head_count(),
                                 cuda::default_stream);
  }

  absl::Status gpt2_block(const batch& b, int l) {
    const int C = layout_.config().dim, N = b.rows;
    const auto& o = layout_.block(l);
    const bf16* w = weights_.data<bf16>();
    bf16 *x = x_.data<bf16>(), *ln = ln_.data<bf16>(), *qkv = qkv_.data<bf16>();
    bf16 *tmp = tmp_.data<bf16>(), *fc = fc_.data<bf16>();
    float *mean = mean_.data<float>(), *rstd = rstd_.data<float>();
    void* st = cuda::default_stream;
    TROUPE_RETURN_IF_ERROR(
        cuda::layernorm_forward(ln, mean, rstd, x, w + o.ln1_w, w + o.ln1_b, N, C, st));
    TROUPE_RETURN_IF_ERROR(linear(qkv, ln, o.attn_w, w + o.attn_b, N, 3 * C, C, false));
    TROUPE_RETURN_IF_ERROR(attend(b, l, qkv, qkv + C, qkv + 2 * C, 3 * C));
    TROUPE_RETURN_IF_ERROR(linear(tmp, atty_.data<bf16>(), o.proj_w, w + o.proj_b, N, C, C, false));
    TROUPE_RETURN_IF_ERROR(cuda::accumulate(x, tmp, int64_t{N} * C, st));
    TROUPE_RETURN_IF_ERROR(
        cuda::layernorm_forward(ln, mean, rstd, x, w + o.ln2_w, w + o.ln2_b, N, C, st));
    TROUPE_RETURN_IF_ERROR(linear(fc, ln, o.fc_w, w + o.fc_b, N, 4 * C, C, false));
    TROUPE_RETURN_IF_ERROR(cuda::gelu_forward(fc, fc, int64_t{N} * 4 * C, st));
    TROUPE_RETURN_IF_ERROR(linear(tmp, fc, o.fc2_w, w + o.fc2_b, N, C, 4 * C, false));
    return cuda::accumulate(x, tmp, int64_t{N} * C, st);
  }

  // Hugging Face's LlamaDecoderLayer (and Qwen 2's and 3's), as the CPU decoder's llama_block,
  // with q, k and v in one GEMM (their weights and biases lie back to back) into rows of
  // [q | k | v], and gate and up likewise into rows of [gate | up].
  absl::Status llama_block(const batch& b, int l) {
    const decoder_config& c = layout_.config();
    const int C = c.dim, Q = c.q_width(), KV = c.kv_width(), F = c.ffn_width(), D = c.head_size(),
              N = b.rows, R = Q + 2 * KV;
    const auto& o = layout_.block(l);
    const bf16* w = weights_.data<bf16>();
    auto bias = [&](int64_t at) { return at >= 0 ? w + at : nullptr; };
    bf16 *x = x_.data<bf16>(), *ln = ln_.data<bf16>(), *qkv = qkv_.data<bf16>();
    bf16 *tmp = tmp_.data<bf16>(), *fc = fc_.data<bf16>();
    const float *cos = rope_cos_.data<float>(), *sin = rope_sin_.data<float>();
    void* st = cuda::default_stream;
    const cuda::norm_rows rows{.tokens = N, .dim = C};
    TROUPE_RETURN_IF_ERROR(
        cuda::rmsnorm_forward(ln, nullptr, x, w + o.ln1_w, rows, c.norm_eps, st));
    TROUPE_RETURN_IF_ERROR(linear(qkv, ln, o.q_w, bias(o.q_b), N, R, C, true));
    if (c.qk_norm) {  // each head's query and key, over its D values
      const cuda::norm_rows q_heads{.tokens = N, .dim = D, .per_token = c.heads, .stride = R};
      const cuda::norm_rows k_heads{
          .tokens = N, .dim = D, .per_token = c.kv_head_count(), .stride = R};
      TROUPE_RETURN_IF_ERROR(
          cuda::rmsnorm_forward(qkv, nullptr, qkv, w + o.q_norm, q_heads, c.norm_eps, st));
      TROUPE_RETURN_IF_ERROR(
          cuda::rmsnorm_forward(qkv + Q, nullptr, qkv + Q, w + o.k_norm, k_heads, c.norm_eps, st));
    }
    TROUPE_RETURN_IF_ERROR(cuda::rope_forward(qkv, R, N, c.heads, D, cos, sin, st));
    TROUPE_RETURN_IF_ERROR(cuda::rope_forward(qkv + Q, R, N, c.kv_head_count(), D, cos, sin, st));
    TROUPE_RETURN_IF_ERROR(attend(b, l, qkv, qkv + Q, qkv + Q + KV, R));
    TROUPE_RETURN_IF_ERROR(linear(tmp, atty_.data<bf16>(), o.o_w, bias(o.o_b), N, C, Q, true));
    TROUPE_RETURN_IF_ERROR(cuda::accumulate(x, tmp, int64_t{N} * C, st));
    TROUPE_RETURN_IF_ERROR(
        cuda::rmsnorm_forward(ln, nullptr, x, w + o.ln2_w, rows, c.norm_eps, st));
    TROUPE_RETURN_IF_ERROR(linear(fc, ln, o.gate_w, nullptr, N, 2 * F, C, true));
    bf16* act = fc + int64_t{N} * 2 * F;  // after the [gate | up] rows
    TROUPE_RETURN_IF_ERROR(cuda::swiglu_forward(act, fc, N, F, st));
    TROUPE_RETURN_IF_ERROR(linear(tmp, act, o.down_w, nullptr, N, C, F, true));
    return cuda::accumulate(x, tmp, int64_t{N} * C, st);
  }

  // The quantized matrix of the f32 weight at `offset` on the device; null when it is bf16.
  const kernels::quantized_matrix* quantized(int64_t offset) const {
    return quantized_ ? quantized_->find(offset) : nullptr;
  }

  // out [N, outputs] = x [N, inputs] times the weight at `offset` ([outputs, inputs], or GPT-2's
  // Conv1D [inputs, outputs]: !out_in), quantized or bf16, plus bias.
  absl::Status linear(bf16* out, const bf16* x, int64_t offset, const bf16* bias, int N,
                      int outputs, int inputs, bool out_in) const {
    if (const kernels::quantized_matrix* q = quantized(offset)) {
      return cuda::quantized_matmul(out, x, *q, bias, N, cuda::default_stream);
    }
    return cuda::matmul(out, dtype::bf16, x, weights_.data<bf16>() + offset, bias,
                        gemm{N, outputs, inputs, false, out_in}, cuda::default_stream);
  }

  const decoder_layout& layout_;
  int max_tokens_;
  int cache_blocks_;
  kernels::kv_layout kv_;
  int device_;
  weight_quantization quantization_;  // of the f32 weights, at each set_weights
  std::shared_ptr<const quantized_weights> prequantized_;
  std::optional<cuda_quantized_weights> quantized_;
  tensor::tensor logits16_;  // a quantized head's bf16 logits
  tensor::tensor weights_;
  std::vector<tensor::tensor> pools_;  // per layer: keys, values
  tensor::tensor x_, ln_, qkv_, atty_, tmp_, fc_, last_, mean_, rstd_, logits_, indices_;
  tensor::tensor inv_freq_, rope_cos_, rope_sin_;  // the Llama family's
  tensor::tensor host_indices_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<paged_decoder>> make_cuda_paged_decoder(
    const decoder_layout& layout, const float* params, int max_tokens, int cache_blocks,
    int block_size, int device, const decoder_options& options) {
  auto devices = tensor::cuda_devices();
  if (!devices.ok()) {
    return absl::UnavailableError(
        absl::StrCat("CUDA device ", device,
                     " asked for, but CUDA cannot be used here: ", devices.status().message()));
  }
  if (device >= static_cast<int>(devices->size())) {
    return absl::UnavailableError(
        absl::StrCat("CUDA device ", device, " asked for, but ", devices->size(), " are visible"));
  }
  if (!layout.range().has_embedding() || !layout.range().has_head(layout.config())) {
    return absl::InvalidArgumentError("the CUDA decoder runs a whole model, not a pipeline stage");
  }
  TROUPE_RETURN_IF_ERROR(cuda_decoder_runs(layout.config()));
  if (options.quantization.enabled() && options.prequantized != nullptr) {
    return absl::InvalidArgumentError("quantize the f32 weights or take quantized ones, not both");
  }
  if (options.kv_dtype != kv_cache_dtype::f32) {
    return absl::InvalidArgumentError(
        "an int8 KV cache (serve.engine.kv_cache_dtype) runs on the CPU decoder only for now: "
        "serve with device: cpu, or kv_cache_dtype: auto");
  }
  auto decoder = std::make_unique<cuda_paged_decoder>(layout, max_tokens, cache_blocks, block_size,
                                                      device, options);
  TROUPE_RETURN_IF_ERROR(decoder->allocate(params));
  return decoder;
}

}  // namespace troupe::models

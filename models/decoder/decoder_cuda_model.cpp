#include "models/decoder/decoder_cuda_model.hpp"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "kernels/adamw.hpp"
#include "kernels/attention.hpp"
#include "kernels/cross_entropy.hpp"
#include "kernels/embedding.hpp"
#include "kernels/gelu.hpp"
#include "kernels/layernorm.hpp"
#include "kernels/matmul.hpp"
#include "kernels/residual.hpp"
#include "kernels/rmsnorm.hpp"
#include "kernels/rope.hpp"
#include "models/decoder/rope_frequencies.hpp"
#include "runtime/tensor/cuda_memory.hpp"

namespace troupe::models {

namespace cuda = kernels::cuda;
using kernels::gemm;
using tensor::bf16;
using tensor::dtype;

absl::StatusOr<std::unique_ptr<decoder_cuda_model>> decoder_cuda_model::create(
    const decoder_layout& layout, int max_batch, int device, uint64_t seed) {
  if (!layout.range().has_embedding() || !layout.range().has_head(layout.config())) {
    return absl::UnimplementedError(
        "decoder_cuda_model holds a whole model; pipeline stages on CUDA "
        "are not built yet");
  }
  if (layout.config().head_size() % 8 != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("the CUDA attention takes heads of a multiple of 8 values; this model's are ",
                     layout.config().head_size()));
  }
  std::unique_ptr<decoder_cuda_model> m(new decoder_cuda_model(layout, device));
  TROUPE_RETURN_IF_ERROR(m->allocate(max_batch));
  if (layout.config().family != decoder_family::gpt2) {  // RoPE's frequencies, once
    const std::vector<float> inv_freq = rope_inverse_frequencies(layout.config());
    tensor::tensor h = tensor::tensor::host({static_cast<int64_t>(inv_freq.size())});
    std::memcpy(h.data<float>(), inv_freq.data(), inv_freq.size() * sizeof(float));
    TROUPE_ASSIGN_OR_RETURN(m->inv_freq_, h.to(tensor::device::cuda(device)));
  }
  std::vector<float> host(layout.total());
  layout.initialize(host.data(), seed);
  tensor::tensor h = tensor::tensor::host({layout.total()});
  std::memcpy(h.data<float>(), host.data(), host.size() * sizeof(float));
  TROUPE_RETURN_IF_ERROR(tensor::copy(m->master_, h));
  tensor::tensor h16 = tensor::tensor::host({layout.total()}, dtype::bf16);
  for (int64_t i = 0; i < layout.total(); ++i)
    h16.data<bf16>()[i] = bf16(host[i]);
  TROUPE_RETURN_IF_ERROR(tensor::copy(m->weights_, h16));
  return m;
}

absl::Status decoder_cuda_model::allocate(int max_batch) {
  const decoder_config& c = layout_.config();
  const auto where = tensor::device::cuda(device_);
  const bool gpt2 = c.family == decoder_family::gpt2;
  const int64_t N = int64_t{max_batch} * c.ctx, C = c.dim, P = layout_.total();
  // Per token: q, k and v; attention's output; the MLP's input projection and activation.
  const int64_t Q = gpt2 ? C : c.q_width();
  const int64_t qkv = gpt2 ? 3 * C : Q + 2 * int64_t{c.kv_width()};
  const int64_t fc = gpt2 ? 4 * C : 2 * int64_t{c.ffn_width()};
  const int64_t act = gpt2 ? 4 * C : c.ffn_width();
  auto make = [&](tensor::tensor& t, int64_t n, dtype type) -> absl::Status {
    TROUPE_ASSIGN_OR_RETURN(t, tensor::tensor::zeros({n}, type, where));
    return absl::OkStatus();
  };
  TROUPE_RETURN_IF_ERROR(make(master_, P, dtype::f32));
  TROUPE_RETURN_IF_ERROR(make(weights_, P, dtype::bf16));
  TROUPE_RETURN_IF_ERROR(make(grads_, P, dtype::f32));
  TROUPE_RETURN_IF_ERROR(make(m_, P, dtype::f32));
  TROUPE_RETURN_IF_ERROR(make(v_, P, dtype::f32));
  x_.resize(c.layers + 1);
  for (auto& x : x_)
    TROUPE_RETURN_IF_ERROR(make(x, N * C, dtype::bf16));
  blocks_.resize(c.layers);
  for (auto& b : blocks_) {
    TROUPE_RETURN_IF_ERROR(make(b.ln1, N * C, dtype::bf16));
    TROUPE_RETURN_IF_ERROR(make(b.ln1_rstd, N, dtype::f32));
    TROUPE_RETURN_IF_ERROR(make(b.qkv, N * qkv, dtype::bf16));
    TROUPE_RETURN_IF_ERROR(make(b.atty, N * Q, dtype::bf16));
    TROUPE_RETURN_IF_ERROR(make(b.lse, int64_t{max_batch} * c.heads * c.ctx, dtype::f32));
    TROUPE_RETURN_IF_ERROR(make(b.mid, N * C, dtype::bf16));
    TROUPE_RETURN_IF_ERROR(make(b.ln2, N * C, dtype::bf16));
    TROUPE_RETURN_IF_ERROR(make(b.ln2_rstd, N, dtype::f32));
    TROUPE_RETURN_IF_ERROR(make(b.fc, N * fc, dtype::bf16));
    TROUPE_RETURN_IF_ERROR(make(b.fc_gelu, N * act, dtype::bf16));
    if (gpt2) {
      TROUPE_RETURN_IF_ERROR(make(b.ln1_mean, N, dtype::f32));
      TROUPE_RETURN_IF_ERROR(make(b.ln2_mean, N, dtype::f32));
    } else if (c.qk_norm) {
      TROUPE_RETURN_IF_ERROR(make(b.qk_raw, N * qkv, dtype::bf16));
      TROUPE_RETURN_IF_ERROR(make(b.qk_rstd, N * (c.heads + c.kv_head_count()), dtype::f32));
    }
  }
  TROUPE_RETURN_IF_ERROR(make(positions_, N, dtype::i32));
  TROUPE_RETURN_IF_ERROR(make(lnf_, N * C, dtype::bf16));
  if (gpt2) TROUPE_RETURN_IF_ERROR(make(lnf_mean_, N, dtype::f32));
  TROUPE_RETURN_IF_ERROR(make(lnf_rstd_, N, dtype::f32));
  TROUPE_RETURN_IF_ERROR(make(logits_, N * c.vocab, dtype::bf16));
  TROUPE_RETURN_IF_ERROR(make(losses_, N, dtype::f32));
  if (!gpt2) {
    TROUPE_RETURN_IF_ERROR(make(rope_cos_, N * c.head_size() / 2, dtype::f32));
    TROUPE_RETURN_IF_ERROR(make(rope_sin_, N * c.head_size() / 2, dtype::f32));
    if (c.qk_norm) TROUPE_RETURN_IF_ERROR(make(dqk_, N * qkv, dtype::bf16));
  }
  TROUPE_RETURN_IF_ERROR(make(dx_, N * C, dtype::bf16));
  TROUPE_RETURN_IF_ERROR(make(dtmp_, N * std::max(C, Q), dtype::bf16));
  TROUPE_RETURN_IF_ERROR(make(dqkv_, N * qkv, dtype::bf16));
  return make(dfc_, N * (fc + act), dtype::bf16);  // d[gate | up] (d fc), then d act
}

absl::StatusOr<loss_sum> decoder_cuda_model::train_step(const tensor::tensor& tokens,
                                                        const tensor::tensor& targets, int batch,
                                                        int seq, float loss_scale) {
  const decoder_config& c = layout_.config();
  const int N = batch * seq, C = c.dim;
  const bf16* w = weights_.data<bf16>();
  float* g = grads_.data<float>();
  tensor::tensor host_positions = tensor::tensor::host({N}, dtype::i32);
  for (int i = 0; i < N; ++i)
    host_positions.data<int32_t>()[i] = i % seq;
  TROUPE_ASSIGN_OR_RETURN(tensor::tensor positions, positions_.narrow(0, 0, N));
  TROUPE_RETURN_IF_ERROR(tensor::copy(positions, host_positions));
  const int32_t* tok = tokens.data<int32_t>();
  const int32_t* pos = positions_.data<int32_t>();

  const bool gpt2 = c.family == decoder_family::gpt2;
  TROUPE_RETURN_IF_ERROR(cuda::embedding_forward(x_[0].data<bf16>(), tok, pos, N, w + layout_.wte(),
                                                 gpt2 ? w + layout_.wpe() : nullptr, C,
                                                 cuda::default_stream));
  if (!gpt2) {  // no learned positions: RoPE turns queries and keys in each block, by these
    TROUPE_RETURN_IF_ERROR(cuda::rope_angles(rope_cos_.data<float>(), rope_sin_.data<float>(), pos,
                                             N, c.head_size(), inv_freq_.data<float>(),
                                             cuda::default_stream));
  }
  for (int l = 0; l < c.layers; ++l) {
    const bf16* in = x_[l].data<bf16>();
    bf16* out = x_[l + 1].data<bf16>();
    TROUPE_RETURN_IF_ERROR(gpt2 ? block_forward(l, batch, seq, in, out)
                                : llama_block_forward(l, batch, seq, in, out));
  }
  TROUPE_RETURN_IF_ERROR(final_norm_forward(N));
  // The head: the tied token embedding, or the Llama family's own lm_head.
  const int64_t head = layout_.head_weight();
  TROUPE_RETURN_IF_ERROR(cuda::matmul(logits_.raw(), dtype::bf16, lnf_.data<bf16>(), w + head,
                                      nullptr, gemm{N, c.vocab, C, false, true},
                                      cuda::default_stream));
  TROUPE_RETURN_IF_ERROR(cuda::cross_entropy_fused(losses_.data<float>(), logits_.data<bf16>(),
                                                   targets.data<int32_t>(), loss_scale, N, c.vocab,
                                                   cuda::default_stream));
  // Backward: logits_ now holds d(logits).
  bf16* dx = dx_.data<bf16>();
  TROUPE_RETURN_IF_ERROR(cuda::matmul(dtmp_.raw(), dtype::bf16, logits_.data<bf16>(), w + head,
                                      nullptr, gemm{N, C, c.vocab}, cuda::default_stream));
  TROUPE_RETURN_IF_ERROR(cuda::matmul(g + head, dtype::f32, logits_.data<bf16>(), lnf_.data<bf16>(),
                                      nullptr, gemm{c.vocab, C, N, true, false, true},
                                      cuda::default_stream));
  TROUPE_RETURN_IF_ERROR(tensor::cuda_zero(dx, int64_t{N} * C * sizeof(bf16)));
  TROUPE_RETURN_IF_ERROR(final_norm_backward(N));
  for (int l = c.layers - 1; l >= 0; --l) {
    const bf16* in = x_[l].data<bf16>();
    TROUPE_RETURN_IF_ERROR(gpt2 ? block_backward(l, batch, seq, in)
                                : llama_block_backward(l, batch, seq, in));
  }
  TROUPE_RETURN_IF_ERROR(cuda::embedding_backward(g + layout_.wte(),
                                                  gpt2 ? g + layout_.wpe() : nullptr, dx, tok, pos,
                                                  N, C, cuda::default_stream));
  TROUPE_ASSIGN_OR_RETURN(tensor::tensor losses, losses_.narrow(0, 0, N));
  TROUPE_ASSIGN_OR_RETURN(tensor::tensor host_losses, losses.to(tensor::device::cpu()));
  TROUPE_ASSIGN_OR_RETURN(tensor::tensor host_targets, targets.to(tensor::device::cpu()));
  loss_sum loss;
  for (int i = 0; i < N; ++i) {
    if (host_targets.data<int32_t>()[i] < 0) continue;
    loss.sum += host_losses.data<float>()[i];
    ++loss.tokens;
  }
  return loss;
}

absl::Status decoder_cuda_model::final_norm_forward(int rows) {
  const decoder_config& c = layout_.config();
  const bf16* w = weights_.data<bf16>();
  if (c.family == decoder_family::gpt2) {
    return cuda::layernorm_forward(
        lnf_.data<bf16>(), lnf_mean_.data<float>(), lnf_rstd_.data<float>(), x_.back().data<bf16>(),
        w + layout_.lnf_w(), w + layout_.lnf_b(), rows, c.dim, cuda::default_stream);
  }
  return cuda::rmsnorm_forward(lnf_.data<bf16>(), lnf_rstd_.data<float>(), x_.back().data<bf16>(),
                               w + layout_.lnf_w(), cuda::norm_rows{.tokens = rows, .dim = c.dim},
                               c.norm_eps, cuda::default_stream);
}

absl::Status decoder_cuda_model::final_norm_backward(int rows) {
  const decoder_config& c = layout_.config();
  const bf16* w = weights_.data<bf16>();
  float* g = grads_.data<float>();
  if (c.family == decoder_family::gpt2) {
    return cuda::layernorm_backward(dx_.data<bf16>(), g + layout_.lnf_w(), g + layout_.lnf_b(),
                                    dtmp_.data<bf16>(), x_.back().data<bf16>(), w + layout_.lnf_w(),
                                    lnf_mean_.data<float>(), lnf_rstd_.data<float>(), rows, c.dim,
                                    cuda::default_stream);
  }
  return cuda::rmsnorm_backward(
      dx_.data<bf16>(), g + layout_.lnf_w(), dtmp_.data<bf16>(), x_.back().data<bf16>(),
      w + layout_.lnf_w(), lnf_rstd_.data<float>(), cuda::norm_rows{.tokens = rows, .dim = c.dim},
      cuda::default_stream);
}

absl::Status decoder_cuda_model::block_forward(int layer, int batch, int seq, const bf16* in,
                                               bf16* out) {
  const decoder_config& c = layout_.config();
  const auto& o = layout_.block(layer);
  auto& a = blocks_[layer];
  const int N = batch * seq, C = c.dim;
  const bf16* w = weights_.data<bf16>();
  bf16* tmp = dtmp_.data<bf16>();
  TROUPE_RETURN_IF_ERROR(cuda::layernorm_forward(a.ln1.data<bf16>(), a.ln1_mean.data<float>(),
                                                 a.ln1_rstd.data<float>(), in, w + o.ln1_w,
                                                 w + o.ln1_b, N, C, cuda::default_stream));
  TROUPE_RETURN_IF_ERROR(cuda::matmul(a.qkv.raw(), dtype::bf16, a.ln1.data<bf16>(), w + o.attn_w,
                                      w + o.attn_b, gemm{N, 3 * C, C}, cuda::default_stream));
  TROUPE_RETURN_IF_ERROR(cuda::attention_forward(a.atty.data<bf16>(), a.lse.data<float>(),
                                                 a.qkv.data<bf16>(), {batch, seq, C, c.heads},
                                                 cuda::default_stream));
  TROUPE_RETURN_IF_ERROR(cuda::matmul(tmp, dtype::bf16, a.atty.data<bf16>(), w + o.proj_w,
                                      w + o.proj_b, gemm{N, C, C}, cuda::default_stream));
  TROUPE_RETURN_IF_ERROR(
      cuda::residual_forward(a.mid.data<bf16>(), in, tmp, int64_t{N} * C, cuda::default_stream));
  TROUPE_RETURN_IF_ERROR(cuda::layernorm_forward(
      a.ln2.data<bf16>(), a.ln2_mean.data<float>(), a.ln2_rstd.data<float>(), a.mid.data<bf16>(),
      w + o.ln2_w, w + o.ln2_b, N, C, cuda::default_stream));
  TROUPE_RETURN_IF_ERROR(cuda::matmul(a.fc.raw(), dtype::bf16, a.ln2.data<bf16>(), w + o.fc_w,
                                      w + o.fc_b, gemm{N, 4 * C, C}, cuda::default_stream));
  TROUPE_RETURN_IF_ERROR(cuda::gelu_forward(a.fc_gelu.data<bf16>(), a.fc.data<bf16>(),
                                            int64_t{N} * 4 * C, cuda::default_stream));
  TROUPE_RETURN_IF_ERROR(cuda::matmul(tmp, dtype::bf16, a.fc_gelu.data<bf16>(), w + o.fc2_w,
                                      w + o.fc2_b, gemm{N, C, 4 * C}, cuda::default_stream));
  return cuda::residual_forward(out, a.mid.data<bf16>(), tmp, int64_t{N} * C, cuda::default_stream);
}

absl::Status decoder_cuda_model::block_backward(int layer, int batch, int seq, const bf16* in) {
  const decoder_config& c = layout_.config();
  const auto& o = layout_.block(layer);
  auto& a = blocks_[layer];
  const int N = batch * seq, C = c.dim;
  const bf16* w = weights_.data<bf16>();
  float* g = grads_.data<float>();
  bf16* dx = dx_.data<bf16>();
  bf16* dtmp = dtmp_.data<bf16>();
  bf16* dfc = dfc_.data<bf16>();
  bf16* dqkv = dqkv_.data<bf16>();
  TROUPE_RETURN_IF_ERROR(cuda::matmul(dfc, dtype::bf16, dx, w + o.fc2_w, nullptr,
                                      gemm{N, 4 * C, C, false, true}, cuda::default_stream));
  TROUPE_RETURN_IF_ERROR(cuda::matmul(g + o.fc2_w, dtype::f32, a.fc_gelu.data<bf16>(), dx, nullptr,
                                      gemm{4 * C, C, N, true, false, true}, cuda::default_stream));
  TROUPE_RETURN_IF_ERROR(cuda::bias_backward(g + o.fc2_b, dx, N, C, cuda::default_stream));
  TROUPE_RETURN_IF_ERROR(
      cuda::gelu_backward(dfc, a.fc.data<bf16>(), dfc, int64_t{N} * 4 * C, cuda::default_stream));
  TROUPE_RETURN_IF_ERROR(cuda::matmul(dtmp, dtype::bf16, dfc, w + o.fc_w, nullptr,
                                      gemm{N, C, 4 * C, false, true}, cuda::default_stream));
  TROUPE_RETURN_IF_ERROR(cuda::matmul(g + o.fc_w, dtype::f32, a.ln2.data<bf16>(), dfc, nullptr,
                                      gemm{C, 4 * C, N, true, false, true}, cuda::default_stream));
  TROUPE_RETURN_IF_ERROR(cuda::bias_backward(g + o.fc_b, dfc, N, 4 * C, cuda::default_stream));
  TROUPE_RETURN_IF_ERROR(cuda::layernorm_backward(
      dx, g + o.ln2_w, g + o.ln2_b, dtmp, a.mid.data<bf16>(), w + o.ln2_w, a.ln2_mean.data<float>(),
      a.ln2_rstd.data<float>(), N, C, cuda::default_stream));
  TROUPE_RETURN_IF_ERROR(cuda::matmul(dtmp, dtype::bf16, dx, w + o.proj_w, nullptr,
                                      gemm{N, C, C, false, true}, cuda::default_stream));
  TROUPE_RETURN_IF_ERROR(cuda::matmul(g + o.proj_w, dtype::f32, a.atty.data<bf16>(), dx, nullptr,
                                      gemm{C, C, N, true, false, true}, cuda::default_stream));
  TROUPE_RETURN_IF_ERROR(cuda::bias_backward(g + o.proj_b, dx, N, C, cuda::default_stream));
  TROUPE_RETURN_IF_ERROR(cuda::attention_backward(dqkv, dtmp, a.qkv.data<bf16>(),
                                                  a.atty.data<bf16>(), a.lse.data<float>(),
                                                  {batch, seq, C, c.heads}, cuda::default_stream));
  TROUPE_RETURN_IF_ERROR(cuda::matmul(dtmp, dtype::bf16, dqkv, w + o.attn_w, nullptr,
                                      gemm{N, C, 3 * C, false, true}, cuda::default_stream));
  TROUPE_RETURN_IF_ERROR(cuda::matmul(g + o.attn_w, dtype::f32, a.ln1.data<bf16>(), dqkv, nullptr,
                                      gemm{C, 3 * C, N, true, false, true}, cuda::default_stream));
  TROUPE_RETURN_IF_ERROR(cuda::bias_backward(g + o.attn_b, dqkv, N, 3 * C, cuda::default_stream));
  return cuda::layernorm_backward(dx, g + o.ln1_w, g + o.ln1_b, dtmp, in, w + o.ln1_w,
                                  a.ln1_mean.data<float>(), a.ln1_rstd.data<float>(), N, C,
                                  cuda::default_stream);
}

absl::Status decoder_cuda_model::optimizer_step(const kernels::adamw_params& p,
                                                float weight_decay) {
  ++steps_;
  for (const auto& slot : layout_.slots()) {
    kernels::adamw_params q = p;
    q.step = steps_;
    q.weight_decay = slot.decay ? weight_decay : 0.0f;
    TROUPE_RETURN_IF_ERROR(cuda::adamw_update(
        master_.data<float>() + slot.offset, weights_.data<bf16>() + slot.offset,
        grads_.data<float>() + slot.offset, m_.data<float>() + slot.offset,
        v_.data<float>() + slot.offset, slot.numel, q, 1.0f, cuda::default_stream));
  }
  return tensor::zero(grads_);
}

}  // namespace troupe::models

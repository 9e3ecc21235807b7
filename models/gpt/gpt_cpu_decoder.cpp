#include "models/gpt/gpt_cpu_decoder.hpp"

#include <cstring>

#include "kernels/attention.hpp"
#include "kernels/embedding.hpp"
#include "kernels/gelu.hpp"
#include "kernels/layernorm.hpp"
#include "kernels/matmul.hpp"
#include "kernels/residual.hpp"

namespace troupe::models {

namespace k = kernels::cpu;
using kernels::gemm;

gpt_cpu_decoder::gpt_cpu_decoder(const gpt_layout& layout, const float* params, int max_tokens,
                                 int cache_blocks, int block_size)
    : layout_(layout),
      params_(params),
      max_tokens_(max_tokens),
      cache_(layout.config(), cache_blocks, block_size) {
  const int64_t N = max_tokens, C = layout.config().dim, T = layout.config().ctx;
  x_.resize(N * C), ln_.resize(N * C), qkv_.resize(N * 3 * C), atty_.resize(N * C);
  tmp_.resize(N * C), fc_.resize(N * 4 * C), k_.resize(T * C), v_.resize(T * C);
  last_.resize(N * C), tokens_.resize(N), positions_.resize(N);
}

absl::Status gpt_cpu_decoder::forward(std::span<const decode_request> requests, float* logits) {
  TROUPE_RETURN_IF_ERROR(validate_decode_batch(layout_.config(), cache_.blocks(),
                                               cache_.layout().block_size, max_tokens_, requests));
  const float* params = params_;
  gpt_kv_cache& cache = cache_;
  const gpt_config& c = layout_.config();
  const int C = c.dim;
  int N = 0;
  for (const auto& r : requests) {
    for (int t = 0; t < r.count; ++t, ++N) {
      tokens_[N] = r.tokens[t];
      positions_[N] = r.first_position + t;
    }
  }
  float* x = x_.data();
  k::embedding_forward(x, tokens_.data(), positions_.data(), N, params + layout_.wte(),
                       params + layout_.wpe(), C);
  for (int l = 0; l < c.layers; ++l) {
    const auto& o = layout_.block(l);
    k::layernorm_forward(ln_.data(), tmp_.data(), tmp_.data() + N, x, params + o.ln1_w,
                         params + o.ln1_b, N, C);
    k::matmul(qkv_.data(), ln_.data(), params + o.attn_w, params + o.attn_b, gemm{N, 3 * C, C});
    int row = 0;
    for (const auto& r : requests) {
      const float* q = qkv_.data() + int64_t{row} * 3 * C;
      k::kv_append(cache.keys(l), r.block_table, cache.layout(), r.first_position, q + C, 3 * C,
                   r.count);
      k::kv_append(cache.values(l), r.block_table, cache.layout(), r.first_position, q + 2 * C,
                   3 * C, r.count);
      const int keys = r.first_position + r.count;
      k::kv_gather(k_.data(), cache.keys(l), r.block_table, cache.layout(), keys);
      k::kv_gather(v_.data(), cache.values(l), r.block_table, cache.layout(), keys);
      k::cached_attention_forward(atty_.data() + int64_t{row} * C, q, 3 * C, k_.data(), v_.data(),
                                  C, r.count, r.first_position, C, c.heads);
      row += r.count;
    }
    k::matmul(tmp_.data(), atty_.data(), params + o.proj_w, params + o.proj_b, gemm{N, C, C});
    k::accumulate(x, tmp_.data(), int64_t{N} * C);
    k::layernorm_forward(ln_.data(), tmp_.data(), tmp_.data() + N, x, params + o.ln2_w,
                         params + o.ln2_b, N, C);
    k::matmul(fc_.data(), ln_.data(), params + o.fc_w, params + o.fc_b, gemm{N, 4 * C, C});
    k::gelu_forward(fc_.data(), fc_.data(), int64_t{N} * 4 * C);
    k::matmul(tmp_.data(), fc_.data(), params + o.fc2_w, params + o.fc2_b, gemm{N, C, 4 * C});
    k::accumulate(x, tmp_.data(), int64_t{N} * C);
  }
  // Only each request's last row goes through the head.
  const int R = static_cast<int>(requests.size());
  int row = 0;
  for (int i = 0; i < R; ++i) {
    row += requests[i].count;
    std::memcpy(last_.data() + int64_t{i} * C, x + int64_t{row - 1} * C, C * sizeof(float));
  }
  k::layernorm_forward(ln_.data(), tmp_.data(), tmp_.data() + R, last_.data(),
                       params + layout_.lnf_w(), params + layout_.lnf_b(), R, C);
  k::matmul(logits, ln_.data(), params + layout_.wte(), nullptr, gemm{R, c.vocab, C, false, true});
  return absl::OkStatus();
}

}  // namespace troupe::models

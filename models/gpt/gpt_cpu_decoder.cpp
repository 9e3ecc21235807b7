#include "models/gpt/gpt_cpu_decoder.hpp"

#include <algorithm>
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

std::vector<size_t> decode_group_bounds(std::span<const decode_request> requests,
                                        const gpt_config& config, int groups) {
  // Each request's work in multiply-adds over the width C: 12 C^2 a token and block for the
  // GEMMs, V C for its head row, and per block about (3 + 2 count) C a key for gathering its keys
  // and values and attending to them.
  std::vector<int64_t> done = {0};  // the work of requests [0, i)
  for (const auto& r : requests) {
    const int64_t keys = r.first_position + r.count;
    done.push_back(done.back() + int64_t{12} * config.layers * config.dim * r.count + config.vocab +
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

gpt_cpu_decoder::gpt_cpu_decoder(const gpt_layout& layout, const float* params, int max_tokens,
                                 int cache_blocks, int block_size, kernels::cpu::thread_pool* pool)
    : layout_(layout),
      params_(params),
      max_tokens_(max_tokens),
      cache_(layout.config(), cache_blocks, block_size),
      pool_(pool),
      scratch_(pool != nullptr ? pool->size() : 1) {
  const int64_t N = max_tokens, C = layout.config().dim, T = layout.config().ctx;
  for (scratch& s : scratch_) {
    s.x.resize(N * C), s.ln.resize(N * C), s.qkv.resize(N * 3 * C), s.atty.resize(N * C);
    s.tmp.resize(N * C), s.fc.resize(N * 4 * C), s.k.resize(T), s.v.resize(T);
    s.last.resize(N * C), s.tokens.resize(N), s.positions.resize(N);
  }
}

absl::Status gpt_cpu_decoder::forward(std::span<const decode_request> requests, float* logits) {
  TROUPE_RETURN_IF_ERROR(validate_decode_batch(layout_.config(), cache_.blocks(),
                                               cache_.layout().block_size, max_tokens_, requests));
  const int groups = std::min<int>(static_cast<int>(scratch_.size()), requests.size());
  const std::vector<size_t> bounds = decode_group_bounds(requests, layout_.config(), groups);
  const int vocab = layout_.config().vocab;
  k::parallel_for(pool_, static_cast<int64_t>(bounds.size()) - 1, [&](int64_t g) {
    const size_t first = bounds[g], last = bounds[g + 1];
    if (first == last) return;
    forward_group(requests.subspan(first, last - first), logits + first * vocab, scratch_[g]);
  });
  return absl::OkStatus();
}

void gpt_cpu_decoder::forward_group(std::span<const decode_request> requests, float* logits,
                                    scratch& s) {
  const float* params = params_;
  gpt_kv_cache& cache = cache_;
  const gpt_config& c = layout_.config();
  const int C = c.dim;
  int N = 0;
  for (const auto& r : requests) {
    for (int t = 0; t < r.count; ++t, ++N) {
      s.tokens[N] = r.tokens[t];
      s.positions[N] = r.first_position + t;
    }
  }
  float* x = s.x.data();
  k::embedding_forward(x, s.tokens.data(), s.positions.data(), N, params + layout_.wte(),
                       params + layout_.wpe(), C);
  for (int l = 0; l < c.layers; ++l) {
    const auto& o = layout_.block(l);
    k::layernorm_forward(s.ln.data(), s.tmp.data(), s.tmp.data() + N, x, params + o.ln1_w,
                         params + o.ln1_b, N, C);
    k::matmul(s.qkv.data(), s.ln.data(), params + o.attn_w, params + o.attn_b, gemm{N, 3 * C, C});
    int row = 0;
    for (const auto& r : requests) {
      const float* q = s.qkv.data() + int64_t{row} * 3 * C;
      k::kv_append(cache.keys(l), r.block_table, cache.layout(), r.first_position, q + C, 3 * C,
                   r.count);
      k::kv_append(cache.values(l), r.block_table, cache.layout(), r.first_position, q + 2 * C,
                   3 * C, r.count);
      const int keys = r.first_position + r.count;
      k::kv_rows(s.k.data(), cache.keys(l), r.block_table, cache.layout(), keys);
      k::kv_rows(s.v.data(), cache.values(l), r.block_table, cache.layout(), keys);
      k::cached_attention_forward(s.atty.data() + int64_t{row} * C, q, 3 * C, s.k.data(),
                                  s.v.data(), r.count, r.first_position, C, c.heads);
      row += r.count;
    }
    k::matmul(s.tmp.data(), s.atty.data(), params + o.proj_w, params + o.proj_b, gemm{N, C, C});
    k::accumulate(x, s.tmp.data(), int64_t{N} * C);
    k::layernorm_forward(s.ln.data(), s.tmp.data(), s.tmp.data() + N, x, params + o.ln2_w,
                         params + o.ln2_b, N, C);
    k::matmul(s.fc.data(), s.ln.data(), params + o.fc_w, params + o.fc_b, gemm{N, 4 * C, C});
    k::gelu_forward(s.fc.data(), s.fc.data(), int64_t{N} * 4 * C);
    k::matmul(s.tmp.data(), s.fc.data(), params + o.fc2_w, params + o.fc2_b, gemm{N, C, 4 * C});
    k::accumulate(x, s.tmp.data(), int64_t{N} * C);
  }
  // Only each request's last row goes through the head.
  const int R = static_cast<int>(requests.size());
  int row = 0;
  for (int i = 0; i < R; ++i) {
    row += requests[i].count;
    std::memcpy(s.last.data() + int64_t{i} * C, x + int64_t{row - 1} * C, C * sizeof(float));
  }
  k::layernorm_forward(s.ln.data(), s.tmp.data(), s.tmp.data() + R, s.last.data(),
                       params + layout_.lnf_w(), params + layout_.lnf_b(), R, C);
  k::matmul(logits, s.ln.data(), params + layout_.wte(), nullptr, gemm{R, c.vocab, C, false, true});
}

}  // namespace troupe::models

#include "kernels/attention.hpp"

#include <cmath>

#include <gtest/gtest.h>

#include "kernels/cpu/thread_pool.hpp"
#include "tests/kernels/gradient_check.hpp"

namespace troupe::kernels {
namespace {

using testing::random_values;

// Naive causal attention in double; query head h reads key/value head h / (heads / kv_heads).
std::vector<float> reference(const std::vector<float>& qkv, const attention_shape& s) {
  const int T = s.seq, C = s.dim, hd = s.head_dim(), ld = s.row_width();
  const int kv_dim = s.kv_head_count() * hd;
  std::vector<float> out(int64_t{s.batch} * T * C);
  for (int b = 0; b < s.batch; ++b) {
    for (int h = 0; h < s.heads; ++h) {
      const int g = h / (s.heads / s.kv_head_count());
      for (int t = 0; t < T; ++t) {
        const float* q = &qkv[(b * T + t) * ld + h * hd];
        std::vector<double> w(t + 1);
        double max = -1e300, sum = 0;
        for (int u = 0; u <= t; ++u) {
          const float* k = &qkv[(b * T + u) * ld + C + g * hd];
          double d = 0;
          for (int i = 0; i < hd; ++i)
            d += double{q[i]} * k[i];
          w[u] = d / std::sqrt(double(hd));
          max = std::max(max, w[u]);
        }
        for (auto& x : w)
          sum += (x = std::exp(x - max));
        for (int i = 0; i < hd; ++i) {
          double o = 0;
          for (int u = 0; u <= t; ++u)
            o += w[u] / sum * qkv[(b * T + u) * ld + C + kv_dim + g * hd + i];
          out[(b * T + t) * C + h * hd + i] = static_cast<float>(o);
        }
      }
    }
  }
  return out;
}

TEST(Attention, ForwardMatchesNaiveCausalAttention) {
  cpu::thread_pool pool(2);
  // Odd lengths cross the 32-row blocks unevenly; a head of 12 ends in a part of eight lanes.
  // Grouped-query (4 heads on 2 key/value heads) and multi-query (on 1) attention too.
  for (const auto& [seq, heads, kv_heads] : {std::tuple{1, 3, 0},
                                             {5, 3, 0},
                                             {45, 3, 0},
                                             {70, 3, 0},
                                             {45, 2, 0},
                                             {45, 4, 2},
                                             {33, 4, 1}}) {
    const attention_shape s{2, seq, 24, heads, kv_heads};
    auto qkv = random_values(int64_t{s.batch} * seq * s.row_width(), seq, -2, 2);
    std::vector<float> out(int64_t{s.batch} * seq * s.dim),
        probs(int64_t{s.batch} * s.heads * seq * seq);
    cpu::attention_forward(out.data(), probs.data(), qkv.data(), s, &pool);
    auto want = reference(qkv, s);
    for (size_t i = 0; i < out.size(); ++i)
      ASSERT_NEAR(out[i], want[i], 2e-5) << seq << " " << i;
  }
}

class AttentionBackward : public ::testing::TestWithParam<int> {};

// Each key/value head's gradient sums its query heads' (kv_heads 0: as many as heads; 2 and 1:
// grouped-query and multi-query attention), on two threads.
TEST_P(AttentionBackward, MatchesFiniteDifferences) {
  cpu::thread_pool pool(2);
  const attention_shape s{2, 37, 16, 4, GetParam()};
  auto qkv = random_values(int64_t{s.batch} * s.seq * s.row_width(), 7);
  auto probe = random_values(int64_t{s.batch} * s.seq * s.dim, 8);
  std::vector<float> out(probe.size()), probs(int64_t{s.batch} * s.heads * s.seq * s.seq);
  auto loss = [&] {
    cpu::attention_forward(out.data(), probs.data(), qkv.data(), s, nullptr);
    return testing::project(out, probe);
  };
  loss();
  std::vector<float> dqkv(qkv.size(), 123.0f);
  cpu::attention_backward(dqkv.data(), probe.data(), qkv.data(), probs.data(), s, &pool);
  testing::expect_gradient("dqkv", qkv, dqkv, loss, 1e-2f, 2e-3, 2e-2, 400);
}
INSTANTIATE_TEST_SUITE_P(KeyValueHeads, AttentionBackward, ::testing::Values(0, 2, 1));

// Batch invariance: a decoder's rows, computed from the cache in chunks of any size, equal the
// training forward's rows bit for bit, whatever else is in the batch.
TEST(Attention, CachedAttentionEqualsTheMatchingFullRowsBitForBit) {
  const attention_shape s{3, 29, 24, 3};  // head_dim 8; 29 keys cross the 8-key blocks unevenly
  auto qkv = random_values(int64_t{s.batch} * s.seq * 3 * s.dim, 9, -2, 2);
  std::vector<float> full(int64_t{s.batch} * s.seq * s.dim),
      probs(int64_t{s.batch} * s.heads * s.seq * s.seq);
  cpu::thread_pool pool(2);
  cpu::attention_forward(full.data(), probs.data(), qkv.data(), s, &pool);
  for (int b = 0; b < s.batch; ++b) {
    const float* seq = qkv.data() + int64_t{b} * s.seq * 3 * s.dim;
    for (int chunk : {1, 3, 8, 29}) {
      for (int first = 0; first < s.seq; first += chunk) {
        const int queries = std::min(chunk, s.seq - first);
        std::vector<float> out(queries * s.dim);
        std::vector<const float*> keys, values;
        for (int p = 0; p < first + queries; ++p) {
          keys.push_back(seq + (p * 3 + 1) * s.dim);
          values.push_back(seq + (p * 3 + 2) * s.dim);
        }
        cpu::cached_attention_forward(out.data(), seq + first * 3 * s.dim, 3 * s.dim, keys.data(),
                                      values.data(), queries, first, s.dim, s.heads);
        for (int i = 0; i < queries * s.dim; ++i) {
          ASSERT_EQ(out[i], full[(int64_t{b} * s.seq + first) * s.dim + i])
              << "sequence " << b << ", chunks of " << chunk << ", position " << first + i / s.dim;
        }
      }
    }
  }
}

// Grouped-query attention: kv_heads key/value heads, each shared by heads / kv_heads query
// heads, gives the bits of plain attention over the same keys repeated for each query head
// (transformers' repeat_kv).
TEST(CachedAttention, GroupedQueryAttentionEqualsRepeatedKeysAndValues) {
  const int heads = 6, kv_heads = 2, hd = 8, dim = heads * hd, kv = kv_heads * hd;
  const int n = 13, queries = 4, first = n - queries;
  const auto q = random_values(int64_t{queries} * dim, 3, -2, 2);
  const auto k = random_values(int64_t{n} * kv, 4, -2, 2);
  const auto v = random_values(int64_t{n} * kv, 5, -2, 2);
  std::vector<float> k_rep(int64_t{n} * dim), v_rep(int64_t{n} * dim);
  for (int p = 0; p < n; ++p) {
    for (int h = 0; h < heads; ++h) {
      for (int i = 0; i < hd; ++i) {
        k_rep[p * dim + h * hd + i] = k[p * kv + (h / (heads / kv_heads)) * hd + i];
        v_rep[p * dim + h * hd + i] = v[p * kv + (h / (heads / kv_heads)) * hd + i];
      }
    }
  }
  std::vector<const float*> keys, values, keys_rep, values_rep;
  for (int p = 0; p < n; ++p) {
    keys.push_back(&k[p * kv]);
    values.push_back(&v[p * kv]);
    keys_rep.push_back(&k_rep[p * dim]);
    values_rep.push_back(&v_rep[p * dim]);
  }
  std::vector<float> grouped(queries * dim), repeated(queries * dim);
  cpu::cached_attention_forward(grouped.data(), q.data(), dim, keys.data(), values.data(), queries,
                                first, dim, heads, kv_heads);
  cpu::cached_attention_forward(repeated.data(), q.data(), dim, keys_rep.data(), values_rep.data(),
                                queries, first, dim, heads);
  EXPECT_EQ(grouped, repeated);
}

}  // namespace
}  // namespace troupe::kernels

#include "models/decoder/cpu_paged_decoder.hpp"

#include <cmath>

#include <gtest/gtest.h>

#include "kernels/cpu/thread_pool.hpp"
#include "kernels/matmul.hpp"
#include "kernels/sampling.hpp"
#include "models/decoder/decoder_cpu_stage.hpp"

namespace troupe::models {
namespace {

const decoder_config cpu_decoder_model{40, 24, 2, 16, 4};

class CpuPagedDecoderTest : public ::testing::Test {
 protected:
  CpuPagedDecoderTest()
      : layout_(cpu_decoder_model, layer_range::all(cpu_decoder_model)), params_(layout_.total()) {
    layout_.initialize(params_.data(), 11);
    for (auto& p : params_)
      p *= 5;  // sharper distributions than the 0.02 init
  }

  // The training forward's logits at every position of `tokens`, as the policy sees them: the
  // negated token losses of every possible next token, one forward per target.
  std::vector<float> training_log_probs(const std::vector<int32_t>& tokens) {
    const int T = static_cast<int>(tokens.size());
    std::vector<float> out(int64_t{T} * cpu_decoder_model.vocab);
    decoder_cpu_stage stage(layout_, 1, nullptr);
    for (int v = 0; v < cpu_decoder_model.vocab; ++v) {
      std::vector<int32_t> targets(T, v);
      stage.forward(params_.data(), 1, T, tokens.data(), nullptr, targets.data());
      for (int t = 0; t < T; ++t)
        out[int64_t{t} * cpu_decoder_model.vocab + v] = -stage.token_losses()[t];
    }
    return out;
  }

  // Decodes a and b together (prefill chunks, then a token of each at a time) and checks each
  // step's log-probs against want_a and want_b.
  void decode_both(const std::vector<int32_t>& a, const std::vector<int32_t>& b,
                   const std::vector<float>& want_a, const std::vector<float>& want_b,
                   kernels::cpu::thread_pool* pool);

  decoder_layout layout_;
  std::vector<float> params_;
};

// Batch invariance: the decoder's log-probs (prefill chunks and single tokens, two sequences
// in one batch, scrambled cache blocks) are the training forward's, bit for bit, so an RL
// rollout's log-probs are the policy's; on one thread, and on two, where each sequence runs in
// a group of its own.
TEST_F(CpuPagedDecoderTest, IncrementalDecodingEqualsTheFullForwardBitForBit) {
  const std::vector<int32_t> a = {3, 17, 5, 22, 9, 1, 30, 12, 8, 39, 0, 4, 6};
  const std::vector<int32_t> b = {7, 7, 2, 35, 11, 19, 26, 13, 33};
  const auto want_a = training_log_probs(a), want_b = training_log_probs(b);
  for (int threads : {1, 2}) {
    SCOPED_TRACE(testing::Message() << threads << " threads");
    kernels::cpu::thread_pool pool(threads);
    decode_both(a, b, want_a, want_b, threads > 1 ? &pool : nullptr);
  }
}

void CpuPagedDecoderTest::decode_both(const std::vector<int32_t>& a, const std::vector<int32_t>& b,
                                      const std::vector<float>& want_a,
                                      const std::vector<float>& want_b,
                                      kernels::cpu::thread_pool* pool) {
  cpu_paged_decoder decoder(layout_, params_.data(), 16, 8, 4, pool);
  const std::vector<int32_t> table_a = {5, 0, 7, 2}, table_b = {1, 6, 3};  // scrambled blocks
  std::vector<float> logits(2 * cpu_decoder_model.vocab);
  // Prefill chunks of different lengths in one batch, then one token at a time for both.
  int pos_a = 5, pos_b = 3;
  std::vector<decode_request> batch = {{a.data(), pos_a, 0, table_a.data(), 4},
                                       {b.data(), pos_b, 0, table_b.data(), 3}};
  for (;;) {
    ASSERT_TRUE(decoder.forward(batch, logits.data()).ok());
    for (size_t r = 0; r < batch.size(); ++r) {
      const bool is_a = batch[r].tokens >= a.data() && batch[r].tokens < a.data() + a.size();
      const int last = batch[r].first_position + batch[r].count - 1;
      const auto& want = is_a ? want_a : want_b;
      for (int v = 0; v < cpu_decoder_model.vocab; ++v) {
        ASSERT_EQ(kernels::cpu::token_log_prob(logits.data() + r * cpu_decoder_model.vocab,
                                               cpu_decoder_model.vocab, 1.0f, v),
                  want[last * cpu_decoder_model.vocab + v])
            << (is_a ? "a" : "b") << " position " << last << " token " << v;
      }
    }
    batch.clear();
    if (pos_a < static_cast<int>(a.size()))
      batch.push_back({a.data() + pos_a, 1, pos_a, table_a.data(), 4}), ++pos_a;
    if (pos_b < static_cast<int>(b.size()))
      batch.push_back({b.data() + pos_b, 1, pos_b, table_b.data(), 3}), ++pos_b;
    if (batch.empty()) break;
  }
}

// Speculative decoding's check: a chunk's logits after each of its last logit_rows tokens, every
// row the training forward's bit for bit, rows of several requests one after another; on one
// thread and on two, where the second group writes after the first group's rows.
TEST_F(CpuPagedDecoderTest, LogitRowsAfterEachOfAChunksLastTokens) {
  const std::vector<int32_t> a = {3, 17, 5, 22, 9, 1, 30, 12}, b = {7, 7, 2, 35, 11, 19};
  const auto want_a = training_log_probs(a), want_b = training_log_probs(b);
  const int V = cpu_decoder_model.vocab;
  for (int threads : {1, 2}) {
    kernels::cpu::thread_pool pool(threads);
    cpu_paged_decoder decoder(layout_, params_.data(), 16, 8, 4, threads > 1 ? &pool : nullptr);
    const std::vector<int32_t> table_a = {5, 0}, table_b = {1, 6};
    const std::vector<decode_request> batch = {{a.data(), 8, 0, table_a.data(), 2, 8},
                                               {b.data(), 6, 0, table_b.data(), 2, 3}};
    ASSERT_EQ(logit_rows(batch), 11);
    std::vector<float> logits(11 * V);
    ASSERT_TRUE(decoder.forward(batch, logits.data()).ok());
    for (int row = 0; row < 11; ++row) {
      const bool is_a = row < 8;
      const int position = is_a ? row : 3 + (row - 8);
      for (int v = 0; v < V; ++v) {
        ASSERT_EQ(kernels::cpu::token_log_prob(logits.data() + int64_t{row} * V, V, 1.0f, v),
                  (is_a ? want_a : want_b)[position * V + v])
            << threads << " threads, row " << row << " token " << v;
      }
    }
  }
}

// A lone request (one group: no rows for a second thread) splits its products' columns over the
// pool instead: its logits are the training forward's bits still, prompt and decode steps, in
// f32 and with int8 weights (as without the pool).
TEST_F(CpuPagedDecoderTest, ALoneRequestSplitsItsColumnsOverThePoolWithTheSameBits) {
  const std::vector<int32_t> a = {3, 17, 5, 22, 9, 1, 30, 12};
  const int V = cpu_decoder_model.vocab;
  kernels::cpu::thread_pool pool(2, std::chrono::microseconds(0));
  for (const bool int8 : {false, true}) {
    cpu_paged_decoder alone(layout_, params_.data(), 16, 4, 4),
        pooled(layout_, params_.data(), 16, 4, 4, &pool);
    if (int8) {
      ASSERT_TRUE(alone.quantize({8, 0}).ok());
      ASSERT_TRUE(pooled.quantize({8, 0}).ok());
    }
    const std::vector<int32_t> table = {2, 0};
    std::vector<float> want(5 * V), got(5 * V, -1.0f);
    decode_request prompt{a.data(), 5, 0, table.data(), 2, 5};
    ASSERT_TRUE(alone.forward(std::span(&prompt, 1), want.data()).ok());
    ASSERT_TRUE(pooled.forward(std::span(&prompt, 1), got.data()).ok());
    ASSERT_EQ(got, want) << (int8 ? "int8" : "f32") << " prompt";
    for (int pos = 5; pos < 8; ++pos) {
      decode_request step{a.data() + pos, 1, pos, table.data(), 2};
      ASSERT_TRUE(alone.forward(std::span(&step, 1), want.data()).ok());
      ASSERT_TRUE(pooled.forward(std::span(&step, 1), got.data()).ok());
      ASSERT_TRUE(std::equal(want.begin(), want.begin() + V, got.begin()))
          << (int8 ? "int8" : "f32") << " position " << pos;
    }
  }
}

// An embedding's rows: `hidden` requests get the final norm's output, which the head turns into
// the logits a logits request of the same tokens gets, bit for bit; the other requests' logits
// are unchanged beside them.
TEST_F(CpuPagedDecoderTest, HiddenRowsAreWhatTheHeadTurnsIntoLogits) {
  const std::vector<int32_t> a = {3, 17, 5, 22, 9, 1, 30, 12}, b = {7, 7, 2, 35, 11, 19};
  const int V = cpu_decoder_model.vocab, C = cpu_decoder_model.dim;
  const std::vector<int32_t> table_a = {5, 0}, table_b = {1, 6};
  cpu_paged_decoder plain(layout_, params_.data(), 16, 8, 4),
      pooled(layout_, params_.data(), 16, 8, 4);
  std::vector<decode_request> batch = {{a.data(), 8, 0, table_a.data(), 2, 8},
                                       {b.data(), 6, 0, table_b.data(), 2, 3}};
  std::vector<float> want(11 * V);
  ASSERT_TRUE(plain.forward(batch, want.data()).ok());
  batch[0].hidden = true;
  EXPECT_EQ(logit_rows(batch), 3);
  EXPECT_EQ(hidden_rows(batch), 8);
  std::vector<float> logits(3 * V), hidden(8 * C);
  EXPECT_EQ(pooled.forward(batch, logits.data()).code(), absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(pooled.forward(batch, logits.data(), hidden.data()).ok());
  std::vector<float> head(8 * V);
  kernels::cpu::matmul(head.data(), hidden.data(), params_.data() + layout_.head_weight(), nullptr,
                       kernels::gemm{8, V, C, false, true});
  for (int i = 0; i < 8 * V; ++i)
    ASSERT_EQ(head[i], want[i]) << "a's row " << i / V;
  for (int i = 0; i < 3 * V; ++i)
    ASSERT_EQ(logits[i], want[8 * V + i]) << "b's row " << i / V;
}

// The threads' groups hold equal work, not equal tokens: eight decode tokens at position 12 and
// a prefill chunk of eight tokens are 16 tokens, but each decode token brings a head row and an
// attention of its own (554 against 384 a prefill token, in multiply-adds over the width), so
// the first group takes seven of them and the second the eighth and the chunk (3,878 against
// 3,970), where halving the tokens would give 4,432 against 3,416.
TEST(DecodeGroupBounds, SplitsByWorkNotTokens) {
  const std::vector<int32_t> tokens(8, 1);
  std::vector<decode_request> batch(8, decode_request{tokens.data(), 1, 12, nullptr, 0});
  batch.push_back({tokens.data(), 8, 0, nullptr, 0});
  EXPECT_EQ(decode_group_bounds(batch, cpu_decoder_model, 2), (std::vector<size_t>{0, 7, 9}));
  EXPECT_EQ(decode_group_bounds(batch, cpu_decoder_model, 1), (std::vector<size_t>{0, 9}));
  // Alike requests split evenly; a single request leaves the other group empty.
  batch.resize(6);
  EXPECT_EQ(decode_group_bounds(batch, cpu_decoder_model, 2), (std::vector<size_t>{0, 3, 6}));
  EXPECT_EQ(decode_group_bounds(batch, cpu_decoder_model, 3), (std::vector<size_t>{0, 2, 4, 6}));
  batch.resize(1);
  EXPECT_EQ(decode_group_bounds(batch, cpu_decoder_model, 2), (std::vector<size_t>{0, 1, 1}));
}

TEST_F(CpuPagedDecoderTest, BadRequestsAreRefusedBeforeTheCacheChanges) {
  cpu_paged_decoder decoder(layout_, params_.data(), 8, 4, 4);
  const std::vector<int32_t> tokens(10, 1), table = {0, 1, 9}, good = {0, 1, 2};
  std::vector<float> logits(cpu_decoder_model.vocab);
  auto error = [&](decode_request r) {
    std::vector<decode_request> batch = {r};
    return std::string(decoder.forward(batch, logits.data()).message());
  };
  EXPECT_NE(error({tokens.data(), 5, 22, table.data(), 3}).find("context of 24"),
            std::string::npos);
  EXPECT_NE(error({tokens.data(), 5, 0, table.data(), 1}).find("need 2 cache blocks"),
            std::string::npos);
  EXPECT_NE(error({tokens.data(), 4, 6, table.data(), 3}).find("block 9 is outside"),
            std::string::npos);
  EXPECT_NE(error({tokens.data(), 10, 0, good.data(), 3}).find("exceeds"), std::string::npos);
  decode_request rows{tokens.data(), 3, 0, good.data(), 3};
  rows.logit_rows = 4;
  EXPECT_NE(error(rows).find("logit_rows is 4; it must be in [1, 3]"), std::string::npos);
  const std::vector<int32_t> bad = {1, 99};
  EXPECT_NE(error({bad.data(), 2, 0, table.data(), 3}).find("token 99"), std::string::npos);
  for (int l = 0; l < cpu_decoder_model.layers; ++l) {
    for (int i = 0; i < 4 * 4 * cpu_decoder_model.dim; ++i)
      ASSERT_EQ(decoder.cache().keys(l)[i], 0.0f);
  }
}

}  // namespace
}  // namespace troupe::models

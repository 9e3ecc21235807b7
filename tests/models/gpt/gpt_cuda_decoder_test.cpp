// The CUDA decoder against the f32 CPU decoder from the same (bf16-rounded) weights, over the
// same scrambled paged caches: prefill chunks and decode steps of two sequences in one batch.
// CTest label `gpu`; skips without a CUDA device.

#include "models/gpt/gpt_cuda_decoder.hpp"

#include <algorithm>
#include <cmath>

#include <gtest/gtest.h>

#include "models/gpt/gpt_cpu_decoder.hpp"
#include "runtime/tensor/cuda_device.hpp"
#include "tests/models/gpt/softmax.hpp"

namespace troupe::models {
namespace {

const gpt_config config{64, 40, 2, 64, 2};  // head_dim 32

TEST(GptCudaDecoder, FollowsTheCpuDecoderThroughPrefillAndDecode) {
  auto devices = tensor::cuda_devices();
  if (!devices.ok() || devices->empty()) GTEST_SKIP() << "no CUDA device";
  gpt_layout layout(config, layer_range::all(config));
  std::vector<float> params(layout.total());
  layout.initialize(params.data(), 7);
  for (auto& p : params)
    p = static_cast<float>(tensor::bf16(p * 5));  // sharper distributions; exact in bf16
  auto cuda = make_gpt_cuda_decoder(layout, params.data(), 32, 16, 4, 0);
  ASSERT_TRUE(cuda.ok()) << cuda.status();
  gpt_cpu_decoder cpu(layout, params.data(), 32, 16, 4);

  const std::vector<int32_t> a = {3, 17, 5, 22, 9, 1, 30, 12, 8, 39, 0, 4, 6, 50, 61, 2, 2, 9};
  const std::vector<int32_t> b = {7, 7, 2, 35, 11, 19, 26, 13, 33, 40, 41};
  const std::vector<int32_t> table_a = {9, 0, 14, 2, 11}, table_b = {1, 6, 3};
  int pos_a = 7, pos_b = 3;
  std::vector<decode_request> batch = {{a.data(), pos_a, 0, table_a.data(), 5},
                                       {b.data(), pos_b, 0, table_b.data(), 3}};
  std::vector<float> want(2 * config.vocab), got(2 * config.vocab);
  for (int step = 0; !batch.empty(); ++step) {
    ASSERT_TRUE(cpu.forward(batch, want.data()).ok());
    ASSERT_TRUE((*cuda)->forward(batch, got.data()).ok());
    for (size_t r = 0; r < batch.size(); ++r) {
      const auto p = softmax(want.data() + r * config.vocab, config.vocab);
      const auto q = softmax(got.data() + r * config.vocab, config.vocab);
      for (int v = 0; v < config.vocab; ++v) {
        ASSERT_NEAR(q[v], p[v], 0.02f + 0.05f * p[v])  // bf16 weights, cache and activations
            << "step " << step << " request " << r << " token " << v;
      }
    }
    batch.clear();
    if (pos_a < static_cast<int>(a.size()))
      batch.push_back({a.data() + pos_a, 1, pos_a, table_a.data(), 5}), ++pos_a;
    if (pos_b < static_cast<int>(b.size()))
      batch.push_back({b.data() + pos_b, 1, pos_b, table_b.data(), 3}), ++pos_b;
  }
  // A bad request is refused as on the CPU.
  const std::vector<int32_t> far = {1};
  std::vector<decode_request> bad = {{far.data(), 1, 39, table_b.data(), 3}};
  EXPECT_EQ((*cuda)->forward(bad, got.data()).code(), absl::StatusCode::kInvalidArgument);
}

// set_weights uploads new weights: the decoder then computes what a fresh one on them does (the
// RL rollout's weight swap).
TEST(GptCudaDecoder, NewWeightsReplaceTheOldOnes) {
  auto devices = tensor::cuda_devices();
  if (!devices.ok() || devices->empty()) GTEST_SKIP() << "no CUDA device";
  gpt_layout layout(config, layer_range::all(config));
  std::vector<float> old_params(layout.total()), new_params(layout.total());
  layout.initialize(old_params.data(), 7);
  layout.initialize(new_params.data(), 8);
  auto swapped = make_gpt_cuda_decoder(layout, old_params.data(), 32, 16, 4, 0);
  auto fresh = make_gpt_cuda_decoder(layout, new_params.data(), 32, 16, 4, 0);
  ASSERT_TRUE(swapped.ok() && fresh.ok());
  ASSERT_TRUE((*swapped)->set_weights(new_params.data()).ok());
  const std::vector<int32_t> tokens = {3, 17, 5, 22, 9};
  const std::vector<int32_t> table = {0, 1};
  const std::vector<decode_request> batch = {{tokens.data(), 5, 0, table.data(), 2}};
  std::vector<float> want(config.vocab), got(config.vocab);
  ASSERT_TRUE((*fresh)->forward(batch, want.data()).ok());
  ASSERT_TRUE((*swapped)->forward(batch, got.data()).ok());
  for (int v = 0; v < config.vocab; ++v)
    ASSERT_NEAR(got[v], want[v], 1e-5f) << "token " << v;
}

}  // namespace
}  // namespace troupe::models

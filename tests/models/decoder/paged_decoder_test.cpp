#include "models/decoder/paged_decoder.hpp"

#include <gtest/gtest.h>

namespace troupe::models {
namespace {

const decoder_config decoder_model{32, 16, 1, 32, 1};

TEST(PagedDecoder, MakesTheCpuDecoderAndRefusesADeviceThatCannotBeUsed) {
  decoder_layout layout(decoder_model, layer_range::all(decoder_model));
  std::vector<float> params(layout.total());
  layout.initialize(params.data(), 1);
  auto cpu = make_paged_decoder(layout, params.data(), 8, 4, 4, -1);
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  const std::vector<int32_t> tokens = {1, 2, 3}, table = {2};
  std::vector<decode_request> batch = {{tokens.data(), 3, 0, table.data(), 1}};
  std::vector<float> logits(decoder_model.vocab);
  EXPECT_TRUE((*cpu)->forward(batch, logits.data()).ok());

  // No machine has a 100th GPU: with or without CUDA, the error says what was asked for.
  auto missing = make_paged_decoder(layout, params.data(), 8, 4, 4, 99);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(missing.status().message().find("CUDA device 99 asked for"), std::string::npos)
      << missing.status();
}

// Both families on CUDA, but only heads the CUDA attention takes (multiples of 32, up to 256):
// the refusal names the head size and the way out, known without a device (serve's `device:
// auto` falls back on the CPU by it).
TEST(PagedDecoder, KnowsWhichShapesTheCudaDecoderRuns) {
  decoder_config llama{64, 40, 2, 64, 2};
  llama.family = decoder_family::llama;
  llama.kv_heads = 1;
  EXPECT_TRUE(cuda_decoder_runs(decoder_model).ok());
  EXPECT_TRUE(cuda_decoder_runs(llama).ok());
  llama.heads = 4;  // heads of 16
  const absl::Status refused = cuda_decoder_runs(llama);
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.message().find("head size is 16"), std::string::npos) << refused;
  EXPECT_NE(refused.message().find("device: cpu"), std::string::npos) << refused;
  llama.heads = 1;
  llama.head_dim = 512;
  EXPECT_EQ(cuda_decoder_runs(llama).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace troupe::models

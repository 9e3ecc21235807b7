// The inference engine with its model on CUDA device 0: continuous batching with chunked
// prefill and preemption runs every request to its length and frees every block, and greedy
// requests agree with the CPU engine on their first tokens (bf16 may part the two later, where
// two candidates are near-equal). CTest label `gpu`; skips without a CUDA device.

#include <map>

#include <gtest/gtest.h>

#include "actors/inference_engine.hpp"
#include "runtime/tensor/cuda_device.hpp"

namespace troupe::actors {
namespace {

const models::decoder_config config{256, 128, 2, 64, 2};  // head_dim 32

std::map<uint64_t, std::vector<int32_t>> generate(const models::decoder_layout& layout,
                                                  const std::vector<float>& params, int device,
                                                  uint64_t* preemptions) {
  auto engine = inference_engine::create(layout, params.data(),
                                         {.scheduler = {.ctx = 128, .max_batch_tokens = 48},
                                          .kv_blocks = 24,
                                          .block_size = 8,
                                          .device = device});
  EXPECT_TRUE(engine.ok()) << engine.status();
  if (!engine.ok()) return {};
  for (uint64_t id = 1; id <= 8; ++id) {
    generation_request r;
    r.id = id;
    for (int i = 0; i < 6 + static_cast<int>(id) * 4; ++i)
      r.prompt.push_back(static_cast<int32_t>('a' + (i * id) % 26));
    r.temperature = 0.0f;
    r.max_tokens = 20 + static_cast<int>(id);
    EXPECT_TRUE((*engine)->add(r).ok());
  }
  std::map<uint64_t, std::vector<int32_t>> out;
  for (int i = 0; i < 5000 && !(*engine)->idle(); ++i) {
    auto events = (*engine)->step();
    EXPECT_TRUE(events.ok()) << events.status();
    if (!events.ok()) break;
    for (const auto& e : *events)
      out[e.id].insert(out[e.id].end(), e.tokens.begin(), e.tokens.end());
  }
  EXPECT_TRUE((*engine)->idle());
  EXPECT_EQ((*engine)->blocks().used_blocks(), 0);
  *preemptions = (*engine)->scheduler().preemptions();
  return out;
}

TEST(InferenceEngineCuda, ServesEveryRequestAndAgreesWithTheCpu) {
  auto devices = tensor::cuda_devices();
  if (!devices.ok() || devices->empty()) GTEST_SKIP() << "no CUDA device";
  models::decoder_layout layout(config, models::layer_range::all(config));
  std::vector<float> params(layout.total());
  layout.initialize(params.data(), 3);
  for (auto& p : params)
    p = static_cast<float>(tensor::bf16(p * 5));  // sharp, and exact in bf16
  uint64_t cpu_preemptions = 0, cuda_preemptions = 0;
  const auto cpu = generate(layout, params, -1, &cpu_preemptions);
  const auto cuda = generate(layout, params, 0, &cuda_preemptions);
  EXPECT_GT(cuda_preemptions, 0u) << "24 blocks of 8 should not hold every sequence";
  ASSERT_EQ(cuda.size(), 8u);
  for (const auto& [id, tokens] : cuda) {
    EXPECT_EQ(static_cast<int>(tokens.size()), 20 + static_cast<int>(id)) << id;
    const auto& want = cpu.at(id);
    EXPECT_TRUE(std::equal(want.begin(), want.begin() + 4, tokens.begin()))
        << "request " << id << ": the first greedy tokens differ from the CPU's";
  }
}

}  // namespace
}  // namespace troupe::actors

#include "actors/inference_engine.hpp"

#include <map>

#include <gtest/gtest.h>

namespace troupe::actors {
namespace {

const models::gpt_config config{256, 64, 2, 32, 4};

class InferenceEngineTest : public ::testing::Test {
 protected:
  InferenceEngineTest() : layout_(config, models::layer_range::all(config)) {
    params_.resize(layout_.total());
    layout_.initialize(params_.data(), 5);
  }

  // Runs every request to the end; returns each one's output and how many preemptions happened.
  std::map<uint64_t, std::vector<int32_t>> generate(inference_engine::options o,
                                                    uint64_t* preemptions = nullptr) {
    auto created = inference_engine::create(layout_, params_.data(), o);
    EXPECT_TRUE(created.ok()) << created.status();
    inference_engine& engine = **created;
    std::map<uint64_t, std::vector<int32_t>> out;
    for (uint64_t id = 1; id <= 6; ++id) {
      generation_request r;
      r.id = id;
      for (int i = 0; i < 5 + static_cast<int>(id) * 3; ++i)
        r.prompt.push_back(static_cast<int32_t>('a' + (i * id) % 26));
      r.temperature = id % 2 == 0 ? 0.0f : 0.9f;
      r.top_k = 40;
      r.top_p = 0.95f;
      r.seed = 100 + id;
      r.max_tokens = 6 + static_cast<int>(id);
      EXPECT_TRUE(engine.add(r).ok());
    }
    for (int i = 0; i < 1000 && !engine.idle(); ++i) {
      auto events = engine.step();
      EXPECT_TRUE(events.ok()) << events.status();
      for (const auto& e : *events)
        out[e.id].insert(out[e.id].end(), e.tokens.begin(), e.tokens.end());
    }
    EXPECT_TRUE(engine.idle());
    EXPECT_EQ(engine.blocks().used_blocks(), 0);
    if (preemptions) *preemptions = engine.scheduler().preemptions();
    return out;
  }

  models::gpt_layout layout_;
  std::vector<float> params_;
};

// Seeded sampling makes a request's output independent of what it was batched with, of chunked
// prefill, and of being preempted and recomputed.
TEST_F(InferenceEngineTest, OutputsDoNotDependOnBatchingOrPreemption) {
  const auto reference = generate({.scheduler = {.ctx = 64, .max_batch_tokens = 256}});
  ASSERT_EQ(reference.size(), 6u);
  for (const auto& [id, tokens] : reference)
    EXPECT_EQ(static_cast<int>(tokens.size()), 6 + static_cast<int>(id));
  EXPECT_EQ(generate({.scheduler = {.ctx = 64, .max_batch_tokens = 256, .continuous = false}}),
            reference);
  EXPECT_EQ(generate({.scheduler = {.ctx = 64, .max_batch_tokens = 8}}), reference);
  uint64_t preemptions = 0;
  EXPECT_EQ(
      generate({.scheduler = {.ctx = 64, .max_batch_tokens = 64}, .kv_blocks = 6, .block_size = 8},
               &preemptions),
      reference);
  EXPECT_GT(preemptions, 0u);
}

// The first iteration prefills every prompt together; the next decodes one token for each.
TEST_F(InferenceEngineTest, ReportsTheBatchItRan) {
  auto created = inference_engine::create(layout_, params_.data(), {.scheduler = {.ctx = 64}});
  ASSERT_TRUE(created.ok()) << created.status();
  inference_engine& engine = **created;
  for (uint64_t id = 1; id <= 3; ++id) {
    generation_request r;
    r.id = id;
    r.prompt.assign(4 * id, 'x');
    ASSERT_TRUE(engine.add(r).ok());
  }
  ASSERT_TRUE(engine.step().ok());
  EXPECT_EQ(engine.last_batch_sequences(), 3);
  EXPECT_EQ(engine.last_batch_tokens(), 4 + 8 + 12);
  EXPECT_EQ(engine.blocks().used_blocks(), 3);  // one 16-position block each
  ASSERT_TRUE(engine.step().ok());
  EXPECT_EQ(engine.last_batch_sequences(), 3);
  EXPECT_EQ(engine.last_batch_tokens(), 3);
}

TEST_F(InferenceEngineTest, RefusesTokensOutsideTheVocabulary) {
  auto created = inference_engine::create(layout_, params_.data(), {});
  ASSERT_TRUE(created.ok()) << created.status();
  inference_engine& engine = **created;
  generation_request r;
  r.id = 1;
  r.prompt = {1, 2, 300};
  const absl::Status s = engine.add(r);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("prompt token 2 is 300"), std::string::npos) << s;
}

}  // namespace
}  // namespace troupe::actors

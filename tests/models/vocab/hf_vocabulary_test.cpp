#include "models/vocab/hf_vocabulary.hpp"

#include <fstream>

#include <gtest/gtest.h>

#include "tests/models/tokenizer/tokenizer_fixture.hpp"
#include "tests/support/temp_dir.hpp"

namespace troupe::models {
namespace {

// A model directory with a byte-level tokenizer of 257 ids and no chat template.
class HfVocabulary : public ::testing::Test {
 protected:
  void SetUp() override {
    std::ofstream(dir_.file("tokenizer.json"))
        << tokenizers::testing::byte_level_tokenizer({{"h", "i"}}).dump();
  }
  testing::temp_dir dir_;
};

TEST_F(HfVocabulary, PaddingIdsPastTheTokenizerHaveNoText) {
  auto v = hf_vocabulary::load(dir_.path().string(), 300);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ((*v)->vocab_size(), 300);
  EXPECT_EQ((*v)->encode("hi!", false), (std::vector<int32_t>{256, '!'}));
  EXPECT_EQ(*(*v)->decode(std::vector<int32_t>{256, 299, '!'}), "hi!");
  EXPECT_EQ((*v)->decode(std::vector<int32_t>{300}).status().message(),
            "token 300 (at index 0) is outside the vocabulary of 300");
  auto stream = (*v)->stream();
  EXPECT_EQ(stream->push(std::vector<int32_t>{256, 299, 0xE4, 0xB8}), "hi");
  EXPECT_EQ(stream->push(std::vector<int32_t>{0xAD}), "\xE4\xB8\xAD");
  const auto texts = (*v)->token_texts();
  ASSERT_EQ(texts.size(), 300u);
  EXPECT_EQ(texts[256], "hi");
  EXPECT_EQ(texts[299], "");
  // A model that ships no template is chatted with through troupe's.
  EXPECT_EQ(
      *(*v)->render_chat(nlohmann::json::parse(R"([{"role": "user", "content": "x"}])"), true),
      "<|user|>\nx\n<|assistant|>\n");
}

TEST_F(HfVocabulary, RefusesAMissingOrForeignTokenizer) {
  auto small = hf_vocabulary::load(dir_.path().string(), 100);
  EXPECT_EQ(small.status().message(),
            dir_.file("tokenizer.json") + " has ids up to 256, but " + dir_.path().string() +
                "/config.json's vocab_size is 100: the tokenizer is not this model's");
  std::remove(dir_.file("tokenizer.json").c_str());
  auto missing = hf_vocabulary::load(dir_.path().string(), 300);
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("copy it into the model directory"), std::string::npos);
}

}  // namespace
}  // namespace troupe::models

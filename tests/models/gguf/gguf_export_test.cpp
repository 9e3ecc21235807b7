// The GGUF exporter's own decisions, without llama.cpp (gguf_test runs llama.cpp on its files):
// a tokenizer `troupe tokenizer train` writes is named llama-bpe, with its special token as a
// control token, its end-of-sequence id, its merges and the model's padded ids; and what
// llama.cpp could not run is refused by name before a file is written.

#include "models/gguf/gguf_export.hpp"

#include <filesystem>

#include <gtest/gtest.h>

#include "models/decoder/decoder_layout.hpp"
#include "models/tokenizer/bpe_trainer.hpp"
#include "tests/support/temp_dir.hpp"

namespace troupe::models::gguf {
namespace {

// A byte-level BPE trained by troupe on a little text, written to `dir`.
void train_tokenizer(const std::string& dir, int vocab_size) {
  std::vector<std::string> texts;
  for (int i = 0; i < 200; ++i)
    texts.push_back("the quick brown fox jumps over the lazy dog " + std::to_string(i));
  tokenizers::bpe_training_options options;
  options.vocab_size = vocab_size;
  auto trained = tokenizers::train_byte_level_bpe(texts, options);
  ASSERT_TRUE(trained.ok()) << trained.status();
  ASSERT_TRUE(tokenizers::write_trained_tokenizer(dir, *trained, options).ok());
}

TEST(GgufVocab, ATrainedTokenizerIsLlamaBpeWithItsSpecialTokenAndPaddedIds) {
  testing::temp_dir dir;
  train_tokenizer(dir.file("tok"), 300);
  auto vocab = vocab_of_tokenizer_dir(dir.file("tok"), 320, std::nullopt, std::nullopt);
  ASSERT_TRUE(vocab.ok()) << vocab.status();
  EXPECT_EQ(vocab->pre, "llama-bpe");  // the trainer splits text as Llama 3 does
  ASSERT_EQ(vocab->tokens.size(), 320u);
  EXPECT_EQ(vocab->tokens[0], "<|endoftext|>");
  EXPECT_EQ(vocab->token_types[0], static_cast<int32_t>(token_type::control));
  EXPECT_EQ(vocab->eos, 0);  // tokenizer_config.json's eos_token
  EXPECT_EQ(vocab->token_types[1], static_cast<int32_t>(token_type::normal));
  EXPECT_EQ(vocab->tokens[310], "[PAD310]");
  EXPECT_EQ(vocab->token_types[310], static_cast<int32_t>(token_type::unused));
  EXPECT_FALSE(vocab->merges.empty());
  EXPECT_NE(vocab->merges[0].find(' '), std::string::npos);
  // A model with fewer ids than its tokenizer.
  auto small = vocab_of_tokenizer_dir(dir.file("tok"), 280, std::nullopt, std::nullopt);
  EXPECT_EQ(small.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(small.status().message().find("more than the model's vocab of 280"), std::string::npos)
      << small.status();
}

TEST(GgufExport, RefusesWhatLlamaCppCannotRunBeforeWritingAFile) {
  testing::temp_dir dir;
  decoder_config c;
  c.family = decoder_family::llama;
  c.vocab = 256, c.ctx = 64, c.layers = 1, c.dim = 32, c.heads = 2, c.kv_heads = 1;
  c.qk_norm = true;  // qwen3
  c.rope.type = rope_scaling::kind::llama3;
  c.rope.factor = 8.0;
  const decoder_layout layout(c, layer_range::all(c));
  std::vector<float> params(layout.total());
  layout.initialize(params.data(), 1);
  const hf_model_config hf{hf_architecture_of(c), c};
  EXPECT_EQ(gguf_architecture(c), "qwen3");
  const std::string path = dir.file("m.gguf");
  absl::Status s = write_gguf_model(path, hf, layout.to_named(params.data()), byte_vocab(256),
                                    outtype::f32, "m");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("rope_scaling 'llama3'"), std::string::npos) << s;
  EXPECT_FALSE(std::filesystem::exists(path));

  c.rope = {};
  c.o_bias = true;  // q/k norms and an output bias: no llama.cpp architecture has both
  const decoder_layout biased(c, layer_range::all(c));
  params.assign(biased.total(), 0.0f);
  s = write_gguf_model(path, {hf_architecture_of(c), c}, biased.to_named(params.data()),
                       byte_vocab(256), outtype::f32, "m");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;

  c.o_bias = false;
  const decoder_layout plain(c, layer_range::all(c));
  params.assign(plain.total(), 0.0f);
  s = write_gguf_model(path, {hf_architecture_of(c), c}, plain.to_named(params.data()),
                       byte_vocab(300), outtype::f32, "m");
  EXPECT_NE(s.message().find("the vocabulary has 300 tokens, the model 256"), std::string::npos)
      << s;
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_TRUE(write_gguf_model(path, {hf_architecture_of(c), c}, plain.to_named(params.data()),
                               byte_vocab(256), outtype::q8_0, "m")
                  .ok());
  EXPECT_EQ(parse_outtype("q4_k").status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace troupe::models::gguf

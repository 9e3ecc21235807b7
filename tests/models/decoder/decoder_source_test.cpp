#include "models/decoder/decoder_source.hpp"

#include <fstream>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "models/hf/hf_config.hpp"
#include "runtime/checkpoint/checkpoint_store.hpp"
#include "tests/models/tokenizer/tokenizer_fixture.hpp"
#include "tests/support/model_checkpoint.hpp"
#include "tests/support/temp_dir.hpp"

namespace troupe::models {
namespace {

const decoder_config tiny{256, 16, 1, 16, 2};

std::vector<float> save(const std::string& root, int64_t step, const decoder_layout& layout,
                        uint64_t seed) {
  return testing::commit_model_checkpoint(root, step, layout, seed);
}

TEST(DecoderSource, TheModelSectionGivesTheShape) {
  EXPECT_EQ(decoder_config_of(std::nullopt)->dim, decoder_config{}.dim);
  config::model_spec spec;
  spec.layers = 2;
  spec.dim = 64;
  const decoder_config c = decoder_config_of(spec).value();
  EXPECT_EQ(c.layers, 2);
  EXPECT_EQ(c.dim, 64);
  EXPECT_EQ(c.heads, decoder_config{}.heads);
  spec.heads = 3;
  EXPECT_EQ(decoder_config_of(spec).status().message(), "model: heads (3) must divide dim (64)");
}

// model.path: the shape is the directory's config.json; model.ctx may only shorten it.
TEST(DecoderSource, AHuggingFaceDirectoryGivesTheShape) {
  testing::temp_dir dir;
  decoder_config llama;
  llama.family = decoder_family::llama;
  llama.vocab = 300;
  llama.ctx = 512;
  llama.kv_heads = 2;
  {
    std::ofstream out(dir.file("config.json"));
    out << to_hf_config_json({"LlamaForCausalLM", llama}).dump();
  }
  config::model_spec spec;
  spec.path = dir.path().string();
  auto c = decoder_config_of(spec);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->family, decoder_family::llama);
  EXPECT_EQ(c->vocab, 300);
  EXPECT_EQ(c->ctx, 512);
  spec.ctx = 64;
  EXPECT_EQ(decoder_config_of(spec)->ctx, 64);
  spec.ctx = 1024;
  EXPECT_EQ(decoder_config_of(spec).status().message(),
            absl::StrCat("model.ctx 1024 is longer than ", spec.path,
                         "/config.json's max_position_embeddings (512); use at most 512"));
  spec.path = dir.file("absent");
  EXPECT_EQ(decoder_config_of(spec).status().code(), absl::StatusCode::kNotFound);
}

// `troupe serve DIR` checks the directory, then the app checks it, then the router reads it: one
// load of the tokenizer, until a file changes.
TEST(DecoderSource, AVocabularyIsLoadedOnceWhileItsFilesAreUnchanged) {
  testing::temp_dir dir;
  decoder_config llama;
  llama.family = decoder_family::llama;
  llama.vocab = 300;
  std::ofstream(dir.file("config.json")) << to_hf_config_json({"LlamaForCausalLM", llama}).dump();
  std::ofstream(dir.file("tokenizer.json"))
      << tokenizers::testing::byte_level_tokenizer({{"h", "i"}}).dump();
  config::model_spec spec;
  spec.path = dir.path().string();
  auto first = vocabulary_of(spec);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(vocabulary_of(spec).value(), *first);
  EXPECT_EQ((*first)->encode("his", false), (std::vector<int32_t>{256, 's'}));

  std::ofstream(dir.file("tokenizer.json"))
      << tokenizers::testing::byte_level_tokenizer({{"h", "i"}, {"hi", "s"}}).dump();
  auto edited = vocabulary_of(spec);
  ASSERT_TRUE(edited.ok()) << edited.status();
  EXPECT_NE(*edited, *first);
  EXPECT_EQ((*edited)->encode("his", false), (std::vector<int32_t>{257}));
  std::remove(dir.file("tokenizer.json").c_str());
  EXPECT_EQ(vocabulary_of(spec).status().code(), absl::StatusCode::kNotFound);
}

TEST(DecoderSource, WeightsComeFromACheckpointOrTheNewestOfARun) {
  testing::temp_dir run;
  const decoder_layout layout(tiny, layer_range::all(tiny));
  const std::string root = run.file("checkpoints");
  save(root, 10, layout, 1);
  const std::vector<float> newest = save(root, 20, layout, 2);
  auto from_run = read_decoder_weights(layout, run.path().string(), "serve.checkpoint");
  ASSERT_TRUE(from_run.ok()) << from_run.status();
  EXPECT_EQ(*from_run, newest);
  auto from_step = read_decoder_weights(layout, root + "/step-10", "serve.checkpoint");
  ASSERT_TRUE(from_step.ok()) << from_step.status();
  EXPECT_NE(*from_step, newest);
}

TEST(DecoderSource, ErrorsNameTheSettingAndTheMismatch) {
  testing::temp_dir run;
  const decoder_layout layout(tiny, layer_range::all(tiny));
  auto missing = read_decoder_weights(layout, run.file("nowhere"), "serve.checkpoint");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("serve.checkpoint " + run.file("nowhere")),
            std::string::npos)
      << missing.status();
  save(run.file("checkpoints"), 5, layout, 1);
  const decoder_config wider{256, 16, 1, 32, 2};
  auto other = read_decoder_weights(decoder_layout(wider, layer_range::all(wider)),
                                    run.path().string(), "serve.checkpoint");
  ASSERT_FALSE(other.ok());
  EXPECT_NE(other.status().message().find("is model: the one it was trained with?"),
            std::string::npos)
      << other.status();
}

}  // namespace
}  // namespace troupe::models

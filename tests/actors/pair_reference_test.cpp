// DPO's reference log-probabilities (issue 19): the pairs' rows as DPO trains on them (the
// response's bytes only), and the cache beside the data: computed once, read back while the
// reference weights and the pairs are the same, computed anew when either changes.

#include "actors/pair_reference.hpp"

#include <filesystem>
#include <string>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "actors/dpo_objective.hpp"
#include "models/decoder/decoder_cpu_batch.hpp"
#include "tests/support/model_checkpoint.hpp"
#include "tests/support/temp_dir.hpp"

namespace troupe::actors {
namespace {

namespace fs = std::filesystem;

const models::decoder_config reference_model{256, 16, 1, 16, 2};

// Commits checkpoint `step` of a language model under `root` with weights from `seed`.
std::vector<float> save(const std::string& root, int64_t step, uint64_t seed) {
  return testing::commit_model_checkpoint(
      root, step,
      models::decoder_layout(reference_model, models::layer_range::all(reference_model)), seed);
}

// `n` pairs {"prompt": "q<i>:", "chosen": "good\n", "rejected": <rejected, JSON-escaped>}.
std::string pair_lines(int n, const std::string& rejected = "bad\\n") {
  std::string lines;
  for (int i = 0; i < n; ++i) {
    absl::StrAppend(&lines, "{\"prompt\": \"q", i, ":\", \"chosen\": \"good\\n\", ",
                    "\"rejected\": \"", rejected, "\"}\n");
  }
  return lines;
}

// A DPO pair is two rows trained on their responses only: each position from the prompt's
// last byte predicts the next response byte; the prompt and the padding are -1.
TEST(PairData, ADpoPairIsTrainedOnItsResponseBytes) {
  testing::temp_dir dir;
  auto corpus = text_corpus::load_pairs(dir.write("pairs.jsonl", pair_lines(10)), 0.1, 16,
                                        models::byte_vocabulary());
  ASSERT_TRUE(corpus.ok()) << corpus.status();
  EXPECT_FALSE(corpus->dpo());
  EXPECT_EQ(corpus->train_pairs()[0].prompt_tokens, 3);  // "q0:"
  EXPECT_FALSE(corpus->attach_reference({{1.0f}, {}}).ok()) << "two a pair";
  pair_reference reference;
  for (int i = 0; i < 18; ++i)
    reference.train.push_back(-static_cast<float>(i));
  reference.val = {-100.0f, -101.0f};
  ASSERT_TRUE(corpus->attach_reference(reference).ok());
  ASSERT_TRUE(corpus->dpo());

  auto loader = *data_loader::create(*corpus, 16, 9, 0, 1, 5);
  const token_batch b = loader.next();
  ASSERT_EQ(b.batch, 18);
  EXPECT_TRUE(b.margins.empty());
  ASSERT_EQ(b.reference_logps.size(), 18u);
  EXPECT_TRUE(validate_dpo_pairs(b).ok()) << validate_dpo_pairs(b);
  for (int pair = 0; pair < 9; ++pair) {
    const int32_t* chosen = b.tokens.data() + 2 * pair * 16;
    const int index = chosen[1] - '0';  // "q<index>:"
    EXPECT_EQ(b.reference_logps[2 * pair], -2.0f * index) << "its own pair's reference";
    EXPECT_EQ(b.reference_logps[2 * pair + 1], -2.0f * index - 1);
    const int32_t* targets = b.targets.data() + 2 * pair * 16;
    // "q0:good\n": positions 2..6 predict "good\n"; "q0:bad\n": 2..5 predict "bad\n".
    for (int t = 0; t < 16; ++t) {
      EXPECT_EQ(targets[t], t >= 2 && t <= 6 ? chosen[t + 1] : -1) << t;
      EXPECT_EQ(targets[16 + t], t >= 2 && t <= 5 ? chosen[16 + t + 1] : -1) << t;
    }
  }
  const auto val = loader.validation(4, 100);
  ASSERT_EQ(val.size(), 1u);
  EXPECT_EQ(val[0].reference_logps, (std::vector<float>{-100.0f, -101.0f}));
}

// The reference log-probabilities are each row's summed response log-probs under the reference
// weights; the cache beside the data serves them again, and a changed reference or changed
// pairs make it compute them anew.
TEST(PairReference, ComputedOnceCachedBesideTheDataAndRedoneWhenTheReferenceChanges) {
  testing::temp_dir dir;
  const std::string data = dir.write("pairs.jsonl", pair_lines(6));
  auto corpus = *text_corpus::load_pairs(data, 0.2, 16, models::byte_vocabulary());
  const std::string run = dir.file("sft");
  const std::vector<float> weights = save(run + "/checkpoints", 10, 3);

  pair_reference_source source;
  auto first =
      cached_pair_reference(corpus, data, run, "dpo.init_from", reference_model, 2, &source);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_TRUE(source.computed);
  EXPECT_EQ(source.cache, data + ".reference.safetensors");
  EXPECT_TRUE(fs::exists(source.cache));
  ASSERT_EQ(first->train.size(), 2 * corpus.train_pairs().size());
  ASSERT_EQ(first->val.size(), 2 * corpus.val_pairs().size());

  // The numbers: the first pair's rows under the reference, summed over their targets.
  token_batch b{2, 16, std::vector<int32_t>(32), std::vector<int32_t>(32)};
  fill_dpo_pair(b, 0, corpus.train_pairs()[0], nullptr);
  const models::decoder_layout layout(reference_model, models::layer_range::all(reference_model));
  models::decoder_cpu_batch forward(layout, 2, 1);
  std::vector<float> logps(32);
  forward.log_probs(weights.data(), 2, 16, b.tokens.data(), b.targets.data(), 1.0f, logps.data());
  const row_logps rows = sum_row_logps(b.targets.data(), logps.data(), 2, 16);
  EXPECT_NEAR(first->train[0], rows.sums[0], 1e-4);
  EXPECT_NEAR(first->train[1], rows.sums[1], 1e-4);
  EXPECT_LT(first->train[0], 0.0f);

  auto again =
      cached_pair_reference(corpus, data, run, "dpo.init_from", reference_model, 1, &source);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_FALSE(source.computed) << "read from the cache";
  EXPECT_EQ(again->train, first->train);
  EXPECT_EQ(again->val, first->val);

  save(run + "/checkpoints", 20, 4);  // the run's newest checkpoint is another reference
  auto changed =
      cached_pair_reference(corpus, data, run, "dpo.init_from", reference_model, 1, &source);
  ASSERT_TRUE(changed.ok()) << changed.status();
  EXPECT_TRUE(source.computed) << "a new reference invalidates the cache";
  EXPECT_NE(changed->train, first->train);

  const std::string other_data = dir.write("pairs.jsonl", pair_lines(6, "worse\\n"));
  auto other = *text_corpus::load_pairs(other_data, 0.2, 16, models::byte_vocabulary());
  ASSERT_TRUE(
      cached_pair_reference(other, other_data, run, "dpo.init_from", reference_model, 1, &source)
          .ok());
  EXPECT_TRUE(source.computed) << "other pairs invalidate it too";

  auto missing = cached_pair_reference(corpus, data, dir.file("nowhere"), "dpo.reference",
                                       reference_model, 1, &source);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("dpo.reference"), std::string::npos)
      << missing.status();
}

}  // namespace
}  // namespace troupe::actors

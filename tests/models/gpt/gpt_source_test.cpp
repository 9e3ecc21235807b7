#include "models/gpt/gpt_source.hpp"

#include <gtest/gtest.h>

#include "runtime/checkpoint/checkpoint_store.hpp"
#include "tests/support/model_checkpoint.hpp"
#include "tests/support/temp_dir.hpp"

namespace troupe::models {
namespace {

const gpt_config tiny{256, 16, 1, 16, 2};

std::vector<float> save(const std::string& root, int64_t step, const gpt_layout& layout,
                        uint64_t seed) {
  return testing::commit_model_checkpoint(root, step, layout, seed);
}

TEST(GptSource, TheModelSectionGivesTheShape) {
  EXPECT_EQ(gpt_config_of(std::nullopt).dim, gpt_config{}.dim);
  config::model_spec spec;
  spec.layers = 2;
  spec.dim = 64;
  const gpt_config c = gpt_config_of(spec);
  EXPECT_EQ(c.layers, 2);
  EXPECT_EQ(c.dim, 64);
}

TEST(GptSource, WeightsComeFromACheckpointOrTheNewestOfARun) {
  testing::temp_dir run;
  const gpt_layout layout(tiny, layer_range::all(tiny));
  const std::string root = run.file("checkpoints");
  save(root, 10, layout, 1);
  const std::vector<float> newest = save(root, 20, layout, 2);
  auto from_run = read_gpt_weights(layout, run.path().string(), "serve.checkpoint");
  ASSERT_TRUE(from_run.ok()) << from_run.status();
  EXPECT_EQ(*from_run, newest);
  auto from_step = read_gpt_weights(layout, root + "/step-10", "serve.checkpoint");
  ASSERT_TRUE(from_step.ok()) << from_step.status();
  EXPECT_NE(*from_step, newest);
}

TEST(GptSource, ErrorsNameTheSettingAndTheMismatch) {
  testing::temp_dir run;
  const gpt_layout layout(tiny, layer_range::all(tiny));
  auto missing = read_gpt_weights(layout, run.file("nowhere"), "serve.checkpoint");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("serve.checkpoint " + run.file("nowhere")),
            std::string::npos)
      << missing.status();
  save(run.file("checkpoints"), 5, layout, 1);
  const gpt_config wider{256, 16, 1, 32, 2};
  auto other = read_gpt_weights(gpt_layout(wider, layer_range::all(wider)), run.path().string(),
                                "serve.checkpoint");
  ASSERT_FALSE(other.ok());
  EXPECT_NE(other.status().message().find("is model: the one it was trained with?"),
            std::string::npos)
      << other.status();
}

}  // namespace
}  // namespace troupe::models

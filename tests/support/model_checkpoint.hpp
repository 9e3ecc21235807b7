#pragma once

// A model checkpoint for tests that read one (a policy, a reward model, a reference): `layout`'s
// parameters from `seed`, times `scale`, committed as step `step` of the checkpoints at `root`.

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "models/decoder/decoder_layout.hpp"
#include "runtime/checkpoint/checkpoint_store.hpp"

namespace troupe::testing {

/// Returns the parameters committed.
inline std::vector<float> commit_model_checkpoint(const std::string& root, int64_t step,
                                                  const models::decoder_layout& layout,
                                                  uint64_t seed, float scale = 1.0f) {
  std::vector<float> params(layout.total());
  layout.initialize(params.data(), seed);
  for (auto& p : params)
    p *= scale;
  checkpoint::checkpoint_store store(root);
  auto file = store.stage(step, "model.safetensors", layout.to_named(params.data()));
  EXPECT_TRUE(file.ok()) << file.status();
  EXPECT_TRUE(store.commit(step, {*file}, {{"cursor", 0}}, 5).ok());
  return params;
}

}  // namespace troupe::testing

#include "models/gpt/gpt_checkpoint.hpp"

#include <gtest/gtest.h>

namespace troupe::models {
namespace {

const gpt_config config{40, 8, 4, 8, 2};

// Moments that say where they belong: parameter slot i's element j is i * 1000 + j (m) and its
// negative (v).
std::pair<std::vector<float>, std::vector<float>> labelled(const gpt_layout& layout) {
  std::vector<float> m(layout.total(), 0.0f), v(layout.total(), 0.0f);
  for (const auto& s : layout.slots()) {
    for (int64_t j = 0; j < s.numel; ++j) {
      m[s.offset + j] = static_cast<float>(s.index * 1000 + j);
      v[s.offset + j] = -m[s.offset + j];
    }
  }
  return {m, v};
}

// Moments written by two stages, each in two ZeRO shards, are read back by one whole model, and
// a whole model's by a stage: each parameter's element lands where its name says.
TEST(GptCheckpoint, MomentsMoveBetweenLayoutsByName) {
  const gpt_layout whole(config, layer_range::all(config));
  const gpt_layout first(config, {0, 2}), last(config, {2, 4});
  std::vector<tensor::named_tensors> files;
  for (const gpt_layout* stage : {&first, &last}) {
    const auto [m, v] = labelled(*stage);
    const int64_t half = stage->total() / 2;
    files.push_back(moments_file(*stage, 0, half, m.data(), v.data(), 7));
    files.push_back(
        moments_file(*stage, half, stage->total(), m.data() + half, v.data() + half, 7));
  }
  std::vector<float> m(whole.total(), 0.0f), v(whole.total(), 0.0f);
  auto steps = read_moments(files, whole, whole, m.data(), v.data());
  ASSERT_TRUE(steps.ok()) << steps.status();
  EXPECT_EQ(*steps, 7);
  const auto [want_m, want_v] = labelled(whole);
  for (const auto& s : whole.slots()) {
    for (int64_t j = 0; j < s.numel; ++j) {
      ASSERT_EQ(m[s.offset + j], want_m[s.offset + j]) << s.name << " " << j;
      ASSERT_EQ(v[s.offset + j], want_v[s.offset + j]) << s.name << " " << j;
    }
  }
  // The other way: the whole model's one file read by the last stage (its tied wte included).
  const auto [wm, wv] = labelled(whole);
  std::vector<float> lm(last.total(), 0.0f), lv(last.total(), 0.0f);
  ASSERT_TRUE(read_moments({moments_file(whole, 0, whole.total(), wm.data(), wv.data(), 3)}, last,
                           whole, lm.data(), lv.data())
                  .ok());
  const auto [want_lm, want_lv] = labelled(last);
  EXPECT_EQ(lm, want_lm);
  EXPECT_EQ(lv, want_lv);
}

// The flat files of before (one range of the whole model's buffer) are read against it.
TEST(GptCheckpoint, FlatMomentFilesAreReadAgainstTheWholeModel) {
  const gpt_layout whole(config, layer_range::all(config));
  const gpt_layout stage(config, {2, 4});
  const auto [m, v] = labelled(whole);
  std::vector<tensor::named_tensors> files;
  for (const auto& [begin, end] :
       {std::pair<int64_t, int64_t>{0, whole.total() / 3}, {whole.total() / 3, whole.total()}}) {
    tensor::named_tensors f;
    tensor::tensor fm = tensor::tensor::host({end - begin}),
                   fv = tensor::tensor::host({end - begin});
    std::copy(m.begin() + begin, m.begin() + end, fm.data<float>());
    std::copy(v.begin() + begin, v.begin() + end, fv.data<float>());
    f.tensors = {{"m", fm}, {"v", fv}};
    f.metadata = {{"begin", std::to_string(begin)}, {"end", std::to_string(end)}, {"steps", "5"}};
    files.push_back(f);
  }
  std::vector<float> sm(stage.total(), 0.0f), sv(stage.total(), 0.0f);
  auto steps = read_moments(files, stage, whole, sm.data(), sv.data());
  ASSERT_TRUE(steps.ok()) << steps.status();
  EXPECT_EQ(*steps, 5);
  EXPECT_EQ(sm, labelled(stage).first);
}

TEST(GptCheckpoint, MissingMomentsOrDisagreeingStepsAreDataLoss) {
  const gpt_layout whole(config, layer_range::all(config));
  const auto [m, v] = labelled(whole);
  std::vector<float> out_m(whole.total()), out_v(whole.total());
  // Only the first half was saved.
  auto missing = read_moments({moments_file(whole, 0, whole.total() / 2, m.data(), v.data(), 1)},
                              whole, whole, out_m.data(), out_v.data());
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(missing.status().message().find("are in no file of the checkpoint"), std::string::npos)
      << missing.status();
  const int64_t half = whole.total() / 2;
  auto steps =
      read_moments({moments_file(whole, 0, half, m.data(), v.data(), 1),
                    moments_file(whole, half, whole.total(), m.data() + half, v.data() + half, 2)},
                   whole, whole, out_m.data(), out_v.data());
  EXPECT_EQ(steps.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(read_moments({}, whole, whole, out_m.data(), out_v.data()).status().code(),
            absl::StatusCode::kDataLoss);
}

}  // namespace
}  // namespace troupe::models

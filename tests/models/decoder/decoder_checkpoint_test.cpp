#include "models/decoder/decoder_checkpoint.hpp"

#include <gtest/gtest.h>

namespace troupe::models {
namespace {

const decoder_config parted_model{40, 8, 4, 8, 2};

// Moments that say where they belong: parameter slot i's element j is i * 1000 + j (m) and its
// negative (v).
std::pair<std::vector<float>, std::vector<float>> labelled(const decoder_layout& layout) {
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
TEST(DecoderCheckpoint, MomentsMoveBetweenLayoutsByName) {
  const decoder_layout whole(parted_model, layer_range::all(parted_model));
  const decoder_layout first(parted_model, {0, 2}), last(parted_model, {2, 4});
  std::vector<tensor::named_tensors> files;
  for (const decoder_layout* stage : {&first, &last}) {
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
TEST(DecoderCheckpoint, FlatMomentFilesAreReadAgainstTheWholeModel) {
  const decoder_layout whole(parted_model, layer_range::all(parted_model));
  const decoder_layout stage(parted_model, {2, 4});
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

TEST(DecoderCheckpoint, MissingMomentsOrDisagreeingStepsAreDataLoss) {
  const decoder_layout whole(parted_model, layer_range::all(parted_model));
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

// Moments labelled by the whole model's element each holds (slot i's whole element j is
// i * 100000 + j), for a tensor-parallel rank's layout as for the whole model's.
std::pair<std::vector<float>, std::vector<float>> labelled_whole(const decoder_layout& layout) {
  std::vector<float> m(layout.total(), 0.0f), v(layout.total(), 0.0f);
  for (const auto& s : layout.slots()) {
    for_each_shard_run(
        s.whole_shape, s.split, layout.tp(), [&](int64_t local, int64_t whole, int64_t n) {
          for (int64_t j = 0; j < n; ++j) {
            m[s.offset + local + j] = static_cast<float>(s.index * 100000 + whole + j);
            v[s.offset + local + j] = -m[s.offset + local + j];
          }
        });
  }
  return {m, v};
}

// Two tensor-parallel ranks hold their heads' QKV columns and MLP units, the matching rows of
// the output projections and their half of the vocabulary's embeddings; the whole model's
// initialisation, weights and moments are theirs put together, and back: a tp run's checkpoint is
// read by one rank, and one rank's by a tp run.
TEST(DecoderCheckpoint, TensorParallelPartsAreTheWholeModelCut) {
  const decoder_config c{40, 8, 2, 16, 4};
  const decoder_layout whole(c, layer_range::all(c));
  const decoder_layout r0(c, layer_range::all(c), decoder_head::lm, {0, 2});
  const decoder_layout r1(c, layer_range::all(c), decoder_head::lm, {1, 2});
  ASSERT_EQ(r0.local_dim(), 8);
  ASSERT_EQ(r0.local_heads(), 2);
  EXPECT_EQ((*r0.find("h.0.attn.c_attn.weight"))->shape, (tensor::shape_t{16, 24}));
  EXPECT_EQ((*r0.find("h.0.attn.c_attn.bias"))->shape, (tensor::shape_t{24}));
  EXPECT_EQ((*r0.find("h.0.attn.c_proj.weight"))->shape, (tensor::shape_t{8, 16}));
  EXPECT_EQ((*r0.find("h.0.attn.c_proj.bias"))->shape, (tensor::shape_t{16}));
  EXPECT_EQ((*r0.find("h.1.mlp.c_fc.weight"))->shape, (tensor::shape_t{16, 32}));
  EXPECT_EQ((*r0.find("h.1.mlp.c_proj.weight"))->shape, (tensor::shape_t{32, 16}));
  EXPECT_EQ((*r0.find("wte.weight"))->shape, (tensor::shape_t{20, 16}));
  EXPECT_EQ((*r0.find("wpe.weight"))->shape, (tensor::shape_t{8, 16}));
  EXPECT_EQ(r1.vocab_first(), 20);

  std::vector<float> params(whole.total()), p0(r0.total()), p1(r1.total());
  whole.initialize(params.data(), 11);
  r0.initialize(p0.data(), 11);
  r1.initialize(p1.data(), 11);
  // Rank 1's queries of head 2 are the whole QKV's columns 8.. of its query third; its keys
  // start at the key third's column 16 + 8.
  const auto& qkv = **whole.find("h.0.attn.c_attn.weight");
  const auto& qkv1 = **r1.find("h.0.attn.c_attn.weight");
  for (int row : {0, 5, 15}) {
    EXPECT_EQ(p1[qkv1.offset + row * 24 + 0], params[qkv.offset + row * 48 + 8]);
    EXPECT_EQ(p1[qkv1.offset + row * 24 + 8], params[qkv.offset + row * 48 + 16 + 8]);
  }
  // Every part, whole tensor by whole tensor: from_named of the whole model cuts the same.
  std::vector<float> loaded(r1.total(), 0.0f);
  ASSERT_TRUE(r1.from_named(whole.to_named(params.data()), loaded.data()).ok());
  EXPECT_EQ(loaded, p1);

  // The parts' files, put together, are the whole model.
  checkpoint::checkpoint saved;
  saved.files["model-stage-0-tp-0.safetensors"] = r0.to_named(p0.data());
  saved.files["model-stage-0-tp-1.safetensors"] = r1.to_named(p1.data());
  EXPECT_EQ(stage_model_file(0, {1, 2}), "model-stage-0-tp-1.safetensors");
  auto merged = checkpoint_model(saved);
  ASSERT_TRUE(merged.ok()) << merged.status();
  std::vector<float> back(whole.total(), 0.0f);
  ASSERT_TRUE(whole.from_named(*merged, back.data()).ok());
  EXPECT_EQ(back, params);
  saved.files.erase("model-stage-0-tp-1.safetensors");
  EXPECT_EQ(checkpoint_model(saved).status().code(), absl::StatusCode::kDataLoss);

  // Moments of the two ranks, each in two ZeRO shards, read by the whole model and by rank 1.
  std::vector<tensor::named_tensors> files;
  for (const decoder_layout* rank : {&r0, &r1}) {
    const auto [m, v] = labelled_whole(*rank);
    const int64_t half = rank->total() / 2;
    files.push_back(moments_file(*rank, 0, half, m.data(), v.data(), 4));
    files.push_back(moments_file(*rank, half, rank->total(), m.data() + half, v.data() + half, 4));
  }
  std::vector<float> m(whole.total(), 0.0f), v(whole.total(), 0.0f);
  auto steps = read_moments(files, whole, whole, m.data(), v.data());
  ASSERT_TRUE(steps.ok()) << steps.status();
  EXPECT_EQ(*steps, 4);
  EXPECT_EQ(m, labelled_whole(whole).first);
  EXPECT_EQ(v, labelled_whole(whole).second);
  std::vector<float> m1(r1.total(), 0.0f), v1(r1.total(), 0.0f);
  ASSERT_TRUE(read_moments({moments_file(whole, 0, whole.total(), m.data(), v.data(), 4)}, r1,
                           whole, m1.data(), v1.data())
                  .ok());
  EXPECT_EQ(m1, labelled_whole(r1).first);
  // Rank 0's files alone leave rank 1's columns without moments.
  files.resize(2);
  EXPECT_EQ(read_moments(files, whole, whole, m.data(), v.data()).status().code(),
            absl::StatusCode::kDataLoss);
}

}  // namespace
}  // namespace troupe::models

// ZeRO-3 (issue 18): the parameters sharded too, each block gathered while it runs. Two
// data-parallel ranks as threads of this process over Gloo train as ZeRO-2 does within float
// tolerance (the same passes through the same batch-invariant kernels; a ZeRO-3 rank sums each
// pass's gradients over the ranks before adding the passes, ZeRO-2 the other way round), hold
// only their chunks between uses, and checkpoint what any ZeRO stage resumes from.

#include <map>
#include <thread>

#include <gtest/gtest.h>

#include "actors/trainer.hpp"
#include "models/decoder/decoder_checkpoint.hpp"
#include "runtime/comm/gloo_communicator.hpp"
#include "runtime/tensor/allocator.hpp"
#include "tests/support/temp_dir.hpp"

namespace troupe::actors {
namespace {

const models::decoder_config zero3_model{256, 32, 4, 32, 2};

std::string zero3_text() {
  std::string text;
  for (int i = 0; text.size() < 30000; ++i)
    text += "a stitch in time saves " + std::to_string(i % 89) + " when the tide turns\n";
  return text;
}

using files = std::vector<std::pair<std::string, tensor::named_tensors>>;

struct dp_run {
  std::vector<double> losses;
  double val_loss = 0;
  files checkpoint;  // every rank's files after the steps
};

class Zero3TrainerTest : public ::testing::Test {
 protected:
  Zero3TrainerTest()
      : corpus_(*text_corpus::load(dir_.write("t.txt", zero3_text()), 0.05, zero3_model.ctx)),
        layout_(zero3_model, models::layer_range::all(zero3_model)) {}

  trainer_options options(zero_stage zero) const {
    trainer_options o;
    o.global_batch = global_batch_;
    o.threads = 1;
    o.lr = {3e-3f, 2, 20, 0.1f};
    o.zero = zero;
    o.seed = 11;
    o.micro_batch = micro_batch_;
    o.checkpoint_segment = checkpoint_segment_;
    return o;
  }

  // `steps` steps from step `first` of `dp` ranks, from `resume` (checkpoint files) when given.
  dp_run run(int dp, zero_stage zero, int steps, int first = 0, const files* resume = nullptr) {
    comm::memory_store store;
    std::vector<std::vector<double>> losses(dp);
    std::vector<double> val(dp);
    dp_run out;
    std::mutex out_mutex;
    std::vector<std::thread> ranks;
    for (int rank = 0; rank < dp; ++rank) {
      ranks.emplace_back([&, rank] {
        std::unique_ptr<comm::communicator> group;
        if (dp > 1) {
          auto made = comm::make_gloo_communicator(store, {.name = "dp", .rank = rank, .size = dp});
          ASSERT_TRUE(made.ok()) << made.status();
          group = *std::move(made);
        }
        auto t = trainer::create(layout_, options(zero), group.get());
        ASSERT_TRUE(t.ok()) << t.status();
        if (resume != nullptr) {
          checkpoint::checkpoint saved;
          for (const auto& [name, contents] : *resume)
            saved.files.emplace(name, contents);
          ASSERT_TRUE((*t)->restore(saved).ok());
        }
        auto loader = *data_loader::create(corpus_, zero3_model.ctx, global_batch_, rank, dp, 5);
        loader.seek(first * global_batch_);
        for (int step = 0; step < steps; ++step) {
          auto report = (*t)->step(loader.next());
          ASSERT_TRUE(report.ok()) << report.status();
          losses[rank].push_back(report->loss);
        }
        // Three held-out batches over two ranks: one rank evaluates one, the other two.
        auto v = (*t)->evaluate(loader.validation(3, 4));
        ASSERT_TRUE(v.ok()) << v.status();
        val[rank] = *v;
        auto made = (*t)->checkpoint_files();
        ASSERT_TRUE(made.ok()) << made.status();
        std::lock_guard lock(out_mutex);
        for (auto& f : *made)
          out.checkpoint.push_back(std::move(f));
      });
    }
    for (auto& t : ranks)
      t.join();
    for (int r = 1; r < dp; ++r) {
      EXPECT_EQ(losses[r], losses[0]) << "every rank reports the same loss";
      EXPECT_EQ(val[r], val[0]);
    }
    out.losses = losses[0];
    out.val_loss = val[0];
    return out;
  }

  static std::vector<float> weights(const dp_run& r) {
    for (const auto& [name, contents] : r.checkpoint) {
      if (name != "model.safetensors") continue;
      std::vector<float> flat;
      for (const auto& [tensor_name, t] : contents.tensors)
        flat.insert(flat.end(), t.data<float>(), t.data<float>() + t.numel());
      return flat;
    }
    ADD_FAILURE() << "no model.safetensors";
    return {};
  }

  static void expect_near(const dp_run& got, const dp_run& want, const std::string& what) {
    ASSERT_EQ(got.losses.size(), want.losses.size());
    for (size_t i = 0; i < got.losses.size(); ++i)
      EXPECT_NEAR(got.losses[i], want.losses[i], 1e-5 * want.losses[i]) << what << " step " << i;
    EXPECT_NEAR(got.val_loss, want.val_loss, 1e-5 * want.val_loss) << what;
    const std::vector<float> a = weights(got), b = weights(want);
    ASSERT_EQ(a.size(), b.size());
    double worst = 0;
    for (size_t i = 0; i < a.size(); ++i)
      worst = std::max(worst, static_cast<double>(std::abs(a[i] - b[i])));
    EXPECT_LT(worst, 2e-5) << what;
  }

  testing::temp_dir dir_;
  text_corpus corpus_;
  models::decoder_layout layout_;
  int global_batch_ = 8, micro_batch_ = 0, checkpoint_segment_ = 0;
};

// The equivalence: 30 steps of ZeRO-3 as ZeRO-2, each rank's share in one pass, in two
// passes (each block's gradients reduce-scattered after each pass's backward), with every
// block's activations recomputed (the block gathered for its backward once, the recompute
// included), and over three ranks, which the units do not split evenly over (their collectives
// go through padded staging buffers).
TEST_F(Zero3TrainerTest, TrainsAsZeroTwoWithinFloatTolerance) {
  expect_near(run(2, zero_stage::three, 30), run(2, zero_stage::two, 30), "one pass");
  micro_batch_ = 2;
  expect_near(run(2, zero_stage::three, 10), run(2, zero_stage::two, 10), "two passes");
  micro_batch_ = 0;
  checkpoint_segment_ = 1;
  expect_near(run(2, zero_stage::three, 10), run(2, zero_stage::two, 10), "checkpointing");
  checkpoint_segment_ = 0;
  global_batch_ = 6;
  ASSERT_NE(layout_.block(1).ln1_w - layout_.block(0).ln1_w, 0) << "a block";
  ASSERT_NE((layout_.block(1).ln1_w - layout_.block(0).ln1_w) % 3, 0) << "not a multiple of 3";
  expect_near(run(3, zero_stage::three, 10), run(3, zero_stage::two, 10), "three ranks");
}

// A ZeRO-3 checkpoint (the model gathered for rank 0, each rank's moments of its chunks) resumes
// at ZeRO-1 and on one rank as the uninterrupted run continues, and a ZeRO-1 one at ZeRO-3.
TEST_F(Zero3TrainerTest, CheckpointsResumeAtAnyZeroStage) {
  const dp_run straight = run(2, zero_stage::three, 12);
  const dp_run first = run(2, zero_stage::three, 6);
  dp_run rest = run(2, zero_stage::one, 6, 6, &first.checkpoint);
  rest.losses.insert(rest.losses.begin(), first.losses.begin(), first.losses.end());
  expect_near(rest, straight, "zero 3 -> zero 1");
  dp_run alone = run(1, zero_stage::none, 6, 6, &first.checkpoint);
  alone.losses.insert(alone.losses.begin(), first.losses.begin(), first.losses.end());
  expect_near(alone, straight, "zero 3 -> one rank");
  const dp_run zero1 = run(2, zero_stage::one, 6);
  dp_run back = run(2, zero_stage::three, 6, 6, &zero1.checkpoint);
  back.losses.insert(back.losses.begin(), zero1.losses.begin(), zero1.losses.end());
  expect_near(back, run(2, zero_stage::one, 12), "zero 1 -> zero 3");
}

// Between uses a rank holds its chunks only: after a step, the pages of its parameters and
// gradients backed by memory are its chunks' (and the partial pages at the units' edges); during
// it, one block at a time besides the parameters outside the blocks.
TEST_F(Zero3TrainerTest, ARankHoldsItsChunksBetweenUses) {
  comm::memory_store store;
  std::vector<std::thread> ranks;
  for (int rank = 0; rank < 2; ++rank) {
    ranks.emplace_back([&, rank] {
      auto group = comm::make_gloo_communicator(store, {.name = "dp", .rank = rank, .size = 2});
      ASSERT_TRUE(group.ok()) << group.status();
      auto z = zero3_parameters::create(layout_, **group);
      ASSERT_TRUE(z.ok()) << z.status();
      zero3_parameters& p = **z;
      layout_.initialize(p.params().data<float>(), 11);
      p.release_all();
      int64_t chunks = 0;
      for (const models::param_range& r : p.owned())
        chunks += r.end - r.begin;
      // Units: the embeddings, four blocks, the final norm: two partial pages each at most.
      const size_t slack = 6 * 2 * 4096;
      EXPECT_LE(p.resident_bytes().params, chunks * sizeof(float) + slack);
      // A forward and backward pass through the hooks, as a stage calls them; in the middle of
      // it a block is there whole.
      ASSERT_TRUE(p.begin_step(true, 1).ok());
      const auto hooks = p.hooks();
      const int64_t block = layout_.block(1).ln1_w - layout_.block(0).ln1_w;
      const int64_t outside = layout_.total() - zero3_model.layers * block;
      size_t most = 0;
      for (int l = 0; l < zero3_model.layers; ++l) {
        hooks.acquire(l, false);
        most = std::max(most, p.resident_bytes().params);
        if (l == 1) {
          EXPECT_GE(p.resident_bytes().params, (chunks + block / 2) * sizeof(float));
          // The gathered block is the whole model's, element for element.
          std::vector<float> whole(layout_.total());
          layout_.initialize(whole.data(), 11);
          const float* got = p.params().data<float>();
          for (int64_t i = layout_.block(1).ln1_w; i < layout_.block(2).ln1_w; ++i)
            ASSERT_EQ(got[i], whole[i]) << i;
        }
        hooks.release(l, false);
      }
      for (int l = zero3_model.layers - 1; l >= 0; --l) {
        hooks.acquire(l, true);
        most = std::max(most, p.resident_bytes().params);
        std::fill(p.local() + layout_.block(l).ln1_w, p.local() + layout_.block(l).fc2_b, 1.0f);
        hooks.release(l, true);
      }
      EXPECT_LE(most, (chunks + block + outside) * sizeof(float) + slack);
      ASSERT_TRUE(p.end_step(true).ok());
      EXPECT_LE(p.resident_bytes().params, chunks * sizeof(float) + slack);
      EXPECT_LE(p.resident_bytes().gradients, chunks * sizeof(float) + 2 * slack);
      // Each rank's chunk of block 0's summed gradient: 1 from each of the two ranks.
      for (const models::param_range& r : p.owned()) {
        if (r.begin < layout_.block(0).ln1_w || r.begin >= layout_.block(0).fc2_b) continue;
        EXPECT_EQ(p.grads().data<float>()[r.begin], 2.0f);
      }
      EXPECT_EQ(trainer::memory(layout_, options(zero_stage::three), 2).optimizer,
                2 * zero3_parameters::memory(layout_, 2).chunks * sizeof(float));
    });
  }
  for (auto& t : ranks)
    t.join();
}

TEST_F(Zero3TrainerTest, WhatItDoesNotComposeWithIsRefusedClearly) {
  comm::memory_store store;
  std::vector<std::thread> ranks;
  std::vector<absl::Status> got(2);
  // The groups outlive both threads: a rank that is done first must not close its connections
  // while the other may still be forming the group.
  std::vector<std::unique_ptr<comm::communicator>> groups(2);
  for (int rank = 0; rank < 2; ++rank) {
    ranks.emplace_back([&, rank] {
      auto group = comm::make_gloo_communicator(store, {.name = "dp", .rank = rank, .size = 2});
      ASSERT_TRUE(group.ok()) << group.status();
      groups[rank] = *std::move(group);
      trainer_options o = options(zero_stage::three);
      o.checkpoint_segment = 2;
      got[rank] = trainer::create(layout_, o, groups[rank].get()).status();
    });
  }
  for (auto& t : ranks)
    t.join();
  for (const absl::Status& s : got) {
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(s.message().find("activation_checkpointing blocks"), std::string::npos) << s;
  }
}

}  // namespace
}  // namespace troupe::actors

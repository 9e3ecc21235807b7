#include "actors/trainer.hpp"

#include <cmath>
#include <thread>

#include <gtest/gtest.h>

#include "runtime/comm/gloo_communicator.hpp"
#include "tests/support/temp_dir.hpp"

namespace troupe::actors {
namespace {

const models::decoder_config trainer_model{256, 32, 2, 32, 2};

std::string trainer_text() {
  std::string text;
  for (int i = 0; text.size() < 30000; ++i) {
    text += "the quick brown fox " + std::to_string(i % 97) + " jumps over the lazy dog\n";
  }
  return text;
}

class TrainerTest : public ::testing::Test {
 protected:
  TrainerTest()
      : corpus_(*text_corpus::load(dir_.write("t.txt", trainer_text()), 0.05, trainer_model.ctx)),
        layout_(trainer_model, models::layer_range::all(trainer_model)) {}

  trainer_options options(zero_stage zero) const {
    trainer_options o = base_;
    o.global_batch = 8;
    o.threads = 1;
    o.lr = {3e-3f, 2, 10, 0.1f};
    o.zero = zero;
    o.seed = 11;
    return o;
  }

  void lose_and_gain_a_rank(zero_stage zero);

  // Losses of `steps` steps on `dp` ranks (threads, one Gloo group), and rank 0's parameters.
  std::pair<std::vector<double>, std::vector<float>> run(int dp, zero_stage zero, int steps) {
    comm::memory_store store;
    std::vector<std::vector<double>> losses(dp);
    std::vector<float> params;
    std::vector<std::thread> ranks;
    for (int r = 0; r < dp; ++r) {
      ranks.emplace_back([&, r] {
        std::unique_ptr<comm::communicator> group;
        if (dp > 1) {
          auto g = comm::make_gloo_communicator(store, {.name = "dp", .rank = r, .size = dp});
          ASSERT_TRUE(g.ok()) << g.status();
          group = std::move(*g);
        }
        auto t = trainer::create(layout_, options(zero), group.get());
        ASSERT_TRUE(t.ok()) << t.status();
        auto loader = *data_loader::create(corpus_, trainer_model.ctx, 8, r, dp, 5);
        for (int s = 0; s < steps; ++s) {
          auto report = (*t)->step(loader.next());
          ASSERT_TRUE(report.ok()) << report.status();
          losses[r].push_back(report->loss);
        }
        if (r == 0) params.assign((*t)->params(), (*t)->params() + layout_.total());
      });
    }
    for (auto& t : ranks)
      t.join();
    for (int r = 1; r < dp; ++r)
      EXPECT_EQ(losses[r], losses[0]) << "ranks disagree";
    return {losses[0], params};
  }

  testing::temp_dir dir_;
  text_corpus corpus_;
  models::decoder_layout layout_;
  trainer_options base_;  // what options() starts from
};

// Bucketed all-reduce during backward, accumulation over micro-batches: the same step, so the
// same losses (bit for bit at dp=2, where a sum of two is exact either way round).
TEST_F(TrainerTest, OverlappedBucketsAndMicroBatchesChangeNothing) {
  base_.overlap_comm = false;
  const auto [after, after_params] = run(2, zero_stage::one, 4);
  base_.overlap_comm = true;
  const auto [overlapped, overlapped_params] = run(2, zero_stage::one, 4);
  EXPECT_EQ(overlapped, after);
  EXPECT_EQ(overlapped_params, after_params);
  base_.micro_batch = 1;  // four passes of one sequence per rank
  const auto [accumulated, accumulated_params] = run(2, zero_stage::one, 4);
  for (size_t i = 0; i < after.size(); ++i)
    EXPECT_NEAR(accumulated[i], after[i], 1e-5) << "step " << i;
}

TEST(LrSchedule, WarmupThenCosineToTheFloor) {
  const lr_schedule lr{1e-3f, 10, 110, 0.1f};
  EXPECT_FLOAT_EQ(lr.at(0), 1e-4f);
  EXPECT_FLOAT_EQ(lr.at(9), 1e-3f);
  EXPECT_FLOAT_EQ(lr.at(10), 1e-3f);
  EXPECT_NEAR(lr.at(60), 0.55e-3f, 1e-9);
  EXPECT_NEAR(lr.at(110), 1e-4f, 1e-9);
  EXPECT_NEAR(lr.at(500), 1e-4f, 1e-9);
}

TEST_F(TrainerTest, TwoRanksMatchOneAtTheSameGlobalBatchForEveryZeroStage) {
  const auto [single, single_params] = run(1, zero_stage::none, 6);
  EXPECT_LT(single.back(), single.front());  // it learns
  for (zero_stage zero : {zero_stage::none, zero_stage::one, zero_stage::two}) {
    const auto [pair, pair_params] = run(2, zero, 6);
    for (size_t i = 0; i < single.size(); ++i) {
      EXPECT_NEAR(pair[i], single[i], 1e-4) << "zero " << int(zero) << " step " << i;
    }
    double max_diff = 0;
    for (size_t i = 0; i < single_params.size(); ++i) {
      max_diff = std::max<double>(max_diff, std::abs(pair_params[i] - single_params[i]));
    }
    EXPECT_LT(max_diff, 1e-4) << "zero " << int(zero);
  }
}

TEST_F(TrainerTest, RestoringAStateContinuesBitExactly) {
  auto straight = *trainer::create(layout_, options(zero_stage::none), nullptr);
  auto loader = *data_loader::create(corpus_, trainer_model.ctx, 8, 0, 1, 5);
  for (int s = 0; s < 4; ++s)
    ASSERT_TRUE(straight->step(loader.next()).ok());
  const tensor::named_tensors weights = layout_.to_named(straight->params());
  const tensor::named_tensors state = straight->optimizer_state();
  const int64_t cursor = loader.cursor();
  std::vector<double> after;
  for (int s = 0; s < 4; ++s)
    after.push_back(straight->step(loader.next())->loss);

  auto resumed = *trainer::create(layout_, options(zero_stage::none), nullptr);
  ASSERT_TRUE(resumed->restore(weights, {state}).ok());
  EXPECT_EQ(resumed->steps(), 4);
  auto loader2 = *data_loader::create(corpus_, trainer_model.ctx, 8, 0, 1, 5);
  loader2.seek(cursor);
  for (int s = 0; s < 4; ++s)
    EXPECT_EQ(resumed->step(loader2.next())->loss, after[s]) << s;
  EXPECT_EQ(0, std::memcmp(resumed->params(), straight->params(), layout_.total() * sizeof(float)));
}

TEST_F(TrainerTest, ShardedOptimizerStatesReassembleAtAnotherWorldSize) {
  // Two ZeRO-2 ranks save their shards; one rank restores from both.
  comm::memory_store store;
  std::vector<tensor::named_tensors> states(2);
  tensor::named_tensors weights;
  std::vector<std::thread> ranks;
  for (int r = 0; r < 2; ++r) {
    ranks.emplace_back([&, r] {
      auto g = *comm::make_gloo_communicator(store, {.name = "save", .rank = r, .size = 2});
      auto t = *trainer::create(layout_, options(zero_stage::two), g.get());
      auto loader = *data_loader::create(corpus_, trainer_model.ctx, 8, r, 2, 5);
      for (int s = 0; s < 3; ++s)
        ASSERT_TRUE(t->step(loader.next()).ok());
      states[r] = t->optimizer_state();
      if (r == 0) weights = layout_.to_named(t->params());
    });
  }
  for (auto& t : ranks)
    t.join();
  auto single = *trainer::create(layout_, options(zero_stage::none), nullptr);
  ASSERT_TRUE(single->restore(weights, states).ok());
  EXPECT_EQ(single->steps(), 3);
  auto loader = *data_loader::create(corpus_, trainer_model.ctx, 8, 0, 1, 5);
  loader.seek(3 * 8);
  auto report = single->step(loader.next());
  ASSERT_TRUE(report.ok());
  EXPECT_LT(report->loss, 5.6);  // still the trained model (a fresh one is at log 256 = 5.55+)
  EXPECT_FALSE(single->restore(weights, {}).ok());
}

// A job that loses a rank and later gains one: 3 ranks for 2 steps (shares 3, 3, 2 of the
// global batch of 8), rank 2 lost and the two survivors regrouped (shares 4, 4) for 2 steps, a
// new rank joined with nothing and regrouped into 3 again for 2 steps; with ZeRO-1/2 the first
// phase's third step completed and was then rolled back (as when it did not complete on every
// rank).
// Every step's loss and the end's parameters match one rank training on the same global
// batches: the same samples, summed in another order (the tolerance of the dp=2 against dp=1
// test). With ZeRO-1/2 the lost rank's optimizer shard comes from the replica rank 1 kept, the
// shards are re-partitioned over each new world, and the joiner pulls from both survivors.
void TrainerTest::lose_and_gain_a_rank(zero_stage zero) {
  const auto [single, single_params] = run(1, zero_stage::none, 6);
  trainer_options o = options(zero);
  o.elastic = true;
  o.shard_replicas = zero != zero_stage::none;
  std::vector<std::unique_ptr<trainer>> trainers(3);
  std::vector<std::unique_ptr<comm::communicator>> groups(9);  // alive as long as their trainers
  std::vector<double> losses;
  comm::memory_store store;
  // One phase: ranks [0, world) of epoch `epoch` regroup at step `first_step` (epoch 0: each
  // from the seed), take `steps` steps, and then roll back `undo` of them (0 or 1).
  const auto phase = [&](uint64_t epoch, int world, int first_step, int steps, int undo) {
    std::vector<std::thread> threads;
    std::vector<std::vector<double>> phase_losses(world);
    for (int r = 0; r < world; ++r) {
      threads.emplace_back([&, r] {
        auto g = comm::make_gloo_communicator(
            store, {.name = "dp", .rank = r, .size = world, .epoch = epoch});
        ASSERT_TRUE(g.ok()) << g.status();
        groups[epoch * 3 + r] = std::move(*g);
        auto t = epoch == 0 ? trainer::create(layout_, o, groups[r].get())
                            : trainer::regroup(trainers[r].get(), layout_, o,
                                               groups[epoch * 3 + r].get(), first_step);
        ASSERT_TRUE(t.ok()) << t.status();
        trainers[r] = std::move(*t);
        auto loader = *data_loader::create(corpus_, trainer_model.ctx, 8, r, world, 5);
        loader.seek(first_step * 8);
        for (int s = 0; s < steps; ++s) {
          auto report = trainers[r]->step(loader.next());
          ASSERT_TRUE(report.ok()) << report.status();
          if (s < steps - undo) phase_losses[r].push_back(report->loss);
        }
        if (undo > 0) {
          ASSERT_TRUE(trainers[r]->rollback_step().ok());
        }
      });
    }
    for (auto& t : threads)
      t.join();
    losses.insert(losses.end(), phase_losses[0].begin(), phase_losses[0].end());
  };
  const bool sharded = zero != zero_stage::none;
  phase(0, 3, 0, sharded ? 3 : 2, sharded ? 1 : 0);  // only a ZeRO step keeps an undo
  EXPECT_EQ(trainers[1]->steps(), 2);
  trainers[2].reset();  // lost with its process
  phase(1, 2, 2, 2, 0);
  phase(2, 3, 4, 2, 0);  // rank 2 joins with nothing
  ASSERT_EQ(losses.size(), single.size());
  for (size_t i = 0; i < losses.size(); ++i)
    EXPECT_NEAR(losses[i], single[i], 1e-4) << "step " << i;
  EXPECT_EQ(trainers[2]->steps(), 6);
  double worst = 0;
  for (int64_t i = 0; i < layout_.total(); ++i)
    worst = std::max(worst, std::abs(double(trainers[2]->params()[i]) - single_params[i]));
  EXPECT_LT(worst, 1e-4);
}

TEST_F(TrainerTest, ARegroupedJobMatchesOneRankAcrossALostAndAJoinedRank) {
  lose_and_gain_a_rank(zero_stage::none);
}

TEST_F(TrainerTest, ARegroupedZeroOneJobWithReplicasMatchesOneRank) {
  lose_and_gain_a_rank(zero_stage::one);
}

TEST_F(TrainerTest, ARegroupedZeroTwoJobWithReplicasMatchesOneRank) {
  lose_and_gain_a_rank(zero_stage::two);
}

// Without a replica a lost rank's shard is gone: the regroup says so (the group then restores
// a checkpoint). A joiner alone has no state, and only a ZeRO step keeps an undo.
TEST_F(TrainerTest, RegroupRefusesALostShardWithoutAReplicaAndAGroupWithoutState) {
  comm::memory_store store;
  std::vector<std::unique_ptr<trainer>> first(2);
  std::vector<std::unique_ptr<comm::communicator>> groups(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      groups[r] = *comm::make_gloo_communicator(store, {.name = "dp", .rank = r, .size = 2});
      first[r] = *trainer::create(layout_, options(zero_stage::one), groups[r].get());
    });
  }
  for (auto& t : threads)
    t.join();
  const auto alone =
      trainer::regroup(first[0].get(), layout_, options(zero_stage::one), nullptr, 0);
  EXPECT_EQ(alone.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(alone.status().message().find("shard_replicas"), std::string::npos) << alone.status();
  EXPECT_EQ(
      trainer::regroup(nullptr, layout_, options(zero_stage::none), nullptr, 0).status().code(),
      absl::StatusCode::kFailedPrecondition);
  auto t = *trainer::create(layout_, options(zero_stage::none), nullptr);
  EXPECT_EQ(t->rollback_step().code(), absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace troupe::actors

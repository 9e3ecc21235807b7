// actors::trainer as a pipeline stage and a tensor-parallel rank (issue 18): dp x pp x tp ranks
// as threads of this process, each with its data-parallel group (its stage and tensor-parallel
// rank across the replicas), its pipeline group (its replica's stages) and its tensor-parallel
// group (its stage's ranks) over Gloo. A grid trains as the whole model on one rank, within float
// tolerance: the same micro-batches, the same kernels (batch-invariant), only the order in which
// the tied embedding's two gradients and the ranks' gradients are added differs.

#include <map>
#include <thread>

#include <gtest/gtest.h>

#include "actors/trainer.hpp"
#include "runtime/comm/gloo_communicator.hpp"
#include "tests/support/temp_dir.hpp"

namespace troupe::actors {
namespace {

const models::decoder_config pipeline_model{256, 32, 4, 32, 2};
constexpr int global_batch = 8;

std::string pipeline_text() {
  std::string text;
  for (int i = 0; text.size() < 30000; ++i)
    text += "the quick brown fox " + std::to_string(i % 97) + " jumps over the lazy dog\n";
  return text;
}

using named_floats = std::map<std::string, std::vector<float>>;

struct grid_run {
  std::vector<double> losses;  // per step
  named_floats params;         // replica 0's, by name, after the steps
  named_floats first_grads;    // replica 0's summed gradients of the first step (zero 0)
  double val_loss = 0;
};

class PipelineTrainerTest : public ::testing::Test {
 protected:
  PipelineTrainerTest()
      : corpus_(
            *text_corpus::load(dir_.write("t.txt", pipeline_text()), 0.05, pipeline_model.ctx)) {}

  trainer_options options(int micro_batches, pipeline_schedule_kind schedule, zero_stage zero,
                          int stages, int stage) const {
    trainer_options o;
    o.global_batch = global_batch;
    o.threads = 1;
    o.lr = {3e-3f, 2, 10, 0.1f};
    o.zero = zero;
    o.seed = 11;
    o.micro_batch = stages == 1 ? global_batch / micro_batches : 0;
    o.pipeline = {stages, stage, micro_batches, schedule};
    return o;
  }

  // `steps` steps of dp x pp x tp ranks; replica d's stage s's tensor-parallel rank t is rank
  // (d * pp + s) * tp + t.
  grid_run run(int dp, int pp, int micro_batches, pipeline_schedule_kind schedule, zero_stage zero,
               int steps, int tp = 1) {
    comm::memory_store store;
    const int world = dp * pp * tp;
    std::vector<std::vector<double>> losses(world);
    std::vector<double> val(world);
    grid_run out;
    std::mutex out_mutex;
    std::vector<std::thread> ranks;
    for (int rank = 0; rank < world; ++rank) {
      ranks.emplace_back([&, rank] {
        const int d = rank / (pp * tp), s = rank / tp % pp, r = rank % tp;
        const int per = pipeline_model.layers / pp;
        models::decoder_layout layout(pipeline_model, {s * per, (s + 1) * per},
                                      models::decoder_head::lm, {r, tp});
        // Each dimension's group: the ranks that differ in it alone.
        const auto group = [&](const std::string& name, int me, int size) {
          std::unique_ptr<comm::communicator> g;
          if (size == 1) return g;
          auto made = comm::make_gloo_communicator(store, {.name = name, .rank = me, .size = size});
          EXPECT_TRUE(made.ok()) << made.status();
          if (made.ok()) g = *std::move(made);
          return g;
        };
        const auto at = [](int a, int b) { return std::to_string(a) + "-" + std::to_string(b); };
        const auto data_group = group("dp" + at(s, r), d, dp);
        const auto pipe_group = group("pp" + at(d, r), s, pp);
        const auto tensor_group = group("tp" + at(d, s), r, tp);
        const trainer_options o = options(micro_batches, schedule, zero, pp, s);
        auto t = trainer::create(layout, o, data_group.get(), pipe_group.get(), tensor_group.get());
        ASSERT_TRUE(t.ok()) << t.status();
        EXPECT_EQ(trainer::memory(layout, o, dp).activations, (*t)->activation_bytes())
            << "troupe check's estimate is what the rank holds";
        auto loader = *data_loader::create(corpus_, pipeline_model.ctx, global_batch, d, dp, 5);
        // The whole model's tensors, put together from the ranks' parts.
        const auto gather = [&](const float* p, named_floats& into) {
          std::lock_guard lock(out_mutex);
          for (const auto& slot : layout.slots()) {
            auto& whole = into[slot.name];
            whole.resize(tensor::shape_numel(slot.whole_shape));
            models::for_each_shard_run(slot.whole_shape, slot.split, layout.tp(),
                                       [&](int64_t local, int64_t w, int64_t n) {
                                         std::copy(p + slot.offset + local,
                                                   p + slot.offset + local + n, whole.begin() + w);
                                       });
          }
        };
        for (int step = 0; step < steps; ++step) {
          auto report = (*t)->step(loader.next());
          ASSERT_TRUE(report.ok()) << report.status();
          losses[rank].push_back(report->loss);
          if (step == 0 && d == 0 && zero == zero_stage::none) {
            gather((*t)->gradients(), out.first_grads);
          }
        }
        auto v = (*t)->evaluate(loader.validation(2, 8));
        ASSERT_TRUE(v.ok()) << v.status();
        val[rank] = *v;
        if (d == 0) gather((*t)->params(), out.params);
      });
    }
    for (auto& t : ranks)
      t.join();
    for (int r = 1; r < world; ++r) {
      EXPECT_EQ(losses[r], losses[0]) << "every rank reports the same loss";
      EXPECT_EQ(val[r], val[0]);
    }
    out.losses = losses[0];
    out.val_loss = val[0];
    return out;
  }

  void expect_like_the_whole_model(const grid_run& grid, const grid_run& whole,
                                   const std::string& what) {
    ASSERT_EQ(grid.losses.size(), whole.losses.size());
    for (size_t i = 0; i < grid.losses.size(); ++i)
      EXPECT_NEAR(grid.losses[i], whole.losses[i], 1e-5 * whole.losses[i]) << what << " step " << i;
    EXPECT_NEAR(grid.val_loss, whole.val_loss, 1e-5 * whole.val_loss) << what;
    ASSERT_EQ(grid.params.size(), whole.params.size()) << what;
    for (const auto& [name, want] : whole.params) {
      const auto& got = grid.params.at(name);
      double worst = 0;
      for (size_t i = 0; i < want.size(); ++i)
        worst = std::max(worst, static_cast<double>(std::abs(got[i] - want[i])));
      EXPECT_LT(worst, 2e-5) << what << ": " << name;
    }
    // The gradients before the first update, parameter by parameter, within 1e-5 of the
    // largest (a last stage's copy of the tied embedding holds the whole sum as the first's).
    for (const auto& [name, got] : grid.first_grads) {
      const auto& want = whole.first_grads.at(name);
      double worst = 0, largest = 0;
      for (size_t i = 0; i < want.size(); ++i) {
        worst = std::max(worst, static_cast<double>(std::abs(got[i] - want[i])));
        largest = std::max(largest, static_cast<double>(std::abs(want[i])));
      }
      EXPECT_LE(worst, 1e-5 * largest) << what << ": the first gradient of " << name;
    }
  }

  testing::temp_dir dir_;
  text_corpus corpus_;
};

TEST_F(PipelineTrainerTest, TwoAndFourStagesTrainAsTheWholeModel) {
  const auto one_f_one_b = pipeline_schedule_kind::one_f_one_b;
  const grid_run whole = run(1, 1, 4, one_f_one_b, zero_stage::none, 5);
  expect_like_the_whole_model(run(1, 2, 4, one_f_one_b, zero_stage::none, 5), whole, "pp 2, 1f1b");
  expect_like_the_whole_model(run(1, 2, 4, pipeline_schedule_kind::gpipe, zero_stage::none, 5),
                              whole, "pp 2, gpipe");
  expect_like_the_whole_model(run(1, 4, 4, one_f_one_b, zero_stage::none, 5), whole, "pp 4, 1f1b");
}

// zb1 runs each backward in halves, the weight halves later and concurrently with the sends:
// every parameter's gradient adds the same terms in the same order as 1F1B's, so the same bits.
TEST_F(PipelineTrainerTest, ZeroBubbleTrainsBitForBitAs1F1B) {
  for (int pp : {2, 4}) {
    const grid_run one_f_one_b =
        run(1, pp, 8, pipeline_schedule_kind::one_f_one_b, zero_stage::none, 3);
    const grid_run zb1 = run(1, pp, 8, pipeline_schedule_kind::zb1, zero_stage::none, 3);
    EXPECT_EQ(zb1.losses, one_f_one_b.losses) << "pp " << pp;
    EXPECT_EQ(zb1.val_loss, one_f_one_b.val_loss) << "pp " << pp;
    EXPECT_EQ(zb1.params, one_f_one_b.params) << "pp " << pp;
  }
}

// Megatron's tensor parallelism: two ranks of each block, alone, with two pipeline stages, with
// two replicas (ZeRO-1), and all three (dp 2 x pp 2 x tp 2, zb1, eight ranks) train as the
// whole model; every tensor-parallel step checks that the replicated gradients agree.
TEST_F(PipelineTrainerTest, TensorParallelRanksTrainAsTheWholeModel) {
  const auto one_f_one_b = pipeline_schedule_kind::one_f_one_b;
  const grid_run whole = run(1, 1, 4, one_f_one_b, zero_stage::none, 4);
  expect_like_the_whole_model(run(1, 1, 4, one_f_one_b, zero_stage::none, 4, 2), whole, "tp 2");
  expect_like_the_whole_model(run(1, 2, 4, one_f_one_b, zero_stage::none, 4, 2), whole,
                              "pp 2 x tp 2");
  expect_like_the_whole_model(run(2, 1, 2, one_f_one_b, zero_stage::one, 4, 2), whole,
                              "dp 2 x tp 2, zero 1");
  expect_like_the_whole_model(run(2, 2, 2, pipeline_schedule_kind::zb1, zero_stage::two, 4, 2),
                              whole, "dp 2 x pp 2 x tp 2, zb1, zero 2");
}

// The replicated parameters' gradients are checked, not assumed, to agree: two ranks started
// from different embeddings (different seeds) are refused at their first step, both of them.
TEST_F(PipelineTrainerTest, TensorParallelRanksWhoseReplicatedGradientsDifferAreRefused) {
  comm::memory_store store;
  std::vector<absl::Status> got(2);
  std::vector<std::thread> ranks;
  for (int r = 0; r < 2; ++r) {
    ranks.emplace_back([&, r] {
      const models::decoder_layout layout(pipeline_model, models::layer_range::all(pipeline_model),
                                          models::decoder_head::lm, {r, 2});
      auto group = comm::make_gloo_communicator(store, {.name = "tp", .rank = r, .size = 2});
      ASSERT_TRUE(group.ok()) << group.status();
      trainer_options o = options(1, pipeline_schedule_kind::one_f_one_b, zero_stage::none, 1, 0);
      o.seed = 11 + r;
      auto t = trainer::create(layout, o, nullptr, nullptr, group->get());
      ASSERT_TRUE(t.ok()) << t.status();
      auto loader = *data_loader::create(corpus_, pipeline_model.ctx, global_batch, 0, 1, 5);
      got[r] = (*t)->step(loader.next()).status();
    });
  }
  for (auto& t : ranks)
    t.join();
  for (const absl::Status& s : got) {
    EXPECT_EQ(s.code(), absl::StatusCode::kInternal) << s;
    EXPECT_NE(s.message().find("replicated parameters' gradients (LayerNorms, output biases, "
                               "position embedding) differ across the tensor-parallel group"),
              std::string::npos)
        << s;
  }
}

TEST_F(PipelineTrainerTest, DataAndPipelineParallelTogetherTrainAsTheWholeModel) {
  const auto one_f_one_b = pipeline_schedule_kind::one_f_one_b;
  const grid_run whole = run(1, 1, 4, one_f_one_b, zero_stage::none, 4);
  // dp 2 x pp 2: each replica's share of 4 sequences in 2 micro-batches of 2, as the whole
  // model's micro-batches of 2.
  for (zero_stage zero : {zero_stage::none, zero_stage::one, zero_stage::two}) {
    expect_like_the_whole_model(run(2, 2, 2, one_f_one_b, zero, 4), whole,
                                "dp 2 x pp 2, zero " + std::to_string(static_cast<int>(zero)));
  }
}

}  // namespace
}  // namespace troupe::actors

#include "actors/trainer_actor.hpp"

#include <gtest/gtest.h>

#include "runtime/actor/status_bridge.hpp"
#include "runtime/actor/system_config.hpp"
#include "tests/support/temp_dir.hpp"

namespace troupe::actors {
namespace {

using namespace std::chrono_literals;

const models::gpt_config config{256, 32, 2, 32, 2};

class TrainerActorTest : public ::testing::Test {
 protected:
  TrainerActorTest() : cfg_(actor::make_system_config({.scheduler_threads = 2})), system_(*cfg_) {
    std::string text;
    for (int i = 0; text.size() < 30000; ++i) {
      text += "the quick brown fox " + std::to_string(i % 97) + " jumps over the lazy dog\n";
    }
    corpus_ = std::make_shared<const text_corpus>(
        *text_corpus::load(dir_.write("t.txt", text), 0.05, config.ctx));
  }

  trainer_actor_spec spec(int rank, int ranks) const {
    trainer_actor_spec s;
    s.model = config;
    s.options.global_batch = 8;
    s.options.lr = {3e-3f, 2, 10, 0.1f};
    s.options.seed = 11;
    s.rank = rank;
    s.ranks = ranks;
    s.group.name = "dp";
    s.group.timeout = 20s;
    s.corpus = corpus_;
    s.data_seed = 5;
    s.eval_windows = 40;
    return s;
  }

  testing::temp_dir dir_;
  std::unique_ptr<caf::actor_system_config> cfg_;
  caf::actor_system system_;
  metrics::registry metrics_;
  std::shared_ptr<const text_corpus> corpus_;
};

TEST_F(TrainerActorTest, TwoRanksStepTogetherAndMatchTheLogicAtDpOne) {
  // The reference: the same steps by the logic alone, one rank.
  const models::gpt_layout layout(config, models::layer_range::all(config));
  auto reference = *trainer::create(layout, spec(0, 1).options, nullptr);
  auto loader = *data_loader::create(*corpus_, config.ctx, 8, 0, 1, 5);
  std::vector<double> want;
  for (int s = 0; s < 3; ++s)
    want.push_back(reference->step(loader.next())->loss);

  auto store = std::make_shared<comm::memory_store>();
  auto t0 = spawn_trainer(system_, metrics_, "trainer/0", store, spec(0, 2));
  auto t1 = spawn_trainer(system_, metrics_, "trainer/1", store, spec(1, 2));
  caf::scoped_actor self{system_};
  for (int s = 0; s < 3; ++s) {
    auto h0 = self->request(t0, 60s, actor::step_atom_v);
    auto h1 = self->request(t1, 60s, actor::step_atom_v);
    actor::step_report r0, r1;
    h0.receive([&](actor::step_report& r) { r0 = r; },
               [&](caf::error& e) { FAIL() << caf::to_string(e); });
    h1.receive([&](actor::step_report& r) { r1 = r; },
               [&](caf::error& e) { FAIL() << caf::to_string(e); });
    EXPECT_EQ(r0.step, s + 1);
    EXPECT_EQ(r0.loss, r1.loss);
    EXPECT_NEAR(r0.loss, want[s], 1e-4) << "step " << s;
    EXPECT_GE(r0.data_s, 0.0);
    EXPECT_GT(r0.compute_s, 0.0);
  }
  auto e0 = self->request(t0, 60s, actor::eval_atom_v);
  auto e1 = self->request(t1, 60s, actor::eval_atom_v);
  double v0 = 0, v1 = -1;
  e0.receive([&](double v) { v0 = v; }, [&](caf::error& e) { FAIL() << caf::to_string(e); });
  e1.receive([&](double v) { v1 = v; }, [&](caf::error& e) { FAIL() << caf::to_string(e); });
  EXPECT_EQ(v0, v1);
  EXPECT_GT(v0, 0.5);
  EXPECT_LT(v0, 6.0);
  self->send_exit(t0, caf::exit_reason::user_shutdown);
  self->send_exit(t1, caf::exit_reason::user_shutdown);
}

TEST_F(TrainerActorTest, AGroupThatNeverFormsStopsTheTrainerWithTheReason) {
  auto store = std::make_shared<comm::memory_store>();
  trainer_actor_spec s = spec(0, 2);  // rank 1 never comes
  s.group.timeout = 500ms;
  auto lonely = spawn_trainer(system_, metrics_, "trainer/0", store, s);
  caf::scoped_actor self{system_};
  self->monitor(lonely);
  bool down = false;
  self->receive(
      [&](caf::down_msg& d) {
        down = true;
        const absl::Status why = actor::to_status(d.reason);
        EXPECT_EQ(why.code(), absl::StatusCode::kDeadlineExceeded) << why;
      },
      caf::after(20s) >> [] {});
  EXPECT_TRUE(down);
}

}  // namespace
}  // namespace troupe::actors

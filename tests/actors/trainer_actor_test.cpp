#include "actors/trainer_actor.hpp"

#include <gtest/gtest.h>

#include "runtime/actor/status_bridge.hpp"
#include "runtime/actor/system_config.hpp"
#include "tests/support/temp_dir.hpp"

namespace troupe::actors {
namespace {

using namespace std::chrono_literals;

const models::decoder_config actor_model{256, 32, 2, 32, 2};

class TrainerActorTest : public ::testing::Test {
 protected:
  TrainerActorTest() : cfg_(actor::make_system_config({.scheduler_threads = 2})), system_(*cfg_) {
    std::string text;
    for (int i = 0; text.size() < 30000; ++i) {
      text += "the quick brown fox " + std::to_string(i % 97) + " jumps over the lazy dog\n";
    }
    corpus_ = std::make_shared<const text_corpus>(
        *text_corpus::load(dir_.write("t.txt", text), 0.05, actor_model.ctx));
  }

  void lose_a_rank_mid_step(zero_stage zero, bool replicas);

  trainer_actor_spec spec(int rank, int ranks) const {
    trainer_actor_spec s;
    s.model = actor_model;
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
  const models::decoder_layout layout(actor_model, models::layer_range::all(actor_model));
  auto reference = *trainer::create(layout, spec(0, 1).options, nullptr);
  auto loader = *data_loader::create(*corpus_, actor_model.ctx, 8, 0, 1, 5);
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
  e0.receive([&](actor::eval_report& v) { v0 = v.loss; },
             [&](caf::error& e) { FAIL() << caf::to_string(e); });
  e1.receive([&](actor::eval_report& v) { v1 = v.loss; },
             [&](caf::error& e) { FAIL() << caf::to_string(e); });
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

// Elastic ranks as the driver runs them: three regrouped at generation 1 step twice; then rank 2
// stops answering (as a SIGSTOPped process would: it is simply not asked), so the steps of
// ranks 0 and 1 cannot complete. (abort, 2) reaches them while the steps are in flight (they
// run off the actor's thread) and the steps fail; regrouped as two at generation 2 from
// the committed step, they continue. The losses match one rank training on the same global
// batches, the redone step included.
// With ZeRO-1 and shard_replicas, rank 2's optimizer shard comes back from rank 1's replica.
void TrainerActorTest::lose_a_rank_mid_step(zero_stage zero, bool replicas) {
  const models::decoder_layout layout(actor_model, models::layer_range::all(actor_model));
  auto reference = *trainer::create(layout, spec(0, 1).options, nullptr);
  auto loader = *data_loader::create(*corpus_, actor_model.ctx, 8, 0, 1, 5);
  std::vector<double> want;
  for (int s = 0; s < 4; ++s)
    want.push_back(reference->step(loader.next())->loss);

  auto store = std::make_shared<comm::memory_store>();
  std::vector<actor::trainer_actor> ranks;
  for (int r = 0; r < 3; ++r) {
    trainer_actor_spec s = spec(0, 1);
    s.elastic = s.options.elastic = true;
    s.options.zero = zero;
    s.options.shard_replicas = replicas;
    s.group.timeout = 60s;  // only the abort can end the blocked steps within the test
    ranks.push_back(spawn_trainer(system_, metrics_, "trainer/" + std::to_string(r), store, s));
  }
  caf::scoped_actor self{system_};
  // Regroups are collectives: every member's must be asked before any answers.
  using source = actor::group_change::source;
  const auto regroup_all = [&](uint64_t generation, int world, int64_t cursor) {
    // The first generation starts from the seed, the next from the members of the first.
    const source from = generation == 1 ? source::initial : source::members;
    for (int r = 0; r < world; ++r)
      self->send(
          ranks[r], actor::regroup_atom_v,
          actor::group_change{generation, r, world, from, generation - 1, cursor / 8, cursor, ""});
    for (int r = 0; r < world; ++r) {
      self->receive([&](int64_t steps) { EXPECT_EQ(steps * 8, cursor); },
                    [&](caf::error& e) { FAIL() << caf::to_string(e); },
                    caf::after(60s) >> [] { FAIL() << "a regroup did not answer"; });
    }
  };
  const auto step_all = [&](int world) {
    std::vector<actor::step_report> reports(world);
    for (int r = 0; r < world; ++r)
      self->send(ranks[r], actor::step_atom_v);
    for (int r = 0; r < world; ++r) {
      self->receive([&](actor::step_report& x) { reports[r] = x; },
                    [&](caf::error& e) { FAIL() << caf::to_string(e); },
                    caf::after(60s) >> [] { FAIL() << "a step did not answer"; });
    }
    return reports;
  };
  std::vector<double> losses;
  regroup_all(1, 3, 0);
  {  // every rank evaluates its part of the held-out windows, summed over the group
    for (int r = 0; r < 3; ++r)
      self->send(ranks[r], actor::eval_atom_v);
    for (int r = 0; r < 3; ++r) {
      self->receive([&](actor::eval_report& e) { EXPECT_GT(e.loss, 0.0); },
                    [&](caf::error& e) { FAIL() << caf::to_string(e); },
                    caf::after(60s) >> [] { FAIL() << "an evaluation did not answer"; });
    }
  }
  for (int s = 0; s < 2; ++s) {
    auto reports = step_all(3);
    losses.push_back(reports[0].loss);
    int64_t samples = 0;
    for (const auto& x : reports)
      samples += x.samples;
    EXPECT_EQ(samples, 8);  // shares 3, 3, 2 of every global batch
  }
  // Rank 2 is lost: the others' step waits for it until the abort.
  for (int r = 0; r < 2; ++r)
    self->send(ranks[r], actor::step_atom_v);
  for (int r = 0; r < 2; ++r)
    self->send(ranks[r], actor::abort_atom_v, uint64_t{2});
  for (int r = 0; r < 2; ++r) {
    self->receive([&](actor::step_report&) { FAIL() << "a step without rank 2 completed"; },
                  [&](caf::error& e) {
                    // ABORTED when the allreduce was waiting, FAILED_PRECONDITION when the
                    // abort came while the step was still computing: released either way,
                    // while the step was in flight (it was asked first).
                    const absl::Status why = actor::to_status(e);
                    EXPECT_TRUE(why.code() == absl::StatusCode::kAborted ||
                                why.code() == absl::StatusCode::kFailedPrecondition)
                        << why;
                    EXPECT_NE(why.message().find("generation 2"), std::string::npos) << why;
                  },
                  caf::after(30s) >> [] { FAIL() << "the abort did not release a blocked step"; });
  }
  regroup_all(2, 2, 2 * 8);  // no rank applied the aborted step: it is redone
  for (int s = 0; s < 2; ++s)
    losses.push_back(step_all(2)[0].loss);
  ASSERT_EQ(losses.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_NEAR(losses[i], want[i], 1e-4) << "step " << i;
  for (auto& r : ranks)
    self->send_exit(r, caf::exit_reason::user_shutdown);
}

TEST_F(TrainerActorTest, ElasticRanksAbortAStepInFlightOnALostPeerAndContinueRegrouped) {
  lose_a_rank_mid_step(zero_stage::none, false);
}

TEST_F(TrainerActorTest, ElasticZeroOneRanksRebuildALostShardFromItsReplica) {
  lose_a_rank_mid_step(zero_stage::one, true);
}

// A trainer stopped while its group forms (a member that never comes) ends at once, not after
// the rendezvous timeout: the fixture's actor system, destroyed at the end, waits for it, and a
// wait of the 300 s timeout would run past the test's limit.
TEST_F(TrainerActorTest, ATrainerStoppedWhileItsGroupFormsEndsAtOnce) {
  auto store = std::make_shared<comm::memory_store>();
  trainer_actor_spec s = spec(0, 1);
  s.elastic = true;
  s.group.timeout = 300s;
  auto lonely = spawn_trainer(system_, metrics_, "trainer/0", store, s);
  caf::scoped_actor self{system_};
  self->send(lonely, actor::regroup_atom_v,
             actor::group_change{1, 0, 2, actor::group_change::source::initial, 0, 0, 0, ""});
  self->send(lonely, actor::abort_atom_v, uint64_t{2});  // moot: a newer generation
  self->receive([](int64_t) { FAIL() << "a group of one rank formed"; },
                [](caf::error& e) {
                  EXPECT_EQ(actor::to_status(e).code(), absl::StatusCode::kCancelled)
                      << caf::to_string(e);
                },
                caf::after(30s) >> [] { FAIL() << "the moot rendezvous was not cancelled"; });
  self->send(lonely, actor::regroup_atom_v,
             actor::group_change{3, 0, 2, actor::group_change::source::initial, 0, 0, 0, ""});
  self->send_exit(lonely, caf::exit_reason::user_shutdown);
}

}  // namespace
}  // namespace troupe::actors

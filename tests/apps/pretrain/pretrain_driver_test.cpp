#include "apps/pretrain/pretrain_driver.hpp"

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"

namespace troupe::apps {
namespace {

using namespace std::chrono_literals;
using driver = pretrain_driver;

// A clock the test moves by hand.
struct fake_clock {
  driver::clock::time_point now{};
  std::function<driver::clock::time_point()> fn() {
    return [this] { return now; };
  }
};

template <class T>
bool has(const std::vector<driver::command>& commands) {
  return std::any_of(commands.begin(), commands.end(),
                     [](const driver::command& c) { return std::holds_alternative<T>(c); });
}

template <class T>
const T& get(const std::vector<driver::command>& commands) {
  for (const auto& c : commands) {
    if (const T* x = std::get_if<T>(&c)) return *x;
  }
  throw std::runtime_error("command missing");
}

actor::step_report report(int64_t step, double loss) {
  return {step, loss, 1.0, 1e-3, 0.01, 0.1, 0.02};
}

actor::checkpoint_shard shard(int64_t step, int rank) {
  return {step,  rank, 32 * step, {{absl::StrCat("optimizer-", rank, ".safetensors"), 10, "00"}},
          0.002, 0.05};
}

TEST(PretrainDriver, StepsInLockstepEvaluatesCheckpointsAndFinishes) {
  fake_clock clock;
  driver d(
      {.steps = 4, .ranks = 2, .eval_every = 2, .checkpoint_every = 2, .tokens_per_step = 2048},
      clock.fn());
  auto c = d.start();
  ASSERT_TRUE(has<driver::step_all>(c));
  for (int64_t s = 1; s <= 4; ++s) {
    clock.now += 100ms;
    EXPECT_TRUE(d.on_step(1, report(s, 3.0 - 0.1 * s)).empty()) << "waits for every rank";
    c = d.on_step(0, report(s, 3.0 - 0.1 * s));
    const auto& row = get<driver::metrics_row>(c).row;
    EXPECT_EQ(row["step"], s);
    EXPECT_NEAR(row["tokens_per_s"].get<double>(), 20480.0, 1e-6);
    EXPECT_EQ(row["time_s"]["compute"], 0.1);
    if (s % 2 == 1) {
      EXPECT_TRUE(has<driver::step_all>(c));
      continue;
    }
    ASSERT_TRUE(has<driver::eval_all>(c)) << s;
    EXPECT_TRUE(d.on_eval(0, {.loss = 2.5}).empty());
    c = d.on_eval(1, {.loss = 2.5});
    EXPECT_EQ(get<driver::metrics_row>(c).row["val_loss"], 2.5);
    ASSERT_TRUE(has<driver::checkpoint_all>(c));
    EXPECT_EQ(get<driver::checkpoint_all>(c).step, s);
    if (s < 4) {
      // Training goes on while the writers persist the snapshots.
      EXPECT_TRUE(has<driver::step_all>(c));
    } else {
      EXPECT_FALSE(has<driver::finish>(c)) << "the last checkpoint is not committed yet";
    }
    const std::vector<driver::command> saved = d.on_saved(shard(s, 1));
    EXPECT_TRUE(saved.empty()) << "waits for every rank's shard";
    c = d.on_saved(shard(s, 0));
    const auto& commit = get<driver::commit>(c);
    EXPECT_EQ(commit.step, s);
    EXPECT_EQ(commit.cursor, 32 * s);
    ASSERT_EQ(commit.files.size(), 2u);
    EXPECT_EQ(commit.files[0].name, "optimizer-1.safetensors");
    EXPECT_EQ(get<driver::metrics_row>(c).row["checkpoint"]["stall_s"], 0.002);
  }
  ASSERT_TRUE(has<driver::finish>(c));
  EXPECT_EQ(get<driver::finish>(c).summary["checkpoint_step"], 4);
  const auto& summary = get<driver::finish>(c).summary;
  EXPECT_EQ(summary["steps"], 4);
  EXPECT_NEAR(summary["train_loss"].get<double>(), 2.6, 1e-12);
  EXPECT_EQ(summary["val_loss"], 2.5);
  EXPECT_NEAR(summary["tokens_per_s"].get<double>(), 4 * 2048 / 0.4, 1e-6);
  EXPECT_TRUE(d.done());
}

TEST(PretrainDriver, AResumedRunStartsAfterItsStepsAndAlwaysEvaluatesTheLast) {
  fake_clock clock;
  driver d({.steps = 3, .ranks = 1, .tokens_per_step = 10, .first_step = 2}, clock.fn());
  ASSERT_TRUE(has<driver::step_all>(d.start()));
  auto c = d.on_step(0, report(3, 1.0));
  EXPECT_TRUE(has<driver::eval_all>(c));  // the last step is evaluated even without eval_every
  c = d.on_eval(0, {.loss = 1.5});
  EXPECT_EQ(get<driver::finish>(c).summary["steps"], 3);
}

// A reward model's evaluation (app: reward_model) adds its held-out accuracy and reward gap to
// the metrics row and the summary.
TEST(PretrainDriver, ARewardModelsEvaluationReportsItsAccuracyAndRewardGap) {
  fake_clock clock;
  driver d({.steps = 1, .ranks = 1, .tokens_per_step = 10}, clock.fn());
  d.start();
  auto c = d.on_step(0, report(1, 0.7));
  ASSERT_TRUE(has<driver::eval_all>(c));
  c = d.on_eval(0, {.loss = 0.4, .pairs = {.count = 64, .accuracy = 0.875, .margin = 1.25}});
  const auto& row = get<driver::metrics_row>(c).row;
  EXPECT_EQ(row["val_loss"], 0.4);
  EXPECT_EQ(row["val_accuracy"], 0.875);
  EXPECT_EQ(row["val_reward_gap"], 1.25);
  const auto& summary = get<driver::finish>(c).summary;
  EXPECT_EQ(summary["val_accuracy"], 0.875);
  EXPECT_EQ(summary["val_reward_gap"], 1.25);
}

// DPO (app: dpo) reports its pairs' figures by TRL's names: every step's, and the held-out ones
// with val_ before them.
TEST(PretrainDriver, DpoReportsTrlsFiguresInEachStepAndEvaluation) {
  fake_clock clock;
  driver d({.steps = 1, .ranks = 1, .tokens_per_step = 10, .dpo = true}, clock.fn());
  d.start();
  actor::step_report r = report(1, 0.6);
  r.pairs = {.count = 8,
             .accuracy = 0.75,
             .margin = 0.5,
             .reward_chosen = 0.25,
             .reward_rejected = -0.25,
             .logp_chosen = -3,
             .logp_rejected = -7};
  auto c = d.on_step(0, r);
  const auto& step_row = get<driver::metrics_row>(c).row;
  EXPECT_EQ(step_row["rewards/chosen"], 0.25);
  EXPECT_EQ(step_row["rewards/rejected"], -0.25);
  EXPECT_EQ(step_row["rewards/accuracies"], 0.75);
  EXPECT_EQ(step_row["rewards/margins"], 0.5);
  EXPECT_EQ(step_row["logps/chosen"], -3);
  EXPECT_EQ(step_row["logps/rejected"], -7);
  ASSERT_TRUE(has<driver::eval_all>(c));
  c = d.on_eval(0, {.loss = 0.5, .pairs = {.count = 32, .accuracy = 0.625, .margin = 0.125}});
  const auto& row = get<driver::metrics_row>(c).row;
  EXPECT_EQ(row["val_rewards/accuracies"], 0.625);
  EXPECT_EQ(row["val_rewards/margins"], 0.125);
  EXPECT_FALSE(row.contains("val_accuracy"));
  EXPECT_EQ(get<driver::finish>(c).summary["val_rewards/accuracies"], 0.625);
}

TEST(PretrainDriver, StopAfterEndsEarlyWithAnEvaluationAndACheckpoint) {
  fake_clock clock;
  driver d({.steps = 10, .ranks = 1, .checkpoint_every = 4, .stop_after = 2}, clock.fn());
  d.start();
  auto c = d.on_step(0, report(1, 2.0));
  EXPECT_TRUE(has<driver::step_all>(c));
  c = d.on_step(0, report(2, 1.9));
  ASSERT_TRUE(has<driver::eval_all>(c));
  c = d.on_eval(0, {.loss = 1.8});
  EXPECT_EQ(get<driver::checkpoint_all>(c).step, 2);
  c = d.on_saved(shard(2, 0));
  EXPECT_EQ(get<driver::finish>(c).summary["steps"], 2);
}

// Ctrl-C: the step in flight is the last one; it is evaluated and checkpointed (off schedule),
// and the run finishes once that checkpoint is committed.
TEST(PretrainDriver, AStopEndsAfterTheStepInFlightWithACheckpoint) {
  fake_clock clock;
  driver d({.steps = 10, .ranks = 2, .checkpoint_every = 4}, clock.fn());
  d.start();
  d.on_step(0, report(1, 2.0));
  EXPECT_TRUE(has<driver::step_all>(d.on_step(1, report(1, 2.0))));
  EXPECT_TRUE(d.stop().empty()) << "step 2 is in flight";
  EXPECT_TRUE(d.stopped());
  EXPECT_TRUE(d.stop().empty()) << "a second stop changes nothing";
  d.on_step(0, report(2, 1.9));
  auto c = d.on_step(1, report(2, 1.9));
  ASSERT_TRUE(has<driver::eval_all>(c));
  EXPECT_FALSE(has<driver::step_all>(c));
  d.on_eval(0, {.loss = 1.8});
  c = d.on_eval(1, {.loss = 1.8});
  EXPECT_EQ(get<driver::checkpoint_all>(c).step, 2);
  EXPECT_FALSE(has<driver::finish>(c)) << "not before the checkpoint is committed";
  d.on_saved(shard(2, 1));
  c = d.on_saved(shard(2, 0));
  EXPECT_EQ(get<driver::commit>(c).step, 2);
  EXPECT_EQ(get<driver::finish>(c).summary["steps"], 2);
  EXPECT_EQ(d.committed(), 2);

  // A stop during the last step changes nothing: the run ends there anyway.
  driver last({.steps = 1, .ranks = 1}, clock.fn());
  last.start();
  EXPECT_TRUE(last.stop().empty());
  EXPECT_FALSE(last.stopped());
}

TEST(PretrainDriver, ARankErrorFailsTheJobOnceNamingRankAndStep) {
  fake_clock clock;
  driver d({.steps = 5, .ranks = 2}, clock.fn());
  d.start();
  auto c = d.on_error(1, absl::DeadlineExceededError("allreduce timed out"));
  const auto& f = get<driver::fail>(c);
  EXPECT_EQ(f.why.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_NE(f.why.message().find("trainer rank 1 failed at step 1"), std::string::npos);
  EXPECT_TRUE(d.on_error(0, absl::InternalError("x")).empty());
  EXPECT_TRUE(d.on_step(0, report(1, 1.0)).empty());
}

// A rank that cannot save its part of a checkpoint fails the job, naming the rank and the
// checkpoint; the steps go on meanwhile, and their answers are not mistaken for it.
TEST(PretrainDriver, ACheckpointARankCannotSaveFailsTheJobNamingRankAndStep) {
  fake_clock clock;
  driver d({.steps = 4, .ranks = 2, .checkpoint_every = 1}, clock.fn());
  d.start();
  d.on_step(0, report(1, 1.0));
  auto c = d.on_step(1, report(1, 1.0));
  EXPECT_EQ(get<driver::checkpoint_all>(c).members,
            (std::vector<std::string>{"trainer/0", "trainer/1"}));
  ASSERT_TRUE(has<driver::step_all>(c));
  EXPECT_TRUE(d.on_save_failed(2, 1, absl::InternalError("x")).empty()) << "not asked";
  c = d.on_save_failed(1, 1, absl::ResourceExhaustedError("no space left on device"));
  const auto& f = get<driver::fail>(c);
  EXPECT_EQ(f.why.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(f.why.message(), "trainer rank 1 could not save checkpoint 1: no space left on device");
}

// A fixed grid cannot go on without a rank: a lost one fails the job at once, named with its
// place in the dp x pp grid; so does a rank's error.
TEST(PretrainDriver, AFixedGridFailsOnALostRankNamingItsPlace) {
  fake_clock clock;
  driver d({.steps = 5, .ranks = 4, .stages = 2}, clock.fn());
  d.start();
  EXPECT_TRUE(d.on_lost("trainer/9", "not a member").empty());
  auto c = d.on_lost("trainer/3", "worker w2 died");
  const auto& f = get<driver::fail>(c);
  EXPECT_EQ(f.why.code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(f.why.message().find("trainer/3 (replica 1, stage 1) was lost: worker w2 died; a "
                                 "fixed dp x pp x tp grid cannot go on without it"),
            std::string::npos)
      << f.why.message();
  EXPECT_TRUE(d.on_error(0, absl::InternalError("peer gone")).empty()) << "failed once";

  driver e({.steps = 5, .ranks = 4, .stages = 2}, clock.fn());
  e.start();
  c = e.on_error(2, absl::UnavailableError("connection closed"));
  EXPECT_NE(get<driver::fail>(c).why.message().find(
                "trainer rank 2 (replica 1, stage 0) failed at step 1: connection closed"),
            std::string::npos);
}

TEST(PretrainDriver, CheckpointsAnsweredOutOfOrderCommitEachOnce) {
  fake_clock clock;
  driver d({.steps = 2, .ranks = 1, .checkpoint_every = 1}, clock.fn());
  d.start();
  auto c = d.on_step(0, report(1, 2.0));
  EXPECT_EQ(get<driver::checkpoint_all>(c).step, 1);
  c = d.on_step(0, report(2, 1.9));
  c = d.on_eval(0, {.loss = 1.8});
  EXPECT_EQ(get<driver::checkpoint_all>(c).step, 2);
  EXPECT_FALSE(has<driver::finish>(c));
  c = d.on_saved(shard(2, 0));
  EXPECT_EQ(get<driver::commit>(c).step, 2);
  EXPECT_FALSE(has<driver::finish>(c)) << "step 1 is still being written";
  EXPECT_TRUE(d.on_saved(shard(2, 0)).empty()) << "a duplicate answer commits nothing";
  c = d.on_saved(shard(1, 0));
  EXPECT_EQ(get<driver::commit>(c).step, 1);
  EXPECT_EQ(get<driver::finish>(c).summary["checkpoint_step"], 2);
}

// -- elastic ---------------------------------------------------------------------------------

// Rank r's report of `step` over `world` ranks of a global batch of 8 (even_split shares).
actor::step_report share(int64_t step, int r, int world, double loss = 2.0) {
  actor::step_report x = report(step, loss);
  const int64_t base = 8 / world, extra = 8 % world;
  x.first_sample = (step - 1) * 8 + r * base + std::min<int64_t>(r, extra);
  x.samples = base + (r < extra ? 1 : 0);
  return x;
}

using source = actor::group_change::source;

pretrain_schedule elastic_schedule(int steps, int min, int max) {
  return {.steps = steps,
          .batch = 8,
          .elastic = elastic_world{min, max, 5s, 2s},
          .tokens_per_step = 8 * 16};
}

// Answers every member's regroup of the driver's current generation with `steps`.
std::vector<driver::command> regrouped(driver& d, int64_t steps) {
  std::vector<driver::command> c;
  for (size_t r = 0; r < d.members().size(); ++r)
    c = d.on_regrouped(static_cast<int>(r), steps, d.generation());
  return c;
}

std::vector<driver::command> stepped(driver& d, int64_t step) {
  std::vector<driver::command> c;
  const int world = static_cast<int>(d.members().size());
  for (int r = 0; r < world; ++r)
    c = d.on_step(r, share(step, r, world), d.generation());
  return c;
}

bool noted(const std::vector<driver::command>& commands, const std::string& kind) {
  return std::any_of(commands.begin(), commands.end(), [&](const driver::command& c) {
    const auto* n = std::get_if<driver::note>(&c);
    return n != nullptr && n->kind == kind;
  });
}

TEST(ElasticPretrainDriver, FormsTheGroupFirstAndRecordsTheWorldAndTheSamples) {
  fake_clock clock;
  driver d(elastic_schedule(3, 2, 4), clock.fn(), {"trainer/0", "trainer/1", "trainer/2"});
  auto c = d.start();
  const auto& g = get<driver::regroup_all>(c);
  EXPECT_EQ(g.generation, 1u);
  EXPECT_EQ(g.from, source::initial);  // a fresh run: every rank from the seed
  EXPECT_EQ(g.steps, 0);
  EXPECT_EQ(g.cursor, 0);
  EXPECT_FALSE(has<driver::step_all>(c));
  c = regrouped(d, 0);
  EXPECT_TRUE(noted(c, "group_formed"));
  ASSERT_TRUE(has<driver::step_all>(c));
  c = stepped(d, 1);
  const auto& row = get<driver::metrics_row>(c).row;
  EXPECT_EQ(row["world_size"], 3);
  EXPECT_EQ(row["first_sample"], 0);
  EXPECT_TRUE(has<driver::step_all>(c));
}

// Rank 2 is lost while the others are in step 2: they are told to abort, answer with errors,
// and the two regroup at generation 2 from the committed step 1 and redo step 2 with its samples.
TEST(ElasticPretrainDriver, ALostRankAbortsTheStepAndTheSurvivorsRedoIt) {
  fake_clock clock;
  driver d(elastic_schedule(4, 2, 4), clock.fn(), {"trainer/0", "trainer/1", "trainer/2"});
  d.start();
  regrouped(d, 0);
  stepped(d, 1);
  auto c = d.on_lost("trainer/2", "its worker w3 stopped answering heartbeats");
  EXPECT_TRUE(noted(c, "rank_lost"));
  EXPECT_EQ(get<driver::abort_all>(c).generation, 2u);
  EXPECT_EQ(d.members(), (std::vector<std::string>{"trainer/0", "trainer/1"}));
  EXPECT_TRUE(d.on_error(0, absl::AbortedError("aborted"), 1).empty());
  clock.now += 300ms;
  c = d.on_error(1, absl::AbortedError("aborted"), 1);
  EXPECT_TRUE(noted(c, "step_redone"));
  const auto& g = get<driver::regroup_all>(c);
  EXPECT_EQ(g.generation, 2u);
  EXPECT_EQ(g.from, source::members);
  EXPECT_EQ(g.basis, 1u);  // the generation whose trainers hold the state
  EXPECT_EQ(g.steps, 1);
  EXPECT_EQ(g.cursor, 8);  // step 2's samples again
  EXPECT_TRUE(d.on_step(0, share(2, 0, 3), 1).empty()) << "a stale answer is ignored";
  c = regrouped(d, 1);
  EXPECT_TRUE(noted(c, "group_rebuilt"));
  EXPECT_NEAR(get<driver::recovered>(c).seconds, 0.3, 1e-9);  // from the loss to whole again
  ASSERT_TRUE(has<driver::step_all>(c));
  c = stepped(d, 2);
  EXPECT_EQ(get<driver::metrics_row>(c).row["world_size"], 2);
  EXPECT_EQ(get<driver::metrics_row>(c).row["step"], 2);
}

// A step that completed on a survivor before the loss holds every rank's gradients: it is
// committed, and the survivor it did not complete on takes the state of step 2 from the other.
TEST(ElasticPretrainDriver, AStepCompletedOnASurvivorIsCommittedFromIt) {
  fake_clock clock;
  driver d(elastic_schedule(4, 2, 4), clock.fn(), {"trainer/0", "trainer/1", "trainer/2"});
  d.start();
  regrouped(d, 0);
  stepped(d, 1);
  d.on_error(0, absl::UnavailableError("peer reset"), 1);
  d.on_step(1, share(2, 1, 3), 1);
  auto c = d.on_lost("trainer/2", "killed");
  EXPECT_FALSE(has<driver::abort_all>(c)) << "every survivor has answered";
  EXPECT_FALSE(noted(c, "step_redone"));
  const auto& g = get<driver::regroup_all>(c);
  EXPECT_EQ(g.steps, 2);
  EXPECT_EQ(g.cursor, 16);
  c = regrouped(d, 2);
  EXPECT_EQ(get<driver::metrics_row>(c).row["step"], 2);
  EXPECT_TRUE(has<driver::step_all>(c));
}

TEST(ElasticPretrainDriver, AFailureNoLostRankExplainsFailsTheJobAfterTheLossWait) {
  fake_clock clock;
  driver d(elastic_schedule(4, 1, 4), clock.fn(), {"trainer/0", "trainer/1"});
  d.start();
  regrouped(d, 0);
  d.on_step(0, share(1, 0, 2), 1);
  auto c = d.on_error(1, absl::InternalError("out of memory"), 1);
  EXPECT_EQ(get<driver::wake_after>(c).after, 2s);
  clock.now += 1s;
  EXPECT_TRUE(d.on_timer().empty());
  clock.now += 1s;
  c = d.on_timer();
  EXPECT_NE(
      get<driver::fail>(c).why.message().find("trainer rank 1 failed at step 1: out of memory"),
      std::string::npos);
}

// Below min the job waits for a worker; one that joins in time is admitted and gets the state;
// without one the job fails saying what to do.
TEST(ElasticPretrainDriver, BelowMinItWaitsForAJoinerThenFails) {
  fake_clock clock;
  driver d(elastic_schedule(4, 2, 4), clock.fn(), {"trainer/0", "trainer/1"});
  d.start();
  regrouped(d, 0);
  auto c = d.on_lost("trainer/1", "killed");
  ASSERT_TRUE(has<driver::abort_all>(c));
  c = d.on_error(0, absl::AbortedError("aborted"), 1);
  EXPECT_TRUE(noted(c, "waiting_for_workers"));
  EXPECT_EQ(get<driver::wake_after>(c).after, 5s);
  c = d.on_joined("trainer/2");
  EXPECT_TRUE(noted(c, "rank_joined"));
  EXPECT_EQ(d.members(), (std::vector<std::string>{"trainer/0", "trainer/2"}));
  EXPECT_EQ(get<driver::regroup_all>(c).from, source::members);
  c = regrouped(d, 0);
  EXPECT_TRUE(has<driver::step_all>(c));

  driver lonely(elastic_schedule(4, 2, 4), clock.fn(), {"trainer/0"});
  c = lonely.start();
  EXPECT_TRUE(noted(c, "waiting_for_workers"));
  clock.now += 5s;
  c = lonely.on_timer();
  const std::string why(get<driver::fail>(c).why.message());
  EXPECT_NE(why.find("below roles.trainer.elastic.min 2"), std::string::npos) << why;
  EXPECT_NE(why.find("troupe worker --join"), std::string::npos) << why;
}

// A second member is lost while the survivors regroup without the first: the regroup in flight
// is told to give up (its rendezvous would wait for the lost member), its answers are errors,
// and the one survivor left forms generation 3 and redoes the step.
TEST(ElasticPretrainDriver, ASecondLossDuringARegroupFormsTheNextGeneration) {
  fake_clock clock;
  driver d(elastic_schedule(4, 1, 4), clock.fn(), {"trainer/0", "trainer/1", "trainer/2"});
  d.start();
  regrouped(d, 0);
  stepped(d, 1);
  d.on_lost("trainer/2", "killed");
  d.on_error(0, absl::AbortedError("aborted"), 1);
  auto c = d.on_error(1, absl::AbortedError("aborted"), 1);
  ASSERT_EQ(get<driver::regroup_all>(c).generation, 2u);
  c = d.on_lost("trainer/1", "killed too");
  EXPECT_EQ(get<driver::abort_all>(c).generation, 3u) << "the forming generation 2 is moot";
  EXPECT_FALSE(has<driver::regroup_all>(c)) << "trainer/0 still forms generation 2";
  c = d.on_regrouped(0, absl::CancelledError("moot"), 2);
  const auto& g = get<driver::regroup_all>(c);
  EXPECT_EQ(g.generation, 3u);
  EXPECT_EQ(g.cursor, 8);
  EXPECT_EQ(d.members(), std::vector<std::string>{"trainer/0"});
  c = regrouped(d, 1);
  ASSERT_TRUE(has<driver::step_all>(c));
  c = stepped(d, 2);
  EXPECT_EQ(get<driver::metrics_row>(c).row["world_size"], 1);
}

// Ctrl-C while the job waits for workers ends it at once, after the committed step.
TEST(ElasticPretrainDriver, AStopWhileWaitingForWorkersEndsTheRun) {
  fake_clock clock;
  driver d(elastic_schedule(10, 2, 4), clock.fn(), {"trainer/0", "trainer/1"});
  d.start();
  regrouped(d, 0);
  stepped(d, 1);
  d.on_lost("trainer/1", "killed");
  auto c = d.on_error(0, absl::AbortedError("aborted"), 1);
  ASSERT_TRUE(noted(c, "waiting_for_workers"));
  c = d.stop();
  ASSERT_TRUE(has<driver::finish>(c));
  EXPECT_EQ(get<driver::finish>(c).summary["steps"], 1);
  EXPECT_TRUE(d.stopped());
}

TEST(ElasticPretrainDriver, AJoinerIsAdmittedAtTheNextStepBoundaryUpToMax) {
  fake_clock clock;
  driver d(elastic_schedule(4, 1, 3), clock.fn(), {"trainer/0", "trainer/1"});
  d.start();
  regrouped(d, 0);
  EXPECT_TRUE(noted(d.on_joined("trainer/2"), "rank_joining")) << "step 1 is in flight";
  EXPECT_TRUE(noted(d.on_joined("trainer/3"), "rank_not_admitted"));
  auto c = stepped(d, 1);
  EXPECT_EQ(get<driver::metrics_row>(c).row["world_size"], 2);
  EXPECT_TRUE(noted(c, "rank_joined"));
  EXPECT_EQ(get<driver::regroup_all>(c).generation, 2u);
  EXPECT_EQ(get<driver::regroup_all>(c).cursor, 8);
  c = regrouped(d, 1);
  ASSERT_TRUE(has<driver::step_all>(c));
  EXPECT_FALSE(has<driver::recovered>(c)) << "a join is no recovery";
  c = stepped(d, 2);
  EXPECT_EQ(get<driver::metrics_row>(c).row["world_size"], 3);
}

// A joiner admitted at the boundary of a step that is checkpointed has none of that step's state:
// the ranks that took the step save it, and it commits with their shards. A rank whose process is
// gone fails no checkpoint (its loss abandons it); any other failure to save fails the job.
TEST(ElasticPretrainDriver, TheRanksThatTookACheckpointedStepSaveItNotAJoiner) {
  fake_clock clock;
  auto schedule = elastic_schedule(4, 1, 3);
  schedule.checkpoint_every = 1;
  driver d(schedule, clock.fn(), {"trainer/0", "trainer/1"});
  d.start();
  regrouped(d, 0);
  d.on_joined("trainer/2");
  auto c = stepped(d, 1);
  EXPECT_TRUE(noted(c, "rank_joined"));
  EXPECT_EQ(d.members().size(), 3u);
  EXPECT_EQ(get<driver::checkpoint_all>(c).step, 1);
  EXPECT_EQ(get<driver::checkpoint_all>(c).members,
            (std::vector<std::string>{"trainer/0", "trainer/1"}));
  c = regrouped(d, 1);
  ASSERT_TRUE(has<driver::step_all>(c));
  EXPECT_TRUE(d.on_saved(shard(1, 1)).empty());
  c = d.on_saved(shard(1, 0));
  EXPECT_EQ(get<driver::commit>(c).step, 1);
  c = stepped(d, 2);
  EXPECT_EQ(get<driver::checkpoint_all>(c).members.size(), 3u);
  EXPECT_TRUE(d.on_save_failed(2, 2, absl::UnavailableError("trainer/2's node is gone")).empty());
  c = d.on_save_failed(2, 1, absl::InternalError("disk error"));
  EXPECT_EQ(get<driver::fail>(c).why.message(),
            "trainer rank 1 could not save checkpoint 2: disk error");
}

TEST(ElasticPretrainDriver, SamplesThatDoNotTileTheStepFailTheJob) {
  fake_clock clock;
  driver d(elastic_schedule(4, 1, 3), clock.fn(), {"trainer/0", "trainer/1"});
  d.start();
  regrouped(d, 0);
  d.on_step(0, share(1, 0, 2), 1);
  auto c = d.on_step(1, share(1, 0, 2), 1);  // the same samples twice
  const auto& f = get<driver::fail>(c);
  EXPECT_EQ(f.why.code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(f.why.message().find("instead of exactly [0, 8)"), std::string::npos) << f.why;
}

// -- elastic ZeRO-1/2: each rank holds its shard of the optimizer state -------------------------

pretrain_schedule sharded_schedule(int steps, bool replicas, int checkpoint_every = 0) {
  pretrain_schedule s = elastic_schedule(steps, 1, 4);
  s.elastic->sharded = true;
  s.elastic->replicas = replicas;
  s.checkpoint_every = checkpoint_every;
  return s;
}

// A ZeRO step stands only when it completed on every survivor: here it completed on rank 1 but
// not on rank 0, so it is redone, rank 1 rolling it back, and the lost rank's shard comes from
// the replica rank 1 kept.
TEST(ElasticPretrainDriver, AZeroStepCompletedOnSomeSurvivorsOnlyIsRedone) {
  fake_clock clock;
  driver d(sharded_schedule(4, true), clock.fn(), {"trainer/0", "trainer/1", "trainer/2"});
  d.start();
  regrouped(d, 0);
  stepped(d, 1);
  d.on_error(0, absl::UnavailableError("peer reset"), 1);
  d.on_step(1, share(2, 1, 3), 1);
  auto c = d.on_lost("trainer/2", "killed");
  EXPECT_TRUE(noted(c, "step_redone"));
  EXPECT_FALSE(noted(c, "rolled_back"));
  const auto& g = get<driver::regroup_all>(c);
  EXPECT_EQ(g.from, source::members);
  EXPECT_EQ(g.steps, 1);
  EXPECT_EQ(g.cursor, 8);
  c = regrouped(d, 1);
  EXPECT_TRUE(has<driver::step_all>(c));

  // Completed on every survivor: committed, as with ZeRO 0.
  driver whole(sharded_schedule(4, true), clock.fn(), {"trainer/0", "trainer/1", "trainer/2"});
  whole.start();
  regrouped(whole, 0);
  whole.on_step(0, share(1, 0, 3), 1);
  whole.on_step(1, share(1, 1, 3), 1);
  c = whole.on_lost("trainer/2", "killed");
  EXPECT_EQ(get<driver::regroup_all>(c).steps, 1);
  EXPECT_FALSE(noted(c, "step_redone"));
}

// Without replicas a lost rank's shard is gone: the group goes back to the last checkpoint in
// place (no process restarted) and redoes the steps since; before any checkpoint, to the seed.
TEST(ElasticPretrainDriver, ALostShardWithoutAReplicaRollsBackToTheLastCheckpoint) {
  fake_clock clock;
  driver d(sharded_schedule(6, false, 2), clock.fn(), {"trainer/0", "trainer/1", "trainer/2"});
  d.start();
  regrouped(d, 0);
  stepped(d, 1);
  auto c = stepped(d, 2);
  ASSERT_EQ(get<driver::checkpoint_all>(c).step, 2);
  for (int r = 0; r < 3; ++r)
    c = d.on_saved(shard(2, r));
  ASSERT_EQ(get<driver::commit>(c).step, 2);
  stepped(d, 3);
  c = d.on_lost("trainer/1", "killed");  // between steps: nobody to abort
  d.on_error(0, absl::AbortedError("aborted"), 1);
  c = d.on_error(2, absl::AbortedError("aborted"), 1);
  EXPECT_TRUE(noted(c, "rolled_back"));
  const auto& g = get<driver::regroup_all>(c);
  EXPECT_EQ(g.from, source::checkpoint);
  EXPECT_EQ(g.steps, 2);
  EXPECT_EQ(g.cursor, 16);
  EXPECT_EQ(d.step(), 2);
  c = regrouped(d, 2);
  ASSERT_TRUE(has<driver::step_all>(c));
  c = stepped(d, 3);
  EXPECT_EQ(get<driver::metrics_row>(c).row["step"], 3);

  driver early(sharded_schedule(6, false), clock.fn(), {"trainer/0", "trainer/1"});
  early.start();
  regrouped(early, 0);
  stepped(early, 1);
  c = early.on_lost("trainer/0", "killed");
  c = early.on_error(1, absl::AbortedError("aborted"), 1);
  EXPECT_EQ(get<driver::regroup_all>(c).from, source::initial);
  EXPECT_EQ(get<driver::regroup_all>(c).steps, 0);
}

// With replicas, two lost neighbours take a shard and its replica with them; two that are not
// neighbours leave every shard somewhere.
TEST(ElasticPretrainDriver, ReplicasCoverLossesThatAreNotNeighbours) {
  fake_clock clock;
  // Four ranks in step 2 lose `lost`; the survivors' aborted steps answer; the regroup's source.
  const auto regroup_after_losing = [&](std::vector<int> lost) {
    driver d(sharded_schedule(6, true), clock.fn(),
             {"trainer/0", "trainer/1", "trainer/2", "trainer/3"});
    d.start();
    regrouped(d, 0);
    stepped(d, 1);
    for (int r : lost)
      d.on_lost("trainer/" + std::to_string(r), "killed");
    std::vector<driver::command> c;
    for (int r = 0; r < 4; ++r) {
      if (std::find(lost.begin(), lost.end(), r) == lost.end()) {
        c = d.on_error(r, absl::AbortedError("aborted"), 1);
      }
    }
    return c;
  };
  EXPECT_EQ(get<driver::regroup_all>(regroup_after_losing({1, 3})).from, source::members);
  const auto c = regroup_after_losing({1, 2});
  EXPECT_TRUE(noted(c, "rolled_back"));
  EXPECT_EQ(get<driver::regroup_all>(c).from, source::initial);
}

// A resumed elastic job's first generation restores the checkpoint it resumed from.
TEST(ElasticPretrainDriver, AResumedJobsFirstGenerationRestoresItsCheckpoint) {
  fake_clock clock;
  pretrain_schedule s = sharded_schedule(8, true);
  s.first_step = 5;
  driver d(s, clock.fn(), {"trainer/0", "trainer/1"});
  auto c = d.start();
  const auto& g = get<driver::regroup_all>(c);
  EXPECT_EQ(g.from, source::checkpoint);
  EXPECT_EQ(g.steps, 5);
  EXPECT_EQ(g.cursor, 40);
  EXPECT_FALSE(noted(c, "rolled_back"));
}

}  // namespace
}  // namespace troupe::apps

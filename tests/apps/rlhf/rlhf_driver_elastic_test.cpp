// The RLHF controller's elastic policy group (roles.policy.elastic), without CAF: the first
// generation formed before the run, a rank lost mid-update (the optimizer step redone, or
// committed where a survivor completed it), a lost weight sender, a joiner admitted at the next
// RL step, and the waits below min and for a loss that explains a failure.

#include <utility>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "apps/rlhf/rlhf_driver.hpp"

namespace troupe::apps::rlhf {
namespace {

using driver = rlhf_driver;
using source = actor::group_change::source;

class RlhfElasticDriver : public ::testing::Test {
 protected:
  // Two prompts x 3 responses a step, mini-batches of one prompt (three responses), two epochs:
  // four optimizer steps a step; the policy elastic within [min, 3], starting with two members.
  void SetUp() override { make(1); }

  void make(int min, int save_freq = 0) {
    rlhf_schedule s;
    s.save_freq = save_freq;
    s.steps = 3;
    s.prompts = 2;
    s.n = 3;
    s.mini_batch_prompts = 1;
    s.ppo_epochs = 2;
    s.max_len = 32;
    s.response_length = 4;
    s.policy_elastic = rl_elastic{min, 3};
    s.worker_wait = std::chrono::seconds(30);
    s.loss_wait = std::chrono::seconds(5);
    d_ = std::make_unique<driver>(
        s, rl_algorithm{}, kl_controller::fixed(0.0),
        rl_task{[](uint64_t, int64_t i) { return absl::StrCat("p", i, "="); }},
        [this] { return now_; });
    d_->set_members(false, {"policy/0", "policy/1"});
    d_->set_sync_participants(2);
  }

  template <class T>
  static std::vector<T> all_of(const std::vector<driver::command>& commands) {
    std::vector<T> out;
    for (const auto& c : commands) {
      if (const T* x = std::get_if<T>(&c)) out.push_back(*x);
    }
    return out;
  }
  static std::vector<std::string> notes(const std::vector<driver::command>& commands) {
    std::vector<std::string> out;
    for (const auto& n : all_of<driver::note>(commands))
      out.push_back(n.kind);
    return out;
  }

  // Every member answers the regroup of `generation` from optimizer step `steps`.
  std::vector<driver::command> regrouped(uint64_t generation, int64_t steps) {
    std::vector<driver::command> out;
    for (size_t r = 0; r < d_->members(false).size(); ++r) {
      out = d_->on_regrouped(false, static_cast<int>(r), steps, generation);
    }
    return out;
  }

  // From the start to the first optimizer step asked: the first generation formed, the sync,
  // the generation, the score and the log-probs.
  std::vector<driver::update_all> to_first_update() {
    const auto first = d_->start();
    const auto regroups = all_of<driver::regroup_all>(first);
    EXPECT_EQ(regroups.size(), 1u);
    EXPECT_EQ(regroups[0].generation, 1u);
    EXPECT_EQ(regroups[0].from, source::initial);
    const auto formed = regrouped(1, 0);
    EXPECT_EQ(notes(formed), std::vector<std::string>{"group_formed"});
    EXPECT_EQ(all_of<driver::sync_all>(formed).size(), 1u) << "the run starts once it is formed";
    return through_sync(requests_in(formed), 1);
  }

  // The step's requests: those that follow its sync in `commands`, or that went out with the
  // last step's updates.
  std::vector<actor::generation_request> requests_in(const std::vector<driver::command>& commands) {
    const auto syncs = all_of<driver::sync_all>(commands);
    EXPECT_EQ(syncs.size(), 1u);
    if (syncs.empty()) return {};
    if (!syncs[0].requests_follow) return std::exchange(sent_ahead_, {});
    const auto generate = all_of<driver::generate_all>(d_->requests_ahead());
    EXPECT_EQ(generate.size(), 1u);
    return generate.empty() ? std::vector<actor::generation_request>{} : generate[0].requests;
  }

  // The sync of `version` answered, then the generation of `requests`, scores and log-probs of
  // its step.
  std::vector<driver::update_all> through_sync(
      const std::vector<actor::generation_request>& requests, uint64_t version) {
    d_->on_synced(d_->members(false).front(), {version, "abc"}, true);
    EXPECT_TRUE(d_->on_synced("rollout/0", {version, "abc"}, false).empty());
    std::vector<actor::generation_event> outputs;
    for (const auto& r : requests) {
      actor::generation_event e;
      e.id = r.id;
      e.finished = true;
      e.reason = actor::finish_reason::length;
      e.tokens = {'7', '7'};
      e.logprobs = {-1.0f, -1.0f};
      e.weights_version = version;
      outputs.push_back(e);
    }
    d_->on_generated(outputs);
    const auto asked = d_->on_scored({1.0, 0.0, 0.5, 0.5, 0.25, 0.75});
    const auto asks = all_of<driver::log_probs_all>(asked);
    const int ctx = asks.at(0).reference.ctx;
    const uint64_t generation = d_->generation(false);
    EXPECT_TRUE(d_->on_log_probs(true, 0, std::vector<float>(6 * ctx, -1.0f)).empty());
    std::vector<driver::command> next;
    const int ranks = static_cast<int>(d_->members(false).size());
    for (int r = 0; r < ranks; ++r) {
      const int rows = 6 / ranks + (r < 6 % ranks ? 1 : 0);
      next = d_->on_log_probs(false, r, std::vector<float>(rows * ctx, -1.0f), generation);
    }
    if (const auto ahead = all_of<driver::generate_all>(next); !ahead.empty()) {
      sent_ahead_ = ahead[0].requests;  // the next step's
    }
    return all_of<driver::update_all>(next);
  }

  driver::clock::time_point now_{};
  std::vector<actor::generation_request> sent_ahead_;
  std::unique_ptr<driver> d_;
};

TEST_F(RlhfElasticDriver, ARankLostMidUpdateIsReleasedAndTheStepIsRedoneByTheSurvivor) {
  const auto updates = to_first_update();
  ASSERT_EQ(updates.size(), 1u);
  ASSERT_EQ(updates[0].parts.size(), 2u);
  const auto lost = d_->on_lost("policy/1", "its worker died");
  EXPECT_EQ(notes(lost), std::vector<std::string>{"rank_lost"});
  const auto aborts = all_of<driver::abort_all>(lost);
  ASSERT_EQ(aborts.size(), 1u) << "policy/0 is blocked in the gradient sum with it";
  EXPECT_EQ(aborts[0].generation, 2u);
  const auto recovered =
      d_->on_rank_error(false, 0, absl::UnavailableError("peer closed the connection"), 1);
  EXPECT_EQ(notes(recovered), std::vector<std::string>{"step_redone"});
  const auto regroups = all_of<driver::regroup_all>(recovered);
  ASSERT_EQ(regroups.size(), 1u);
  EXPECT_EQ(regroups[0].generation, 2u);
  EXPECT_EQ(regroups[0].from, source::members);
  EXPECT_EQ(regroups[0].basis, 1u);
  EXPECT_EQ(regroups[0].steps, 0) << "no survivor applied the step";
  EXPECT_EQ(d_->members(false), std::vector<std::string>{"policy/0"});
  const auto again = regrouped(2, 0);
  EXPECT_EQ(notes(again), std::vector<std::string>{"group_rebuilt"});
  const auto redo = all_of<driver::update_all>(again);
  ASSERT_EQ(redo.size(), 1u);
  ASSERT_EQ(redo[0].parts.size(), 1u) << "the mini-batch on the one survivor";
  EXPECT_EQ(redo[0].parts[0].batch, 3);
  EXPECT_EQ(redo[0].parts[0].tokens[0], updates[0].parts[0].tokens[0]) << "the same mini-batch";
  // An answer of the older generation is not one of this request.
  EXPECT_TRUE(d_->on_updated(0, {}, false, 1).empty());
  EXPECT_EQ(all_of<driver::update_all>(d_->on_updated(0, {}, false, 2)).size(), 1u)
      << "the next optimizer step";
}

TEST_F(RlhfElasticDriver, AStepThatCompletedOnASurvivorIsCommittedAndTheNextOneFollows) {
  const auto updates = to_first_update();
  ASSERT_EQ(updates.size(), 1u);
  actor::rl_step_report done;
  done.step = 1;
  EXPECT_TRUE(d_->on_updated(0, done, false, 1).empty());
  const auto lost = d_->on_lost("policy/1", "its worker died");
  EXPECT_TRUE(all_of<driver::abort_all>(lost).empty()) << "nobody waits on it any more";
  const auto regroups = all_of<driver::regroup_all>(lost);
  ASSERT_EQ(regroups.size(), 1u);
  EXPECT_EQ(regroups[0].steps, 1) << "the step policy/0 completed is the group's";
  const auto next = all_of<driver::update_all>(regrouped(2, 1));
  ASSERT_EQ(next.size(), 1u);
  ASSERT_EQ(next[0].parts.size(), 1u);
  EXPECT_NE(next[0].parts[0].tokens, updates[0].parts[0].tokens) << "the second mini-batch";
}

TEST_F(RlhfElasticDriver, ALostWeightSenderIsReplacedByTheNewRankZero) {
  d_->start();
  const auto requests = requests_in(regrouped(1, 0));  // the first sync is asked of policy/0
  const auto lost = d_->on_lost("policy/0", "its worker died");
  ASSERT_EQ(all_of<driver::regroup_all>(lost).size(), 1u);
  EXPECT_TRUE(all_of<driver::sync_all>(lost).empty()) << "not before the group is formed";
  const auto again = regrouped(2, 0);
  const auto syncs = all_of<driver::sync_all>(again);
  ASSERT_EQ(syncs.size(), 1u);
  EXPECT_EQ(syncs[0].version, 1u);
  EXPECT_EQ(d_->members(false), std::vector<std::string>{"policy/1"});
  EXPECT_FALSE(syncs[0].requests_follow) << "the requests are out already";
  EXPECT_EQ(through_sync(requests, 1).size(), 1u) << "policy/1 sends, and the step goes on";
}

TEST_F(RlhfElasticDriver, AJoinerIsAdmittedAtTheNextRlStep) {
  auto updates = to_first_update();
  EXPECT_EQ(notes(d_->on_joined("policy/2")), std::vector<std::string>{"rank_joining"});
  std::vector<driver::command> next;
  for (int k = 0; k < 4; ++k) {  // the step's four optimizer steps on the two members
    ASSERT_EQ(updates.size(), 1u);
    d_->on_updated(1, {}, false, 1);
    next = d_->on_updated(0, {}, false, 1);
    updates = all_of<driver::update_all>(next);
  }
  EXPECT_EQ(notes(next), std::vector<std::string>{"rank_joined"});
  const auto regroups = all_of<driver::regroup_all>(next);
  ASSERT_EQ(regroups.size(), 1u);
  EXPECT_EQ(regroups[0].generation, 2u);
  EXPECT_TRUE(all_of<driver::sync_all>(next).empty()) << "the sync waits for the group";
  EXPECT_EQ(d_->members(false).size(), 3u);
  const auto formed = regrouped(2, 4);
  EXPECT_EQ(all_of<driver::sync_all>(formed).size(), 1u);
  const auto three = through_sync(requests_in(formed), 2);
  ASSERT_EQ(three.size(), 1u);
  ASSERT_EQ(three[0].parts.size(), 3u) << "a mini-batch of three rows over three ranks";
  EXPECT_EQ(three[0].parts[2].batch, 1);
}

TEST_F(RlhfElasticDriver, BelowMinTheRunWaitsForAWorkerThenFails) {
  make(2);
  to_first_update();
  d_->on_lost("policy/1", "its worker died");
  const auto waiting = d_->on_rank_error(false, 0, absl::UnavailableError("peer gone"), 1);
  EXPECT_EQ(notes(waiting), (std::vector<std::string>{"step_redone", "waiting_for_workers"}));
  EXPECT_EQ(all_of<driver::wake_after>(waiting).size(), 1u);
  now_ += std::chrono::seconds(10);
  EXPECT_TRUE(d_->on_timer().empty());
  now_ += std::chrono::seconds(25);
  const auto failed = all_of<driver::fail>(d_->on_timer());
  ASSERT_EQ(failed.size(), 1u);
  EXPECT_NE(failed[0].why.message().find("below roles.policy.elastic.min 2"), std::string::npos)
      << failed[0].why;
}

TEST_F(RlhfElasticDriver, BelowMinAJoinerIsAdmittedAtOnce) {
  make(2);
  to_first_update();
  d_->on_lost("policy/1", "its worker died");
  d_->on_rank_error(false, 0, absl::UnavailableError("peer gone"), 1);
  const auto joined = d_->on_joined("policy/2");
  EXPECT_EQ(notes(joined), std::vector<std::string>{"rank_joined"});
  ASSERT_EQ(all_of<driver::regroup_all>(joined).size(), 1u);
  const auto redo = all_of<driver::update_all>(regrouped(3, 0));
  ASSERT_EQ(redo.size(), 1u);
  EXPECT_EQ(redo[0].parts.size(), 2u);
}

TEST_F(RlhfElasticDriver, AFailureNoLossExplainsFailsTheRunAfterTheLossWait) {
  to_first_update();
  const auto waiting = d_->on_rank_error(false, 0, absl::InternalError("bad gradient"), 1);
  EXPECT_TRUE(waiting.empty()) << "policy/1 has not answered";
  const auto wait = d_->on_updated(1, {}, false, 1);
  ASSERT_EQ(all_of<driver::wake_after>(wait).size(), 1u);
  EXPECT_TRUE(d_->on_timer().empty());
  now_ += std::chrono::seconds(6);
  const auto failed = all_of<driver::fail>(d_->on_timer());
  ASSERT_EQ(failed.size(), 1u);
  EXPECT_NE(failed[0].why.message().find("policy/0: bad gradient"), std::string::npos)
      << failed[0].why;
}

// A second member lost while the group regroups after the first: the regroup is asked again of
// the one survivor, from the same basis (the last generation every member formed), and the step
// is redone there; the late answer of the lost one is not awaited any more.
TEST_F(RlhfElasticDriver, ASecondLossDuringTheRegroupRegroupsAgainFromTheSameBasis) {
  d_->set_members(false, {"policy/0", "policy/1", "policy/2"});
  const auto updates = to_first_update();
  ASSERT_EQ(updates.at(0).parts.size(), 3u);
  d_->on_lost("policy/2", "its worker died");
  d_->on_rank_error(false, 1, absl::UnavailableError("peer gone"), 1);
  const auto first = d_->on_rank_error(false, 0, absl::UnavailableError("peer gone"), 1);
  const auto regroups = all_of<driver::regroup_all>(first);
  ASSERT_EQ(regroups.size(), 1u);
  EXPECT_EQ(regroups[0].generation, 2u);
  EXPECT_TRUE(d_->on_regrouped(false, 0, 0, 2).empty()) << "policy/1 has not answered";
  const auto again = all_of<driver::regroup_all>(d_->on_lost("policy/1", "its worker died too"));
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].generation, 3u);
  EXPECT_EQ(again[0].basis, 1u) << "generation 2 was never whole";
  EXPECT_TRUE(d_->on_regrouped(false, 1, absl::CancelledError("aborted"), 2).empty());
  const auto redo = all_of<driver::update_all>(d_->on_regrouped(false, 0, 0, 3));
  ASSERT_EQ(redo.size(), 1u);
  ASSERT_EQ(redo[0].parts.size(), 1u);
  EXPECT_EQ(redo[0].parts[0].batch, 3);
}

// A member lost while the step's checkpoint is written: its part would never come, so the
// regrouped ranks take the checkpoint again in a new round; the abandoned round's answer is not
// the one awaited.
TEST_F(RlhfElasticDriver, ACheckpointALostMemberDidNotSaveIsTakenAgain) {
  make(1, /*save_freq=*/1);
  auto updates = to_first_update();
  std::vector<driver::command> next;
  for (int k = 0; k < 4; ++k) {
    ASSERT_EQ(updates.size(), 1u);
    d_->on_updated(1, {}, false, 1);
    next = d_->on_updated(0, {}, false, 1);
    updates = all_of<driver::update_all>(next);
  }
  const auto saves = all_of<driver::save_checkpoint>(next);
  ASSERT_EQ(saves.size(), 1u);
  const auto lost = d_->on_lost("policy/1", "its worker died");
  EXPECT_EQ(notes(lost), (std::vector<std::string>{"rank_lost", "checkpoint_redone"}));
  EXPECT_TRUE(all_of<driver::save_checkpoint>(lost).empty()) << "not before the group is formed";
  const auto again = all_of<driver::save_checkpoint>(regrouped(2, 4));
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].step, saves[0].step);
  EXPECT_GT(again[0].round, saves[0].round);
  EXPECT_TRUE(d_->on_checkpoint_saved(saves[0].round).empty()) << "the abandoned round";
  EXPECT_EQ(all_of<driver::sync_all>(d_->on_checkpoint_saved(again[0].round)).size(), 1u)
      << "the next step";
}

TEST_F(RlhfElasticDriver, ALossBeforeTheFirstRlStepFailsTheRun) {
  d_->start();
  const auto failed = all_of<driver::fail>(d_->on_lost("policy/1", "its worker died"));
  ASSERT_EQ(failed.size(), 1u);
  EXPECT_NE(failed[0].why.message().find("before the first RL step"), std::string::npos)
      << failed[0].why;
}

}  // namespace
}  // namespace troupe::apps::rlhf

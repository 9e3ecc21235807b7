#include "apps/rlhf/rlhf_driver.hpp"

#include <algorithm>
#include <deque>
#include <map>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"

namespace troupe::apps::rlhf {
namespace {

using driver = rlhf_driver;

rlhf_schedule schedule() {
  rlhf_schedule s;
  s.steps = 2;
  s.prompts = 2;
  s.n = 2;
  s.mini_batch_prompts = 1;
  s.ppo_epochs = 2;
  s.policy_ranks = 2;
  s.max_len = 32;
  s.response_length = 4;
  return s;
}

// One optimizer step an RL step: one epoch over one mini-batch of both prompts.
rlhf_schedule one_update_a_step() {
  rlhf_schedule s = schedule();
  s.ppo_epochs = 1;
  s.mini_batch_prompts = 2;
  return s;
}

// The algorithm with a critic.
rl_algorithm gae() {
  rl_algorithm a;
  a.adv_estimator = rl_algorithm::estimator::gae;
  return a;
}

driver make(rlhf_schedule s = schedule(), rl_algorithm algorithm = {}) {
  driver d(s, algorithm, kl_controller::fixed(0.0),
           {[](uint64_t, int64_t i) { return absl::StrCat("p", i, "="); }},
           [] { return driver::clock::time_point{}; });
  d.set_sync_participants(2);  // policy rank 0 and one rollout worker
  return d;
}

template <class T>
const T& only(const std::vector<driver::command>& commands) {
  EXPECT_EQ(commands.size(), 1u);
  const T* c = std::get_if<T>(&commands.back());
  EXPECT_NE(c, nullptr) << "command index " << commands.back().index();
  return *c;
}

// The log-probs asked after scoring: the reference's, the policy's and the critic's, each in a
// command of its own (an elastic group's may wait for it to form), merged.
driver::log_probs_all asked_log_probs(const std::vector<driver::command>& commands) {
  driver::log_probs_all all;
  for (const auto& c : commands) {
    const auto* ask = std::get_if<driver::log_probs_all>(&c);
    EXPECT_NE(ask, nullptr) << "command index " << c.index();
    if (ask == nullptr) continue;
    all.policy.insert(all.policy.end(), ask->policy.begin(), ask->policy.end());
    all.critic.insert(all.critic.end(), ask->critic.begin(), ask->critic.end());
    if (ask->reference.batch > 0) all.reference = ask->reference;
  }
  return all;
}

// Each request's output: "7", ended by the stop string for odd ids (kept in the output, as the
// request asks), with `version`.
std::vector<actor::generation_event> outputs_for(
    const std::vector<actor::generation_request>& requests, uint64_t version) {
  std::vector<actor::generation_event> outputs;
  for (const auto& r : requests) {
    actor::generation_event e;
    e.id = r.id;
    e.finished = true;
    e.reason = r.id % 2 ? actor::finish_reason::stop : actor::finish_reason::length;
    e.tokens = {'7'};
    if (e.reason == actor::finish_reason::stop) e.tokens.push_back('\n');
    e.logprobs.assign(e.tokens.size(), -1.0f);
    e.weights_version = version;
    outputs.push_back(e);
  }
  return outputs;
}

// The requests a driver sent with its last step's updates, for its next step (finish_step takes
// them from the commands, sync_and_requests uses them up).
std::map<const driver*, std::vector<actor::generation_request>> requests_sent_ahead;

// A step's start: the sync of `version`, whose requests went out with the last step's updates
// or follow the sync (requests_ahead), each waiting in the rollout for that version. Their
// requests.
std::vector<actor::generation_request> sync_and_requests(
    driver& d, const std::vector<driver::command>& commands, uint64_t version) {
  const auto& sync = only<driver::sync_all>(commands);
  EXPECT_EQ(sync.version, version);
  auto sent = requests_sent_ahead.extract(&d);  // (or an earlier driver's at this address)
  std::vector<actor::generation_request> requests;
  if (sync.requests_follow) {
    requests = only<driver::generate_all>(d.requests_ahead()).requests;
  } else {
    EXPECT_FALSE(sent.empty()) << "neither sent with the last step's updates nor following";
    if (!sent.empty()) requests = std::move(sent.mapped());
  }
  for (const auto& r : requests)
    EXPECT_EQ(r.min_weights_version, version) << "request " << r.id;
  EXPECT_TRUE(d.requests_ahead().empty()) << "once";
  return requests;
}

std::vector<driver::command> finish_step(driver& d, const std::vector<driver::command>& scored,
                                         int* updates, int* critic_updates);

// Answers every command of one step the way the roles would; returns the step's commands after
// the updates (metrics, samples, the next sync or the end).
std::vector<driver::command> run_step(driver& d, std::vector<driver::command> commands,
                                      uint64_t version, int* updates,
                                      int* critic_updates = nullptr) {
  const auto requests = sync_and_requests(d, commands, version);
  EXPECT_TRUE(d.on_synced("policy/0", {version, "abc"}, true).empty());
  EXPECT_TRUE(d.on_synced("rollout/0", {version, "abc"}, false).empty())
      << "the generation went out with the sync";
  EXPECT_EQ(requests.size(), 4u);  // 2 prompts x n 2
  if (requests.size() != 4) return {};
  EXPECT_NE(requests[0].seed, requests[1].seed) << "the n samples of a prompt differ";
  // Each step's prompts follow the last step's: 2 per step.
  const std::string first = absl::StrCat("p", 2 * (version - 1), "=");
  EXPECT_EQ(std::string(requests[0].prompt.begin(), requests[0].prompt.end()), first);
  return finish_step(d, d.on_generated(outputs_for(requests, version)), updates, critic_updates);
}

// The rest of a step from its scoring on (`scored`: the generation's answer): the step's
// commands after the updates.
std::vector<driver::command> finish_step(driver& d, const std::vector<driver::command>& scored,
                                         int* updates, int* critic_updates) {
  const auto& scoring = only<driver::score_all>(scored);
  EXPECT_EQ(scoring.responses[0], "7");
  const auto asked = d.on_scored({1.0, 0.0, 0.5, 0.5});
  const auto ask = asked_log_probs(asked);
  EXPECT_EQ(ask.policy.size(), 2u);
  EXPECT_EQ(ask.reference.batch, 4);
  EXPECT_EQ(ask.critic.size(), d.schedule().critic_ranks);
  const int ctx = ask.reference.ctx;
  EXPECT_TRUE(d.on_log_probs(false, 0, std::vector<float>(2 * ctx, -1.0f)).empty());
  EXPECT_TRUE(d.on_log_probs(true, 0, std::vector<float>(4 * ctx, -1.0f)).empty());
  auto next = d.on_log_probs(false, 1, std::vector<float>(2 * ctx, -1.0f));
  if (!ask.critic.empty()) {  // one critic rank, after the log-probs
    EXPECT_TRUE(next.empty());
    next = d.on_values(0, std::vector<float>(4 * ctx, 0.25f));
  }
  // The critic's and the actor's updates run at once: both first optimizer steps come together,
  // and each track asks for its next step when its last one is answered.
  // The next step's requests leave with this step's updates (but for the last step).
  if (!next.empty()) {
    if (const auto* ahead = std::get_if<driver::generate_all>(&next.front())) {
      EXPECT_LT(d.step() + 1, d.schedule().end()) << "no step follows the last";
      requests_sent_ahead[&d] = ahead->requests;
      next.erase(next.begin());
    }
  }
  if (!ask.critic.empty() && d.schedule().updates_actor_at(d.step() + 1)) {
    EXPECT_EQ(next.size(), 2u) << "both updates start at once";
  }
  std::deque<driver::update_all> pending;
  const auto is_update = [](const driver::command& c) {
    return std::holds_alternative<driver::update_all>(c);
  };
  for (;;) {
    if (!std::all_of(next.begin(), next.end(), is_update)) return next;
    for (const auto& c : next)
      pending.push_back(std::get<driver::update_all>(c));
    if (pending.empty()) return next;
    const driver::update_all update = pending.front();
    pending.pop_front();
    actor::rl_step_report r;
    if (update.critic) {
      EXPECT_EQ(update.parts.size(), 1u);
      EXPECT_EQ(update.parts[0].batch, d.schedule().mini_batch(true) * d.schedule().n);
      EXPECT_EQ(update.parts[0].returns.size(), update.parts[0].targets.size());
      ++*critic_updates;
      r.vf_loss = 0.25;
      next = d.on_updated(0, r, true);
      continue;
    }
    EXPECT_EQ(update.parts.size(), 2u);
    ++*updates;
    r.pg_loss = 0.5;
    EXPECT_TRUE(d.on_updated(1, r).empty());
    next = d.on_updated(0, r);
  }
}

// Both policy ranks' and the reference's log-probs of a step's 4 rows: the commands after the last.
std::vector<driver::command> answer_log_probs(driver& d) {
  const int ctx = d.schedule().max_len;
  EXPECT_TRUE(d.on_log_probs(false, 0, std::vector<float>(2 * ctx, -1.0f)).empty());
  EXPECT_TRUE(d.on_log_probs(true, 0, std::vector<float>(4 * ctx, -1.0f)).empty());
  return d.on_log_probs(false, 1, std::vector<float>(2 * ctx, -1.0f));
}

// Both policy ranks answer an optimizer step: the commands after the second.
std::vector<driver::command> answer_update(driver& d) {
  EXPECT_TRUE(d.on_updated(1, {}).empty());
  return d.on_updated(0, {});
}

// Starts `d` and syncs its first version: the requests of its first generation.
std::vector<actor::generation_request> first_generation(driver& d) {
  const auto requests = sync_and_requests(d, d.start(), 1);
  EXPECT_TRUE(d.on_synced("policy/0", {1, "abc"}, true).empty());
  EXPECT_TRUE(d.on_synced("rollout/0", {1, "abc"}, false).empty());
  return requests;
}

TEST(RlhfDriver, StepsSyncGenerateScoreAndUpdateInOrder) {
  driver d = make();
  int updates = 0;
  auto after_first = run_step(d, d.start(), 1, &updates);
  EXPECT_EQ(updates, 4);  // 2 epochs x 2 mini-batches of one prompt
  ASSERT_EQ(after_first.size(), 3u);
  const auto& row = std::get<driver::metrics_row>(after_first[0]).row;
  EXPECT_EQ(row["step"], 1);
  EXPECT_EQ(row["policy_version"], 1);
  EXPECT_DOUBLE_EQ(row["critic/score/mean"].get<double>(), 0.5);
  EXPECT_DOUBLE_EQ(row["actor/pg_loss"].get<double>(), 0.5);
  // An ended response keeps its end token: "7\n" for the odd ids.
  EXPECT_DOUBLE_EQ(row["response_length/max"].get<double>(), 2.0);
  const auto& samples = std::get<driver::sample_rows>(after_first[1]).rows;
  EXPECT_EQ(samples[0]["prompt"], "p0=");
  EXPECT_EQ(samples[0]["response"], "7\n");
  EXPECT_EQ(samples[2]["prompt"], "p1=");
  const auto last = run_step(d, {after_first[2]}, 2, &updates);
  ASSERT_EQ(last.size(), 3u);
  const auto& summary = std::get<driver::finish>(last[2]).summary;
  EXPECT_EQ(summary["steps"], 2);
  EXPECT_TRUE(d.done());
}

// With a learned reward the driver also scores each response by the task's rule: its mean (and
// max and min) beside the reward model's score as critic/true_score/*, each sample's as
// true_score; the rule sees the response without its end string, and whether it ended.
TEST(RlhfDriver, ALearnedRewardsResponsesAreScoredByTheRuleToo) {
  rl_task task{[](uint64_t, int64_t i) { return absl::StrCat("p", i, "="); }};
  std::vector<std::string> seen;
  task.true_score = [&](std::string_view prompt, std::string_view response, bool ended) {
    seen.push_back(absl::StrCat(absl::string_view(prompt.data(), prompt.size()), "|",
                                absl::string_view(response.data(), response.size()),
                                ended ? "|ended" : ""));
    return ended ? 1.0 : 0.0;
  };
  driver d(schedule(), {}, kl_controller::fixed(0.0), task,
           [] { return driver::clock::time_point{}; });
  d.set_sync_participants(2);
  int updates = 0;
  const auto after = run_step(d, d.start(), 1, &updates);
  ASSERT_EQ(after.size(), 3u);
  // (outputs_for ends the odd ids' responses: the first of each prompt's.)
  EXPECT_EQ(seen, (std::vector<std::string>{"p0=|7|ended", "p0=|7", "p1=|7|ended", "p1=|7"}));
  const auto& row = std::get<driver::metrics_row>(after[0]).row;
  EXPECT_DOUBLE_EQ(row["critic/score/mean"].get<double>(), 0.5);  // the reward role's
  EXPECT_DOUBLE_EQ(row["critic/true_score/mean"].get<double>(), 0.5);
  EXPECT_DOUBLE_EQ(row["critic/true_score/max"].get<double>(), 1.0);
  EXPECT_DOUBLE_EQ(row["critic/true_score/min"].get<double>(), 0.0);
  const auto& samples = std::get<driver::sample_rows>(after[1]).rows;
  EXPECT_EQ(samples[0]["true_score"], 1.0);
  EXPECT_EQ(samples[1]["true_score"], 0.0);
  EXPECT_EQ(samples[0]["score"], 1.0);
  // Without a learned reward there is no true score.
  driver plain = make();
  const auto rule_only = run_step(plain, plain.start(), 1, &updates);
  EXPECT_FALSE(std::get<driver::metrics_row>(rule_only[0]).row.contains("critic/true_score/mean"));
  EXPECT_FALSE(std::get<driver::sample_rows>(rule_only[1]).rows[0].contains("true_score"));
}

// One step off policy: once step 1's log-probs are in, step 2's prompts go to the rollout on
// the weights step 1 used, beside step 1's update; step 1 ends only when that generation has;
// step 2, after its sync, scores those outputs at once: one version old.
TEST(RlhfDriver, OneStepOffPolicyGeneratesTheNextStepDuringTheUpdate) {
  rlhf_schedule s = one_update_a_step();
  s.max_staleness = 1;
  driver d = make(s);
  const auto requests = first_generation(d);
  d.on_generated(outputs_for(requests, 1));
  asked_log_probs(d.on_scored({1.0, 0.0, 0.5, 0.5}));
  const auto overlapped = answer_log_probs(d);
  ASSERT_EQ(overlapped.size(), 2u);
  const auto& ahead = std::get<driver::generate_all>(overlapped[0]).requests;
  EXPECT_EQ(std::string(ahead[0].prompt.begin(), ahead[0].prompt.end()), "p2=") << "step 2's";
  EXPECT_TRUE(std::holds_alternative<driver::update_all>(overlapped[1]));
  EXPECT_TRUE(answer_update(d).empty()) << "step 1 waits for step 2's generation";
  const auto ended = d.on_generated(outputs_for(ahead, 1));
  ASSERT_EQ(ended.size(), 3u);
  EXPECT_EQ(std::get<driver::metrics_row>(ended[0]).row["staleness/max"], 0);
  const auto& next_sync = std::get<driver::sync_all>(ended[2]);
  EXPECT_EQ(next_sync.version, 2u);
  EXPECT_FALSE(next_sync.requests_follow) << "step 2 generated already";
  d.on_synced("policy/0", {2, "abc"}, true);
  const auto scored = d.on_synced("rollout/0", {2, "abc"}, false);
  EXPECT_EQ(only<driver::score_all>(scored).prompts[0], "p2=") << "no generation: it is done";
  asked_log_probs(d.on_scored({1.0, 1.0, 0.5, 0.5}));
  EXPECT_EQ(answer_log_probs(d).size(), 1u) << "the last step generates nothing ahead";
  const auto last = answer_update(d);
  ASSERT_FALSE(last.empty());
  const auto& row = std::get<driver::metrics_row>(last[0]).row;
  EXPECT_EQ(row["step"], 2);
  EXPECT_EQ(row["staleness/max"], 1) << "generated with version 1, trained at version 2";
}

TEST(RlhfDriver, ARolloutWorkerWithOtherWeightsFailsTheRunNamingIt) {
  driver d = make();
  d.start();
  EXPECT_TRUE(d.on_synced("policy/0", {1, "abcdef0123456789"}, true).empty());
  const auto out = d.on_synced("rollout/3", {1, "fedcba9876543210"}, false);
  const absl::Status why = only<driver::fail>(out).why;
  EXPECT_EQ(why.code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(why.message().find("rollout/3 holds weights with checksum fedcba987654"),
            std::string::npos)
      << why;
}

// A sync that lost a rollout worker is asked again of those left: the acknowledgements before
// it count for nothing, and the new round's complete it.
TEST(RlhfDriver, ASyncThatLostAWorkerIsAskedAgainOfThoseLeft) {
  driver d = make();
  d.set_sync_participants(3);
  const auto requests = sync_and_requests(d, d.start(), 1);
  EXPECT_TRUE(d.on_synced("policy/0", {1, "abc"}, true).empty());
  EXPECT_TRUE(d.on_synced("rollout/0", {1, "abc"}, false).empty());  // rollout/1 never answers
  EXPECT_TRUE(d.on_generated(outputs_for(requests, 1)).empty()) << "they wait for the sync";
  d.set_sync_participants(2);
  const auto again = d.resync();
  EXPECT_EQ(only<driver::sync_all>(again).version, 1u);
  EXPECT_FALSE(only<driver::sync_all>(again).requests_follow) << "the requests are out already";
  EXPECT_TRUE(d.on_synced("policy/0", {1, "abc"}, true).empty())
      << "the old round's answers are gone";
  EXPECT_EQ(only<driver::score_all>(d.on_synced("rollout/0", {1, "abc"}, false)).prompts.size(),
            4u);
  EXPECT_TRUE(d.resync().empty()) << "no sync in flight";
}

// A worker that swapped the new weights in, in a round that then failed elsewhere, may generate
// on them before the round is redone: its checksum is compared too.
TEST(RlhfDriver, ARedoneSyncComparesTheChecksumsOfTheRoundsBeforeIt) {
  driver d = make();
  d.set_sync_participants(3);
  sync_and_requests(d, d.start(), 1);
  EXPECT_TRUE(d.on_synced("rollout/0", {1, "fedcba9876543210"}, false).empty());
  d.set_sync_participants(2);  // rollout/1 was lost: the round is redone without it
  only<driver::sync_all>(d.resync());
  EXPECT_TRUE(d.on_synced("rollout/0", {1, "abcdef"}, false).empty());
  const absl::Status why = only<driver::fail>(d.on_synced("policy/0", {1, "abcdef"}, true)).why;
  EXPECT_EQ(why.code(), absl::StatusCode::kDataLoss) << why;
  EXPECT_NE(why.message().find("rollout/0 holds weights with checksum fedcba987654"),
            std::string::npos)
      << why;
}

// The first step's metrics row, its requests sent right behind its sync: the rollout worker
// acknowledges 10 ms after the sync, saying it swapped the weights in `swap_s` after the sync's
// sending; the outputs come back 20 ms later, before the policy's acknowledgement (10 ms after
// them), and wait for it.
nlohmann::json row_of_a_step_sent_with_its_sync(double swap_s) {
  driver::clock::time_point now{};
  driver d(schedule(), {}, kl_controller::fixed(0.0),
           {[](uint64_t, int64_t i) { return absl::StrCat("p", i, "="); }}, [&now] { return now; });
  d.set_sync_participants(2);
  const auto requests = sync_and_requests(d, d.start(), 1);
  now += std::chrono::milliseconds(10);
  EXPECT_TRUE(d.on_synced("rollout/0", {1, "abc", swap_s}, false).empty());
  now += std::chrono::milliseconds(20);
  EXPECT_TRUE(d.on_generated(outputs_for(requests, 1)).empty()) << "the policy's checksum is due";
  now += std::chrono::milliseconds(10);
  int updates = 0;
  const auto after = finish_step(d, d.on_synced("policy/0", {1, "abc"}, true), &updates, nullptr);
  EXPECT_EQ(after.size(), 3u);
  return after.empty() ? nlohmann::json{} : std::get<driver::metrics_row>(after[0]).row;
}

// The step's requests go out right behind its sync; outputs that come back before the last
// acknowledgement wait for it, and its generation is timed from the rollout worker's swap.
TEST(RlhfDriver, AStepsRequestsGoOutWithItsSyncAndTheGenerationIsTimedFromTheSwap) {
  const nlohmann::json row = row_of_a_step_sent_with_its_sync(0.004);  // swapped at 4 ms
  EXPECT_NEAR(row["timing_s/update_weights"].get<double>(), 0.040, 1e-9);
  EXPECT_NEAR(row["timing_s/gen"].get<double>(), 0.026, 1e-9) << "from 4 ms to 30 ms";
}

// A swap time later than the outputs' arrival (a worker whose clock is not the one it claims)
// cannot make the generation's time negative: it runs from no later than the outputs.
TEST(RlhfDriver, AGenerationIsNeverTimedFromAfterItsOutputs) {
  EXPECT_EQ(row_of_a_step_sent_with_its_sync(3600.0)["timing_s/gen"].get<double>(), 0.0);
}

// Synchronous, once a step's log-probs are in: the next step's requests leave beside its
// updates, each waiting in the rollout for the version those make, and the next sync goes
// alone. Not when a rollout worker waits to join at the next sync (it gets its share with the
// sync), nor after the last step.
TEST(RlhfDriver, TheNextStepsRequestsLeaveWithThisStepsUpdates) {
  rlhf_schedule s = one_update_a_step();
  s.steps = 3;
  driver d = make(s);
  d.on_generated(outputs_for(first_generation(d), 1));
  asked_log_probs(d.on_scored({1.0, 0.0, 0.5, 0.5}));
  const auto with_update = answer_log_probs(d);
  ASSERT_EQ(with_update.size(), 2u);
  const auto& ahead = std::get<driver::generate_all>(with_update[0]).requests;
  ASSERT_EQ(ahead.size(), 4u);
  EXPECT_EQ(std::string(ahead[0].prompt.begin(), ahead[0].prompt.end()), "p2=") << "step 2's";
  for (const auto& r : ahead)
    EXPECT_EQ(r.min_weights_version, 2u) << "request " << r.id;
  EXPECT_TRUE(std::holds_alternative<driver::update_all>(with_update[1]));
  const auto step_1_ended = answer_update(d);
  ASSERT_EQ(step_1_ended.size(), 3u);
  const auto& sync = std::get<driver::sync_all>(step_1_ended[2]);
  EXPECT_EQ(sync.version, 2u);
  EXPECT_FALSE(sync.requests_follow) << "they left with the update";
  EXPECT_TRUE(d.requests_ahead().empty());
  EXPECT_TRUE(d.on_synced("policy/0", {2, "abc"}, true).empty());
  EXPECT_TRUE(d.on_synced("rollout/0", {2, "abc"}, false).empty()) << "nothing left to send";
  EXPECT_EQ(only<driver::score_all>(d.on_generated(outputs_for(ahead, 2))).prompts[0], "p2=");
  // A rollout worker joins at step 3's sync: step 3's requests follow that sync.
  d.on_rollout_joining();
  asked_log_probs(d.on_scored({1.0, 0.0, 0.5, 0.5}));
  EXPECT_EQ(only<driver::update_all>(answer_log_probs(d)).parts.size(), 2u);
  const auto step_2_ended = answer_update(d);
  ASSERT_EQ(step_2_ended.size(), 3u);
  EXPECT_TRUE(std::get<driver::sync_all>(step_2_ended[2]).requests_follow);
  const auto step_3 = d.requests_ahead();
  EXPECT_EQ(std::string(only<driver::generate_all>(step_3).requests[0].prompt.begin(),
                        only<driver::generate_all>(step_3).requests[0].prompt.end()),
            "p4=");
}

// Outputs that came back before a checksum that differs are never scored: the run fails.
TEST(RlhfDriver, OutputsThatCameBeforeAWrongChecksumAreNeverScored) {
  driver d = make();
  const auto requests = sync_and_requests(d, d.start(), 1);
  EXPECT_TRUE(d.on_synced("rollout/0", {1, "fedcba9876543210"}, false).empty());
  EXPECT_TRUE(d.on_generated(outputs_for(requests, 1)).empty());
  const absl::Status why = only<driver::fail>(d.on_synced("policy/0", {1, "abcdef"}, true)).why;
  EXPECT_EQ(why.code(), absl::StatusCode::kDataLoss) << why;
}

// With a validation due, the sync goes alone: the greedy validation generates first, and the
// training requests follow it.
TEST(RlhfDriver, WithAValidationDueTheRequestsWaitForIt) {
  rlhf_schedule s = schedule();
  s.test_freq = 1;
  s.val_prompts = 1;
  driver d = make(s);
  const auto started = d.start();
  EXPECT_FALSE(only<driver::sync_all>(started).requests_follow);
  EXPECT_TRUE(d.requests_ahead().empty());
  d.on_synced("policy/0", {1, "abc"}, true);
  const auto synced = d.on_synced("rollout/0", {1, "abc"}, false);
  const auto& val = only<driver::generate_all>(synced);
  ASSERT_EQ(val.requests.size(), 1u);
  EXPECT_EQ(val.requests[0].temperature, 0.0f) << "greedy";
  EXPECT_EQ(val.requests[0].min_weights_version, 0u) << "sent once the weights are in";
}

// step_requests(k) is what step k asks of the rollout (bench/rlhf_bench replays it).
TEST(RlhfDriver, StepRequestsAreTheRequestsOfThatStep) {
  driver d = make();
  const std::vector<actor::generation_request> requests = first_generation(d);
  const auto replayed = d.step_requests(1);
  ASSERT_EQ(replayed.size(), requests.size());
  for (size_t i = 0; i < requests.size(); ++i) {
    EXPECT_EQ(replayed[i].id, requests[i].id);
    EXPECT_EQ(replayed[i].prompt, requests[i].prompt);
    EXPECT_EQ(replayed[i].seed, requests[i].seed);
    EXPECT_EQ(replayed[i].max_tokens, requests[i].max_tokens);
    EXPECT_EQ(replayed[i].stop, requests[i].stop);
  }
  EXPECT_NE(d.step_requests(2)[0].prompt, requests[0].prompt) << "step 2: the next prompts";
}

// Every request's output exactly once and ended: a missing one (lost with a worker) or one of
// another request fails the run.
TEST(RlhfDriver, AGenerationWithAnOutputMissingOrRepeatedFailsTheRun) {
  driver d = make();
  const std::vector<actor::generation_request> requests = first_generation(d);
  std::vector<actor::generation_event> outputs;
  for (size_t i = 0; i < requests.size(); ++i) {
    actor::generation_event e;
    e.id = requests[0].id;  // the first request's output, over and over
    e.finished = true;
    outputs.push_back(e);
  }
  const absl::Status why = only<driver::fail>(d.on_generated(outputs)).why;
  EXPECT_EQ(why.code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(why.message().find("output 1 is of request"), std::string::npos) << why;
}

// The responses are trained on whole: an output that ended holds its stop string (the request
// asks for include_stop_str_in_output), and every token its log-prob.
TEST(RlhfDriver, AnOutputWithoutItsEndOrItsLogProbsFailsTheRun) {
  for (int broken : {0, 1}) {
    driver d = make();
    const std::vector<actor::generation_request> requests = first_generation(d);
    EXPECT_TRUE(requests[0].include_stop_str_in_output);
    std::vector<actor::generation_event> outputs = outputs_for(requests, 1);
    ASSERT_EQ(outputs[0].reason, actor::finish_reason::stop);
    if (broken == 0) {
      outputs[0].tokens.pop_back(), outputs[0].logprobs.pop_back();
    } else {
      outputs[0].logprobs.pop_back();
    }
    const absl::Status why = only<driver::fail>(d.on_generated(outputs)).why;
    EXPECT_EQ(why.code(), absl::StatusCode::kDataLoss);
    EXPECT_NE(why.message().find(broken == 0 ? "ended without its stop string"
                                             : "has 1 log-probs for 2 tokens"),
              std::string::npos)
        << why;
  }
}

// veRL's bypass mode: the rollout's log-probs are the old ones, so no policy rank is asked, and
// the update carries them at the positions of their tokens.
TEST(RlhfDriver, InBypassModeTheRolloutsLogProbsAreTheOldOnes) {
  rlhf_schedule s = schedule();
  s.bypass_old_log_prob = true;
  s.mini_batch_prompts = 2;  // one mini-batch: every row
  driver d = make(s);
  const std::vector<actor::generation_request> requests = first_generation(d);
  std::vector<actor::generation_event> outputs = outputs_for(requests, 1);
  for (size_t i = 0; i < outputs.size(); ++i) {
    for (size_t j = 0; j < outputs[i].logprobs.size(); ++j)
      outputs[i].logprobs[j] = -0.25f * static_cast<float>(i + 1) - 0.01f * static_cast<float>(j);
  }
  only<driver::score_all>(d.on_generated(outputs));
  const auto asked = d.on_scored({1.0, 0.0, 0.5, 0.5});
  const auto ask = asked_log_probs(asked);
  EXPECT_TRUE(ask.policy.empty()) << "the policy recomputes nothing";
  const int ctx = ask.reference.ctx;
  const auto updates = d.on_log_probs(true, 0, std::vector<float>(4 * ctx, -1.0f));
  ASSERT_EQ(updates.size(), 2u) << "step 2's requests, and the update";
  const auto& update = std::get<driver::update_all>(updates[1]);
  ASSERT_EQ(update.parts.size(), 2u);  // two policy ranks, two rows each
  for (int rank = 0; rank < 2; ++rank) {
    const actor::rl_batch& part = update.parts[rank];
    std::vector<float> old;
    for (size_t p = 0; p < part.targets.size(); ++p) {
      if (part.targets[p] >= 0) old.push_back(part.old_log_probs[p]);
    }
    std::vector<float> want;
    for (int row = 2 * rank; row < 2 * rank + 2; ++row)
      want.insert(want.end(), outputs[row].logprobs.begin(), outputs[row].logprobs.end());
    EXPECT_EQ(old, want) << "rank " << rank;
  }
}

TEST(RlhfDriver, AWarmupRunsThenTheInitialPolicyIsSavedAndLoadedByTheReference) {
  rlhf_schedule s = schedule();
  s.warmup_steps = 2;
  driver d = make(s);
  const auto started = d.start();
  only<driver::warmup_step_all>(started);
  EXPECT_TRUE(d.on_warmup_step(1, {}).empty());
  auto out = d.on_warmup_step(0, {});
  ASSERT_EQ(out.size(), 2u);
  EXPECT_TRUE(std::holds_alternative<driver::warmup_step_all>(out[1]));
  d.on_warmup_step(1, {});
  out = d.on_warmup_step(0, {});
  EXPECT_EQ(std::get<driver::save_initial>(out.back()).step, 2);
  const auto load = d.on_initial_saved("/run/init/step-2");
  EXPECT_EQ(only<driver::load_initial>(load).dir, "/run/init/step-2");
  sync_and_requests(d, d.on_initial_loaded(), 1);
}

// init_from: every policy rank loads the checkpoint, then the reference (and a critic) load it
// too, before the first sync; with a warm-up, it runs on the loaded weights and its checkpoint
// is the reference's instead.
TEST(RlhfDriver, ARunFromACheckpointLoadsItIntoThePolicyThenTheReference) {
  rlhf_schedule s = schedule();
  s.init_from = "/pretrain/checkpoints/step-600";
  driver d = make(s);
  EXPECT_EQ(only<driver::load_policy>(d.start()).dir, "/pretrain/checkpoints/step-600");
  EXPECT_TRUE(d.on_policy_loaded().empty()) << "one of two policy ranks";
  EXPECT_EQ(only<driver::load_initial>(d.on_policy_loaded()).dir, "/pretrain/checkpoints/step-600");
  sync_and_requests(d, d.on_initial_loaded(), 1);

  s.warmup_steps = 1;
  driver warmed = make(s);
  warmed.start();
  warmed.on_policy_loaded();
  only<driver::warmup_step_all>(warmed.on_policy_loaded());
  warmed.on_warmup_step(1, {});
  EXPECT_EQ(std::get<driver::save_initial>(warmed.on_warmup_step(0, {}).back()).step, 1);
  EXPECT_EQ(only<driver::load_initial>(warmed.on_initial_saved("/run/init/step-1")).dir,
            "/run/init/step-1");
}

// GAE: the critic gives values with the log-probs and updates every step, the actor (at the same
// time) only from step critic_warmup on; both get veRL's metrics.
TEST(RlhfDriver, WithACriticValuesAndCriticUpdatesRunAndTheActorWaitsForItsWarmup) {
  rlhf_schedule s = schedule();
  s.critic_ranks = 1;
  s.critic_warmup = 2;
  s.warmup_steps = 1;
  driver d = make(s, gae());
  d.start();
  d.on_warmup_step(1, {});
  d.on_warmup_step(0, {});
  only<driver::load_initial>(d.on_initial_saved("/run/init/step-1"));
  EXPECT_TRUE(d.on_initial_loaded().empty()) << "the critic loads the initial policy too";
  const auto first = d.on_initial_loaded();
  int updates = 0, critic_updates = 0;
  auto after = run_step(d, first, 1, &updates, &critic_updates);
  EXPECT_EQ(critic_updates, 4);
  EXPECT_EQ(updates, 0) << "step 1 < critic_warmup 2: no actor update";
  ASSERT_EQ(after.size(), 3u);
  const auto& row = std::get<driver::metrics_row>(after[0]).row;
  EXPECT_DOUBLE_EQ(row["critic/vf_loss"].get<double>(), 0.25);
  EXPECT_TRUE(row.contains("critic/values/mean"));
  EXPECT_TRUE(row.contains("critic/vf_explained_var"));
  EXPECT_TRUE(row.contains("timing_s/values"));
  EXPECT_TRUE(row.contains("timing_s/update_critic"));
  EXPECT_FALSE(row.contains("actor/pg_loss"));
  critic_updates = 0;
  after = run_step(d, {after[2]}, 2, &updates, &critic_updates);
  EXPECT_EQ(critic_updates, 4);
  EXPECT_EQ(updates, 4);
  EXPECT_TRUE(std::get<driver::metrics_row>(after[0]).row.contains("actor/pg_loss"));
}

// critic.ppo_mini_batch_size and ppo_epochs of its own (veRL's keys): the critic's updates
// follow them, the actor's its own.
TEST(RlhfDriver, TheCriticsMiniBatchAndEpochsAreItsOwn) {
  rlhf_schedule s = schedule();
  s.critic_ranks = 1;
  s.critic_mini_batch_prompts = 2;  // the whole batch: one update per epoch
  s.critic_ppo_epochs = 3;
  EXPECT_EQ(s.updates_per_step(true), 3);
  EXPECT_EQ(s.updates_per_step(false), 4);
  driver d = make(s, gae());
  int updates = 0, critic_updates = 0;
  run_step(d, d.start(), 1, &updates, &critic_updates);
  EXPECT_EQ(critic_updates, 3);
  EXPECT_EQ(updates, 4);
}

TEST(RlhfDriver, GaeWithoutValuesFailsTheRun) {
  driver d = make(schedule(), gae());
  int updates = 0;
  const auto out = run_step(d, d.start(), 1, &updates);
  EXPECT_NE(only<driver::fail>(out).why.message().find("needs the critic's values"),
            std::string::npos);
}

}  // namespace
}  // namespace troupe::apps::rlhf

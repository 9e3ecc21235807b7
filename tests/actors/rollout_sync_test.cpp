// The RL weight sync between actors (issue 16): the policy's rank 0 sends its weights over a Gloo
// group to rollout workers, which acknowledge the checksum and generate with them; a swap waits
// for the requests running on the old weights.

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include <gtest/gtest.h>

#include "actors/inference_worker_actor.hpp"
#include "actors/trainer_actor.hpp"
#include "runtime/actor/status_bridge.hpp"
#include "runtime/actor/system_config.hpp"
#include "runtime/base/steady_clock_domain.hpp"
#include "runtime/comm/gloo_communicator.hpp"

namespace troupe::actors {
namespace {

using namespace std::chrono_literals;

const models::decoder_config rollout_model{256, 48, 2, 32, 4};

weight_sync_spec sync_spec() {
  weight_sync_spec s;
  s.group = {.name = "rlhf/sync", .timeout = 20s};
  s.bucket_bytes = 4096;  // many buckets
  return s;
}

// Sync round `version` at `epoch`: rank `rank` of `ranks` (the policy is rank 0).
actor::weight_sync_round round(uint64_t version, int rank, int ranks, uint64_t epoch = 1) {
  return {version, epoch, rank, ranks};
}

class RolloutSyncTest : public ::testing::Test {
 protected:
  RolloutSyncTest()
      : cfg_(actor::make_system_config({.scheduler_threads = 2})),
        system_(*cfg_),
        store_(std::make_shared<comm::memory_store>()),
        self_(system_) {}

  actor::trainer_actor policy() {
    trainer_actor_spec s;
    s.model = rollout_model;
    s.options.global_batch = 1;
    s.options.seed = 21;  // not the rollout's initial weights
    s.objective = policy_objective{};
    s.sync = sync_spec();
    return spawn_trainer(system_, metrics_, "policy/0", store_, s);
  }

  actor::inference_worker_actor rollout(int index) {
    auto model = std::make_shared<served_model>();
    model->layout = std::make_unique<models::decoder_layout>(
        rollout_model, models::layer_range::all(rollout_model));
    model->params.resize(model->layout->total());
    model->layout->initialize(model->params.data(), 3);
    return *spawn_inference_worker(
        system_, metrics_, "rollout/" + std::to_string(index), std::move(model),
        {.scheduler = {.ctx = rollout_model.ctx, .max_batch_tokens = 64}}, {}, 20s,
        rollout_sync{store_, sync_spec()});
  }

  // One sync round of `version` at `epoch` from `sender` to `workers` (ranks 1..), every member
  // asked before any answer is awaited (the sync is one collective); every worker must
  // acknowledge the version and the sender's checksum, which is returned.
  std::string sync_all(const actor::trainer_actor& sender,
                       const std::vector<actor::inference_worker_actor>& workers, uint64_t version,
                       uint64_t epoch = 1) {
    const int ranks = 1 + static_cast<int>(workers.size());
    auto sent = self_->request(sender, 30s, actor::sync_atom_v, round(version, 0, ranks, epoch));
    std::vector<decltype(sent)> acks;
    for (size_t w = 0; w < workers.size(); ++w) {
      acks.push_back(self_->request(workers[w], 30s, actor::sync_atom_v,
                                    round(version, 1 + static_cast<int>(w), ranks, epoch)));
    }
    std::string want;
    sent.receive([&](actor::weights_ack& a) { want = a.checksum; },
                 [](caf::error& e) { FAIL() << caf::to_string(e); });
    for (auto& a : acks) {
      a.receive(
          [&](actor::weights_ack& ack) {
            EXPECT_EQ(ack.version, version);
            EXPECT_EQ(ack.checksum, want);
          },
          [](caf::error& e) { FAIL() << caf::to_string(e); });
    }
    return want;
  }

  // Generations `ids` from `worker` to their ends: tokens, log-probs and the versions they came
  // with. (One poll may carry several generations' events.)
  struct output {
    std::vector<int32_t> tokens;
    std::vector<float> logprobs;
    std::set<uint64_t> versions;
  };
  std::map<uint64_t, output> collect(const actor::inference_worker_actor& worker,
                                     std::set<uint64_t> ids) {
    std::map<uint64_t, output> outs;
    while (!ids.empty()) {
      self_->request(worker, 20s, actor::poll_atom_v)
          .receive(
              [&](actor::worker_report& r) {
                for (const auto& e : r.events) {
                  output& out = outs[e.id];
                  out.tokens.insert(out.tokens.end(), e.tokens.begin(), e.tokens.end());
                  out.logprobs.insert(out.logprobs.end(), e.logprobs.begin(), e.logprobs.end());
                  if (!e.tokens.empty()) out.versions.insert(e.weights_version);
                  if (e.finished) ids.erase(e.id);
                }
              },
              [&](caf::error& e) {
                ADD_FAILURE() << caf::to_string(e);
                ids.clear();
              });
    }
    return outs;
  }

  void generate(const actor::inference_worker_actor& worker, uint64_t id, int max_tokens) {
    actor::generation_request r;
    r.id = id;
    r.prompt = {'1', ',', '2', ':'};
    r.temperature = 0;
    r.max_tokens = max_tokens;
    self_->send(worker, actor::generate_atom_v, r);
  }

  std::unique_ptr<caf::actor_system_config> cfg_;
  caf::actor_system system_;
  metrics::registry metrics_;
  std::shared_ptr<comm::memory_store> store_;
  caf::scoped_actor self_;
};

// The invariant: after a sync every rollout worker holds the policy's bytes (same checksum), and
// its log-probs of what it generates are the policy's for the same tokens, bit for bit (the CPU
// kernels are batch-invariant: a row's arithmetic does not depend on the rows beside it).
TEST_F(RolloutSyncTest, AfterASyncTheRolloutGeneratesWithThePolicysWeights) {
  auto sender = policy();
  std::vector<actor::inference_worker_actor> workers = {rollout(0), rollout(1)};
  const std::string want = sync_all(sender, workers, 1);
  ASSERT_FALSE(want.empty());

  generate(workers[1], 7, 20);
  const output out = collect(workers[1], {7})[7];
  ASSERT_EQ(out.tokens.size(), 20u);
  EXPECT_EQ(out.versions, std::set<uint64_t>{1});

  // The policy's log-probs of the same sequence (greedy: temperature 1).
  actor::rl_batch b;
  b.batch = 1;
  b.ctx = 4 + 20;
  b.tokens = {'1', ',', '2', ':'};
  b.tokens.insert(b.tokens.end(), out.tokens.begin(), out.tokens.end());
  b.targets.assign(b.ctx, -1);
  for (int t = 3; t + 1 < b.ctx; ++t)
    b.targets[t] = b.tokens[t + 1];
  std::vector<float> policy_log_probs;
  self_->request(sender, 30s, actor::log_probs_atom_v, b)
      .receive([&](std::vector<float>& lp) { policy_log_probs = std::move(lp); },
               [](caf::error& e) { FAIL() << caf::to_string(e); });
  ASSERT_EQ(policy_log_probs.size(), 24u);
  double max_diff = 0;
  for (int k = 0; k < 19; ++k)  // the last token has no target inside the window
    max_diff = std::max<double>(max_diff, std::abs(out.logprobs[k] - policy_log_probs[3 + k]));
  EXPECT_EQ(max_diff, 0.0);
  for (const auto& w : workers)
    self_->send_exit(w, caf::exit_reason::user_shutdown);
  self_->send_exit(sender, caf::exit_reason::user_shutdown);
}

// A sync that arrives while a request runs: the request ends on the old weights (version 0);
// one that arrives after the sync waits and runs on the new ones (version 1).
TEST_F(RolloutSyncTest, ASwapWaitsForTheRequestsRunningOnTheOldWeights) {
  auto sender = policy();
  auto worker = rollout(0);
  generate(worker, 1, 30);  // queued before the sync: the engine is busy when it arrives
  auto sent = self_->request(sender, 30s, actor::sync_atom_v, round(1, 0, 2));
  auto ack = self_->request(worker, 30s, actor::sync_atom_v, round(1, 1, 2));
  generate(worker, 2, 5);  // arrives while the swap waits
  auto outs = collect(worker, {1, 2});
  const output& old_weights = outs[1];
  const output& new_weights = outs[2];
  EXPECT_EQ(old_weights.versions, std::set<uint64_t>{0});
  EXPECT_EQ(new_weights.versions, std::set<uint64_t>{1});
  EXPECT_EQ(new_weights.tokens.size(), 5u);
  sent.receive([](actor::weights_ack&) {}, [](caf::error& e) { FAIL() << caf::to_string(e); });
  ack.receive([](actor::weights_ack& a) { EXPECT_EQ(a.version, 1u); },
              [](caf::error& e) { FAIL() << caf::to_string(e); });
  self_->send_exit(worker, caf::exit_reason::user_shutdown);
  self_->send_exit(sender, caf::exit_reason::user_shutdown);
}

// An RL step's requests go out right behind its sync (min_weights_version): one that arrives
// before the weights it waits for is held, then runs on them alone, and the worker's
// acknowledgement says when it swapped them in.
TEST_F(RolloutSyncTest, ARequestForNewerWeightsWaitsForThem) {
  auto sender = policy();
  auto worker = rollout(0);
  actor::generation_request r;
  r.id = 4;
  r.prompt = {'3', ',', '1', ':'};
  r.max_tokens = 6;
  r.min_weights_version = 1;
  auto added = self_->request(worker, 30s, actor::generate_atom_v, r);  // before the sync
  auto sent = self_->request(sender, 30s, actor::sync_atom_v, round(1, 0, 2));
  auto ack = self_->request(worker, 30s, actor::sync_atom_v, round(1, 1, 2));
  added.receive([](caf::ok_atom) {}, [](caf::error& e) { FAIL() << caf::to_string(e); });
  const output out = collect(worker, {4})[4];
  EXPECT_EQ(out.tokens.size(), 6u);
  EXPECT_EQ(out.versions, std::set<uint64_t>{1}) << "not a token on the spawned weights";
  sent.receive([](actor::weights_ack&) {}, [](caf::error& e) { FAIL() << caf::to_string(e); });
  ack.receive(
      [](actor::weights_ack& a) {
        EXPECT_EQ(a.version, 1u);
        EXPECT_GT(a.swap_s, 0.0) << "the receive took some time";
      },
      [](caf::error& e) { FAIL() << caf::to_string(e); });
  self_->send_exit(worker, caf::exit_reason::user_shutdown);
  self_->send_exit(sender, caf::exit_reason::user_shutdown);
}

// A worker that reads the sender's clock (this host: the round's clock domain is its own) times
// its swap from the round's sending; one that does not (another host's domain) from the round's
// arrival. Each round here says it left 100 s ago, far more than any wait of this test.
TEST_F(RolloutSyncTest, TheSwapIsTimedFromTheRoundsSendingOnTheSendersClock) {
  auto sender = policy();
  auto worker = rollout(0);
  const int64_t long_ago = steady_ns(std::chrono::steady_clock::now() - 100s);
  const auto swap_s = [&](uint64_t version, const std::string& domain) {
    actor::weight_sync_round r = round(version, 1, 2);
    r.sent_at_ns = long_ago;
    r.clock_domain = domain;
    actor::weight_sync_round s = round(version, 0, 2);
    auto sent = self_->request(sender, 30s, actor::sync_atom_v, s);
    double out = -1;
    self_->request(worker, 30s, actor::sync_atom_v, r)
        .receive([&](actor::weights_ack& a) { out = a.swap_s; },
                 [](caf::error& e) { FAIL() << caf::to_string(e); });
    sent.receive([](actor::weights_ack&) {}, [](caf::error& e) { FAIL() << caf::to_string(e); });
    return out;
  };
  ASSERT_FALSE(steady_clock_domain().empty()) << "/proc/sys/kernel/random/boot_id is readable";
  EXPECT_GE(swap_s(1, steady_clock_domain()), 100.0);
  const double elsewhere = swap_s(2, "another-host+0.0");
  EXPECT_GE(elsewhere, 0.0);
  EXPECT_LT(elsewhere, 100.0);
  self_->send_exit(worker, caf::exit_reason::user_shutdown);
  self_->send_exit(sender, caf::exit_reason::user_shutdown);
}

// The rollout changes between syncs (a worker lost, another joined): each new epoch forms the
// group anew with its members, and a joiner holds the policy's weights after its first round.
TEST_F(RolloutSyncTest, ANewEpochFormsTheGroupWithItsMembers) {
  auto sender = policy();
  auto first = rollout(0), joiner = rollout(1);
  EXPECT_FALSE(sync_all(sender, {first}, 1, 1).empty());
  EXPECT_FALSE(sync_all(sender, {joiner, first}, 2, 2).empty());  // the joiner takes rank 1
  for (const auto& w : {first, joiner})
    self_->send_exit(w, caf::exit_reason::user_shutdown);
  self_->send_exit(sender, caf::exit_reason::user_shutdown);
}

// A rollout worker whose sender never comes fails its sync after the group's timeout with the
// reason, and a serving worker (no sync group) refuses a sync.
TEST_F(RolloutSyncTest, AStuckOrImpossibleSyncIsAnErrorNotAHang) {
  weight_sync_spec lonely = sync_spec();
  lonely.group.timeout = 300ms;
  auto model = std::make_shared<served_model>();
  model->layout = std::make_unique<models::decoder_layout>(rollout_model,
                                                           models::layer_range::all(rollout_model));
  model->params.resize(model->layout->total());
  auto worker = *spawn_inference_worker(system_, metrics_, "rollout/0", model,
                                        {.scheduler = {.ctx = rollout_model.ctx}}, {}, 20s,
                                        rollout_sync{store_, lonely});
  self_->request(worker, 30s, actor::sync_atom_v, round(1, 1, 2))
      .receive([](actor::weights_ack&) { FAIL() << "no sender, yet synced"; },
               [](caf::error& e) {
                 EXPECT_EQ(actor::to_status(e).code(), absl::StatusCode::kDeadlineExceeded)
                     << caf::to_string(e);
               });
  auto serving = *spawn_inference_worker(system_, metrics_, "worker/0", model,
                                         {.scheduler = {.ctx = rollout_model.ctx}});
  self_->request(serving, 30s, actor::sync_atom_v, round(1, 1, 2))
      .receive([](actor::weights_ack&) { FAIL() << "a serving worker synced"; },
               [](caf::error& e) {
                 EXPECT_NE(actor::to_status(e).message().find("not an RL rollout worker"),
                           std::string_view::npos);
               });
  actor::generation_request waits;  // for weights a serving worker never receives
  waits.id = 9;
  waits.prompt = {'1'};
  waits.min_weights_version = 2;
  self_->request(serving, 30s, actor::generate_atom_v, waits)
      .receive([](caf::ok_atom) { FAIL() << "a serving worker took a request for version 2"; },
               [](caf::error& e) {
                 const std::string why(actor::to_status(e).message());
                 EXPECT_NE(why.find("request 9 waits for weights version 2"), std::string::npos)
                     << why;
               });
  self_->send_exit(worker, caf::exit_reason::user_shutdown);
  self_->send_exit(serving, caf::exit_reason::user_shutdown);
}

}  // namespace
}  // namespace troupe::actors

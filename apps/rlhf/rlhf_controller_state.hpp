#pragma once

// The RLHF controller actor's state and the parts of it shared by its two files: the roles and
// the run's outputs (rlhf_driver_actor.cpp), and the rollout workers, their generations and the
// weight sync (rlhf_rollout_control.cpp). Internal to app: rlhf.

#include <chrono>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "actors/trainer_actor.hpp"
#include "apps/rlhf/rlhf_driver.hpp"
#include "apps/rlhf/rlhf_options.hpp"
#include "apps/rlhf/rollout_pool.hpp"
#include "models/decoder/decoder_config.hpp"
#include "runtime/actor/interfaces.hpp"
#include "runtime/actor/role_actor.hpp"
#include "runtime/cluster/job_publisher.hpp"
#include "runtime/metrics/registry.hpp"
#include "runtime/run/event_log.hpp"
#include "runtime/run/line_chart.hpp"
#include "runtime/run/row_alerts.hpp"

namespace troupe::apps::rlhf::control {

using clock = std::chrono::steady_clock;
using command = rlhf_driver::command;

// The generation in flight: every request's output so far, by request index.
struct generation {
  std::map<uint64_t, size_t> index;                        // unfinished request id -> index
  std::map<uint64_t, actor::generation_request> requests;  // by id: a lost worker's go again
  std::vector<actor::generation_event> outputs;
  std::set<std::string> polling;  // the workers asked for events now
};

// The weight sync in flight: its answers, and the first error among them.
struct sync_round {
  uint64_t id = 0;
  uint64_t version = 0;
  size_t answers = 0, expected = 0;
  bool active = false;
  absl::Status failure;
  clock::time_point failed_at{};
  std::string sender;  // the policy rank that sends
};

// The controller with its own timer (a failure waiting for the loss that explains it).
using driver_actor = actor::app_actor::extend<caf::reacts_to<actor::wake_atom>>;

struct controller_state {
  rlhf_options options;
  models::decoder_config model;
  // model.path: the Hugging Face model's directory (the policy's first weights unless init_from
  // names others); empty for troupe's GPT. How the task's text meets the model.
  std::string model_dir;
  tasks::task_codec codec;
  run::event_log* events = nullptr;
  metrics::registry* registry = nullptr;  // the process's: each metrics row's figures as gauges
  run::row_alerts alerts;  // warnings about the rows: NaN loss, throughput drop, collapses
  std::string run_dir;
  // The policy's and the critic's (GAE only) ranks by actor name; the logic's members(critic)
  // give their rank order.
  std::map<std::string, actor::trainer_actor> trainers;
  actor::trainer_actor reference;
  std::map<std::string, actor::inference_worker_actor> rollouts;  // by actor name
  std::unique_ptr<rollout_pool> pool;              // the rollout workers in the weight-sync group
  std::map<caf::actor_addr, std::string> watched;  // every role actor, monitored once running
  std::chrono::milliseconds loss_wait{10000};      // how long a failure waits for a loss
  std::chrono::milliseconds worker_wait{30000};    // below an elastic group's min
  std::optional<rl_elastic> policy_elastic, critic_elastic;
  actors::recovery_metrics recovery[2];  // the policy group's, the critic's
  cluster::job_publisher status;         // the elastic groups, for troupe status
  // Rollout workers whose error no loss explains yet, with when it came.
  std::map<std::string, std::pair<absl::Status, clock::time_point>> suspects;
  sync_round sync;
  // The newest checkpoint a relaunch can resume from: its step (-1: none) and the run
  // directory holding it (this run's, or the one this launch resumed from).
  int64_t last_checkpoint = -1;
  std::string last_checkpoint_run;
  actor::reward_actor reward;
  std::unique_ptr<rlhf_driver> logic;
  caf::typed_response_promise<actor::job_result> done;
  bool running = false;
  std::ofstream metrics, samples;
  run::chart_series score{"critic/score/mean", {}}, val{"validation (greedy)", {}},
      kl{"actor/reward_kl_penalty", {}}, length{"response_length/mean", {}};
  // With a learned reward: the task's rule's score beside the reward model's.
  run::chart_series true_score{"critic/true_score/mean (the task's rule)", {}};
  bool learned_reward = false;  // roles.reward.impl is reward_model
  generation gen;
  std::vector<actor::checkpoint_shard> shards;
  uint64_t save_round = 0;  // the save the shards are of
  std::string init_dir;     // the reference's checkpoint, when a warm-up made one
  clock::time_point last_progress{};
};

using self_ptr = actor::role_pointer<driver_actor, controller_state>;

/// Carries out the logic's commands, in order, while the run is on.
void execute(self_ptr self, std::vector<command> commands);
/// Ends the run with `result` (once).
void complete(self_ptr self, actor::job_result result);
/// An error from role `who` fails the run, naming it.
void on_error(self_ptr self, const std::string& who, const caf::error& e);
/// "role/index".
[[nodiscard]] std::string name_of(const char* role, size_t index);
/// The policy's ranks (the critic's with `critic`) in rank order: name and handle.
[[nodiscard]] std::vector<std::pair<std::string, actor::trainer_actor>> ranks_of(self_ptr self,
                                                                                 bool critic);

/// The rollout side (rlhf_rollout_control.cpp): spreads a generation's requests over the
/// rollout workers and collects their outputs; runs a weight sync round; takes a lost role
/// (a rollout worker's requests go to the others; a training role ends the run); and the timer
/// that fails a rollout error no loss explained.
void generate(self_ptr self, std::vector<actor::generation_request> requests);
/// `sent`: the sync's sending on the driver's clock (rlhf_driver::sync_all).
void sync(self_ptr self, uint64_t version, clock::time_point sent);
void on_lost(self_ptr self, const std::string& who, const std::string& why);
void on_wake(self_ptr self);

}  // namespace troupe::apps::rlhf::control

#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "apps/rlhf/kl_controller.hpp"
#include "apps/rlhf/rollout_batch.hpp"
#include "nlohmann/json.hpp"
#include "runtime/actor/message_types.hpp"
#include "runtime/run/driver_commands.hpp"
#include "tasks/task_codec.hpp"

namespace troupe::apps::rlhf {

/// An elastic RL trainer role's world (roles.policy.elastic, roles.critic.elastic): its ranks are
/// its members alive, within [min, max].
struct rl_elastic {
  int min = 1;
  int max = 1;
};

/// The shape of an RLHF run, as the controller needs it.
struct rlhf_schedule {
  int steps = 1;               ///< RL steps (trainer.total_training_steps)
  int warmup_steps = 0;        ///< format warm-up steps of the policy before RL
  int prompts = 8;             ///< prompts per step (data.train_batch_size)
  int n = 4;                   ///< responses per prompt (rollout.n)
  int mini_batch_prompts = 8;  ///< prompts per optimizer step (actor.ppo_mini_batch_size)
  int ppo_epochs = 1;
  int critic_mini_batch_prompts = 0;  ///< the critic's (critic.ppo_mini_batch_size); 0: as above
  int critic_ppo_epochs = 0;          ///< the critic's (critic.ppo_epochs); 0: as above
  int policy_ranks = 1;               ///< a fixed group's ranks; an elastic one's are its members
  int critic_ranks = 0;               ///< the critic's ranks (GAE); 0: no critic
  std::optional<rl_elastic> policy_elastic, critic_elastic;
  /// Below an elastic group's min, how long to wait for a joiner before the run fails.
  std::chrono::milliseconds worker_wait{30000};
  /// After a rank of an elastic group failed, how long to wait for the loss that explains it (a
  /// collective fails before the heartbeats declare its peer dead) before the run fails.
  std::chrono::milliseconds loss_wait{10000};
  int critic_warmup = 0;     ///< the policy is updated from RL step critic_warmup on (1-based)
  int max_len = 64;          ///< the model's context: prompt + response fit in it
  int response_length = 16;  ///< tokens per response at most
  int test_freq = 0;         ///< greedy validation every this many steps (and after the last)
  int val_prompts = 32;      ///< prompts of the validation set
  int samples_per_step = 4;  ///< rows of samples.jsonl per step
  int save_freq = 0;         ///< a checkpoint every this many steps and after the last; 0: none
  int stop_after = 0;        ///< end this launch after this step (0: after `steps`)
  /// 0: synchronous; 1 or more: the next step's generation overlaps this step's update.
  int max_staleness = 0;
  /// The rollout's log-probs are the old log-probs (veRL's bypass mode); false: the policy
  /// ranks recompute them.
  bool bypass_old_log_prob = false;
  uint64_t seed = 1;
  std::string task = "digit_completion";  ///< names the validation score (veRL's data source)
  /// The checkpoint (a directory) the policy, the reference and the critic's trunk start from;
  /// empty: the seed's weights.
  std::string init_from;
  float temperature = 1.0f;
  int top_k = 0;
  float top_p = 1.0f;
  std::string end_string = "\n";  ///< the end of a response (a stop string, trained on)
  kernels::loss_agg_mode loss_agg_mode = kernels::loss_agg_mode::token_mean;

  /// The metric of the greedy validation's mean score: "val-core/<task>/reward/mean@1".
  [[nodiscard]] std::string val_metric() const { return "val-core/" + task + "/reward/mean@1"; }
  /// With a learned reward, the validation's mean score by the task's rule:
  /// "val-core/<task>/true_reward/mean@1".
  [[nodiscard]] std::string val_true_metric() const {
    return "val-core/" + task + "/true_reward/mean@1";
  }

  /// Optimizer steps of the policy (or the critic) per RL step: ppo_epochs * prompts /
  /// mini_batch_prompts (the critic's own).
  [[nodiscard]] int updates_per_step(bool critic = false) const {
    return epochs(critic) * prompts / mini_batch(critic);
  }
  /// Prompts per optimizer step of the policy or the critic.
  [[nodiscard]] int mini_batch(bool critic) const {
    return critic && critic_mini_batch_prompts > 0 ? critic_mini_batch_prompts : mini_batch_prompts;
  }
  /// Passes over each batch of the policy or the critic.
  [[nodiscard]] int epochs(bool critic) const {
    return critic && critic_ppo_epochs > 0 ? critic_ppo_epochs : ppo_epochs;
  }
  /// Whether the policy is updated at 1-based RL step `step`: veRL's
  /// `critic_warmup <= global_steps`.
  [[nodiscard]] bool updates_actor_at(int64_t step) const { return critic_warmup <= step; }
  /// The RL step this launch ends after.
  [[nodiscard]] int end() const {
    return stop_after > 0 && stop_after < steps ? stop_after : steps;
  }
};

/// The task: its prompts by index (training and validation streams) and the reward role's
/// inputs. (The reward itself is the reward role's.)
struct rl_task {
  std::function<std::string(uint64_t seed, int64_t index)> prompt;
  /// With a learned reward (roles.reward.impl reward_model): the task's rule, scored beside it
  /// and logged as critic/true_score/* and each sample's true_score (the "true" reward of Gao et
  /// al., 2022, against which the learned one is a proxy). Empty: the reward is the rule.
  std::function<double(std::string_view prompt, std::string_view response, bool ended)> true_score;
  /// How the prompts become tokens and the responses end and read (troupe's byte GPT's, its
  /// responses ending with "\n", by default).
  tasks::task_codec codec;
};

/// Generation requests, each with the task's prompt text it was made from (what the reward
/// scores; a chat model's request holds the template's rendering of it).
struct rollout_requests {
  std::vector<actor::generation_request> requests;
  std::vector<std::string> prompts;
};

/// The RLHF app's single controller (veRL's driver), without CAF. Each event returns the
/// commands the actor carries out, in order. A step:
///
///   sync weights (policy rank 0 -> every rollout worker; each acknowledges version and checksum)
///   -> [validation due] greedy generation of the validation prompts -> score -> val metrics
///   -> generate n responses per prompt -> score (reward role)
///      (without validation, the requests go out right behind the sync: a worker starts them as
///      it swaps the new weights in, and their outputs wait for every checksum to compare)
///   -> old log-probs (policy ranks), reference log-probs (reference) and, with a critic, values
///      (critic ranks), in parallel
///   -> advantages -> [critic] ppo_epochs x mini-batches, one optimizer step each on every critic
///      rank -> [from step critic_warmup] the same on every policy rank
///   -> metrics row and samples -> next step, or the end
///
/// One step off policy (max_staleness > 0): with the advantages, the next step's generation
/// starts beside this step's updates, on the weights this step generated with; the step ends
/// when both have, and the next one scores those outputs after its sync (staleness 1).
///
/// After a step's metrics, when a checkpoint is due: every policy and critic rank's state,
/// committed with what the controller needs to continue (step, prompt cursor, policy version, KL
/// coefficient).
///
/// Before the first step, from a checkpoint (init_from): every policy rank loads its weights.
/// Then, with a warm-up: warm-up steps on every policy rank and a checkpoint of them (the run's
/// initial policy). The reference and the critic load the initial policy (the critic its trunk):
/// the warm-up's checkpoint, or else init_from's. Any error fails the run.
class rlhf_driver {
 public:
  using clock = std::chrono::steady_clock;

  /// Every policy rank loads the weights (not the optimizer's state) of the checkpoint `dir`;
  /// each answers on_policy_loaded.
  struct load_policy {
    std::string dir;
  };
  struct warmup_step_all {};
  /// Every policy rank checkpoints its state at optimizer step `step`; the actor commits it in
  /// the initial-policy root and answers on_initial_saved.
  struct save_initial {
    int64_t step;
  };
  /// The reference and every critic rank load the initial policy; each answers
  /// on_initial_loaded.
  struct load_initial {
    std::string dir;
  };
  /// With `requests_follow`, the step's requests follow the sync: the actor asks
  /// requests_ahead() for them once the sync's messages have left. `sent`: the sync's sending,
  /// on the driver's clock, from which its generation is timed (the rounds carry it, so that a
  /// rollout worker that reads the same clock times its swap from it).
  struct sync_all {
    uint64_t version;
    bool requests_follow = false;
    clock::time_point sent{};
  };
  struct generate_all {
    std::vector<actor::generation_request> requests;
  };
  struct score_all {
    std::vector<std::string> prompts;
    std::vector<std::string> responses;
    std::vector<bool> ended;
  };
  /// Policy rank i gives log-probs of policy[i] (none when the rollout's are the old ones); the
  /// reference of reference (rows in order); critic rank i values of critic[i] (none without a
  /// critic).
  struct log_probs_all {
    std::vector<actor::rl_batch> policy;
    actor::rl_batch reference;
    std::vector<actor::rl_batch> critic;
  };
  /// One optimizer step: policy rank i (the critic's with `critic`) on parts[i].
  struct update_all {
    std::vector<actor::rl_batch> parts;
    bool critic = false;
  };
  /// Every policy and critic rank checkpoints its state as RL step `step`; the actor commits it
  /// with `meta` and answers on_checkpoint_saved.
  struct save_checkpoint {
    int64_t step;
    nlohmann::json meta;
    uint64_t round = 0;  ///< on_checkpoint_saved's
  };
  struct metrics_row {
    nlohmann::json row;
  };
  struct sample_rows {
    std::vector<nlohmann::json> rows;
  };
  struct finish {
    nlohmann::json summary;
  };
  struct fail {
    absl::Status why;
  };
  /// Elastic: every member of the policy's group (the critic's with `critic`) forms generation
  /// `generation`, members(critic)[r] as rank r, with the state of `from`: the members' trainers
  /// of generation `basis` at optimizer step `steps`, the seed's, or the checkpoint `checkpoint`
  /// (a resume). Each answers on_regrouped.
  struct regroup_all {
    bool critic;
    uint64_t generation;
    actor::group_change::source from;
    uint64_t basis;
    int64_t steps;
    std::string checkpoint;
  };
  /// Elastic: the group's members give up generations older than `generation` (a collective
  /// blocked on a lost member is released).
  struct abort_all {
    bool critic;
    uint64_t generation;
  };
  /// An event for the run's log (rank_lost, group_rebuilt, rank_joined, step_redone, ...), and
  /// a call of on_timer() after a while.
  using note = run::note;
  using wake_after = run::wake_after;
  using command =
      std::variant<load_policy, warmup_step_all, save_initial, load_initial, sync_all, generate_all,
                   score_all, log_probs_all, update_all, save_checkpoint, metrics_row, sample_rows,
                   finish, fail, regroup_all, abort_all, note, wake_after>;

  /// Where a resumed run continues: what save_checkpoint's meta holds.
  struct resume_point {
    int64_t step = 0;
    int64_t cursor = 0;
    uint64_t version = 0;
    double kl_coef = 0;
    /// The policy's and the critic's optimizer steps; -1 in a checkpoint that does not say.
    int64_t optimizer_steps[2] = {-1, -1};
  };
  /// The resume point in a checkpoint's meta; DATA_LOSS naming the field when one is missing.
  [[nodiscard]] static absl::StatusOr<resume_point> resume_point_of(const nlohmann::json& meta);

  rlhf_driver(rlhf_schedule schedule, rl_algorithm algorithm, kl_controller kl, rl_task task,
              std::function<clock::time_point()> now);

  std::vector<command> start();
  /// start() for a run restored from a checkpoint (the roles restored first): no warm-up, and
  /// the step, prompts, version and KL coefficient continue from `at`. An elastic group's first
  /// generation restores the checkpoint `dir` as it forms.
  std::vector<command> resume(const resume_point& at, const std::string& dir = "");
  /// Every rank's part of save round `round` is committed (rounds count saves, a redone one
  /// included; 0: the newest).
  std::vector<command> on_checkpoint_saved(uint64_t round = 0);
  std::vector<command> on_policy_loaded();
  std::vector<command> on_warmup_step(int rank, const actor::step_report& report);
  std::vector<command> on_initial_saved(const std::string& dir);
  std::vector<command> on_initial_loaded();
  /// `who` names the participant ("policy/0", "rollout/1") for errors.
  std::vector<command> on_synced(const std::string& who, const actor::weights_ack& ack,
                                 bool sender);
  /// The sync in flight lost a participant (a rollout worker): it is asked again of the
  /// participants there are now (set_sync_participants), the acknowledgements so far dropped.
  std::vector<command> resync();
  /// After a sync_all with requests_follow: the step's requests (a generate_all), each waiting in
  /// the rollout for the sync's version (min_weights_version).
  std::vector<command> requests_ahead();
  /// A rollout worker waits to join the weight-sync group at the next step's sync: that step's
  /// requests then go out with the sync, so that the joiner gets its share of them.
  void on_rollout_joining() { rollout_joining_ = true; }
  /// Every request's whole output, in request order.
  std::vector<command> on_generated(std::vector<actor::generation_event> outputs);
  std::vector<command> on_scored(std::vector<double> scores);
  /// Answers of the ranks asked in `generation` of their group (a fixed group's is 0).
  std::vector<command> on_log_probs(bool reference, int rank, const std::vector<float>& values,
                                    uint64_t generation = 0);
  /// Critic rank `rank`'s values of its rows.
  std::vector<command> on_values(int rank, const std::vector<float>& values,
                                 uint64_t generation = 0);
  /// Policy (or critic) rank `rank`'s optimizer step.
  std::vector<command> on_updated(int rank, const actor::rl_step_report& report,
                                  bool critic = false, uint64_t generation = 0);
  std::vector<command> on_error(const absl::Status& error);

  /// Elastic groups (rlhf_driver_elastic.cpp). Before start(): the group's first members, in
  /// rank order (a fixed group's are "policy/0", ... by default).
  void set_members(bool critic, std::vector<std::string> names);
  /// A member's request of `generation` failed: the run fails, unless a loss explains it within
  /// loss_wait (a fixed group's error fails the run at once).
  std::vector<command> on_rank_error(bool critic, int rank, const absl::Status& error,
                                     uint64_t generation);
  /// A member answered its regroup with the optimizer step it continues from.
  std::vector<command> on_regrouped(bool critic, int rank, const absl::StatusOr<int64_t>& steps,
                                    uint64_t generation);
  /// A policy or critic trainer appeared (a worker joined) or is gone (its worker died).
  std::vector<command> on_joined(const std::string& name);
  std::vector<command> on_lost(const std::string& name, const std::string& why);
  std::vector<command> on_timer();
  /// The group's members in rank order, the generation they form, and whether it is elastic.
  [[nodiscard]] const std::vector<std::string>& members(bool critic) const {
    return groups_[critic].members;
  }
  [[nodiscard]] uint64_t generation(bool critic) const { return groups_[critic].generation; }
  [[nodiscard]] bool elastic(bool critic) const { return groups_[critic].elastic.has_value(); }

  [[nodiscard]] int64_t step() const { return step_; }
  [[nodiscard]] uint64_t version() const { return version_; }
  [[nodiscard]] double kl_coef() const { return kl_.value(); }
  [[nodiscard]] bool done() const { return phase_ == phase::finished; }
  [[nodiscard]] const rlhf_schedule& schedule() const { return schedule_; }
  /// The sampled generation requests of RL step `step` (1-based) of a run from its start: what
  /// that step asks of the rollout (bench/rlhf_bench's engine-alone baseline replays them).
  [[nodiscard]] std::vector<actor::generation_request> step_requests(int64_t step) const {
    return requests_for((step - 1) * schedule_.prompts, schedule_.prompts, schedule_.n, false,
                        schedule_.seed)
        .requests;
  }
  /// How many sync participants answer a sync (policy rank 0 and the rollout workers), set
  /// before each sync (a rollout worker may have joined or been lost).
  void set_sync_participants(int n) { sync_participants_ = n; }

 private:
  enum class phase {
    idle,
    loading_policy,
    warming_up,
    saving_initial,
    loading_reference,
    syncing,
    validating,
    validation_scoring,
    generating,
    scoring,
    log_probs,
    updating,
    saving_checkpoint,
    finished
  };
  std::vector<command> warm_up_or_begin();
  std::vector<command> begin_step();
  std::vector<command> after_sync();
  // Whether RL step `step` + 1 (1-based) starts with a validation.
  [[nodiscard]] bool validation_due(int64_t step) const;
  [[nodiscard]] bool validation_due() const { return validation_due(step_); }
  // The training generation follows the sync directly (no validation, no prefetched outputs):
  // its requests go out ahead of it (during the step before, or with the sync).
  [[nodiscard]] bool generates_after_sync() const;
  // Synchronous, once this step's log-probs are in: the next step's requests, sent while this
  // step updates.
  std::vector<command> next_step_requests();
  [[nodiscard]] bool sent_ahead() const { return !requests_ahead_.requests.empty(); }
  rollout_requests ahead_of(int64_t first_prompt) const;
  std::vector<command> generate();
  // on_generated, for outputs that arrived at `at`.
  std::vector<command> generated(std::vector<actor::generation_event> outputs,
                                 clock::time_point at);
  std::vector<command> after_log_probs();
  std::vector<command> start_updates();
  std::vector<command> next_update(bool critic);
  std::vector<command> end_step();
  std::vector<command> end_run();
  std::vector<command> failed(absl::Status why);

  // An RL trainer role's ranks: a fixed group (generation 0 throughout), or an elastic one whose
  // members change (rlhf_driver_elastic.cpp).
  enum class request { none, regroup, log_probs, update };
  struct trainer_group {
    bool critic = false;
    std::optional<rl_elastic> elastic;
    std::vector<std::string> members, joiners;
    uint64_t generation = 0;
    uint64_t formed = 0;  // the newest generation every member formed
    int64_t steps = 0;    // the optimizer steps of the state every member holds
    // The request in flight: who was asked in which generation, and what they answered.
    request asked = request::none;
    uint64_t asked_generation = 0;
    std::vector<std::string> asked_members;
    std::vector<bool> answered, ok;
    std::vector<actor::rl_step_report> reports;
    std::vector<int64_t> regrouped_steps;
    absl::Status failure;
    clock::time_point failed_at{}, lost_at{}, waiting_since{};
    bool lost_member = false;  // a member asked was lost before the request settled
    absl::Status stray;        // a failure outside a request (a checkpoint's part), unexplained
    clock::time_point stray_at{};
    bool recovering = false;  // a member was lost since the group was last whole
    bool below_min = false;   // waiting for a joiner since waiting_since
    // What runs once the group is formed at its generation.
    std::vector<std::function<std::vector<command>()>> waiting;
    [[nodiscard]] bool all_answered() const;
    [[nodiscard]] int size() const { return static_cast<int>(members.size()); }
  };
  [[nodiscard]] int ranks(bool critic) const { return groups_[critic].size(); }
  // `make` now when the group is formed at its generation with nothing in flight; else once it
  // is (a regroup started when none runs).
  std::vector<command> when_formed(trainer_group& g, std::function<std::vector<command>()> make);
  // Asks the group `what` of its members (make gives the commands), once it is formed.
  std::vector<command> ask_group(trainer_group& g, request what,
                                 std::function<std::vector<command>()> make);
  // Records rank `rank`'s answer of `generation`; false when it is not one awaited.
  bool take_answer(trainer_group& g, request what, int rank, uint64_t generation,
                   const absl::Status& status);
  // The request's answers are all in: nullopt when it completed on every member; else what to
  // do (wait for a loss, fail, or recover after one).
  std::optional<std::vector<command>> settle(trainer_group& g);
  std::vector<command> regroup(trainer_group& g);
  // The first generation of each elastic group, then `then` (the run's start or resume).
  std::vector<command> form_groups_then(std::function<std::vector<command>()> then);
  // Log-probs (the policy's) or values (the critic's) of the batch, split over the group.
  std::vector<command> ask_log_probs(bool critic);
  // The checkpoint of the step just ended, in a new save round.
  std::vector<command> save_again();
  std::vector<command> on_group_log_probs(bool critic, int rank, const std::vector<float>& values,
                                          uint64_t generation);
  [[nodiscard]] bool has_critic() const {
    return schedule_.critic_ranks > 0 || schedule_.critic_elastic.has_value();
  }
  std::vector<command> after_regroup(trainer_group& g);
  // What waited for the group, while no request of it is in flight.
  std::vector<command> run_waiting(trainer_group& g);
  std::vector<command> admit_joiners();
  // Where an elastic group's first generation takes its state: the checkpoint a resume names.
  std::string resume_dir_;
  std::function<std::vector<command>()> begin_;  // the run, once the first groups are formed
  std::string sync_sender_;                      // the policy member the sync in flight sends
  bool log_probs_done_[2] = {false, false};      // the policy's log-probs, the critic's values
  bool resave_pending_ = false;                  // a checkpoint waits for a group to form
  trainer_group groups_[2];                      // [0] the policy's, [1] the critic's
  bool reference_done_ = false;
  uint64_t save_round_ = 0;
  rollout_requests requests_for(int64_t first_prompt, int prompts, int n, bool greedy,
                                uint64_t stream) const;
  // OK when `outputs` holds each of `requests` once, ended, in order, with a log-prob per
  // token and the end string in a response that ended with it.
  absl::Status check_outputs(const std::vector<actor::generation_request>& requests,
                             const std::vector<actor::generation_event>& outputs) const;
  double seconds_since(clock::time_point t) const;

  rlhf_schedule schedule_;
  rl_algorithm algorithm_;
  kl_controller kl_;
  rl_task task_;
  std::function<clock::time_point()> now_;
  phase phase_ = phase::idle;
  int answers_ = 0;
  int sync_participants_ = 2;
  int64_t step_ = 0;      // RL steps done
  int64_t cursor_ = 0;    // the next training prompt's index
  uint64_t version_ = 0;  // the policy version the rollout holds
  int64_t warmup_done_ = 0;
  std::string sender_checksum_;
  // Who acknowledged the version in sync with which checksum, in every round of it (a worker
  // done with a round that failed elsewhere holds those weights, and generates on them).
  std::vector<std::pair<std::string, std::string>> acks_;
  rollout_requests requests_;
  std::vector<actor::generation_event> outputs_;
  // The step's requests, sent ahead of its generation (during the step before, or with its
  // sync) and not yet generating; outputs that arrive before the sync's last acknowledgement
  // wait for it.
  rollout_requests requests_ahead_;
  bool rollout_joining_ = false;  // a rollout worker joins at the next sync
  clock::time_point sync_sent_{}, early_at_{};
  double rollout_swap_s_ = -1;  // the earliest rollout worker's swap, after the sync's sending
  std::optional<std::vector<actor::generation_event>> early_outputs_;
  std::optional<rollout_batch> batch_;
  // One-step-off-policy (max_staleness > 0): the next step's generation, started once this
  // step's log-probs are in and run while it updates; its outputs wait for the next step.
  bool prefetching_ = false, waiting_for_prefetch_ = false;
  rollout_requests prefetch_requests_;
  std::optional<std::vector<actor::generation_event>> prefetched_;
  clock::time_point prefetch_started_{}, wait_started_{};
  double prefetch_s_ = 0;
  std::vector<double> scores_;
  std::vector<double> true_scores_;  // the task's rule's, with a learned reward
  // The policy's and the critic's updates of a step run at once, each its optimizer steps in
  // turn: [0] the policy's, [1] the critic's.
  struct update_track {
    bool active = false;
    int index = 0;    // optimizer steps done
    int answers = 0;  // ranks done with the current one
    std::vector<actor::rl_step_report> reports;
  };
  update_track tracks_[2];
  nlohmann::json row_;  // the step's metrics so far
  double best_score_ = -1, first_score_ = -1, last_score_ = -1, last_val_ = -1;
  clock::time_point started_{}, step_started_{}, phase_started_{};
};

}  // namespace troupe::apps::rlhf

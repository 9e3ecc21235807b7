#pragma once

#include <string>
#include <vector>

#include "actors/inference_engine.hpp"
#include "actors/policy_objective.hpp"
#include "actors/trainer.hpp"
#include "apps/rlhf/kl_controller.hpp"
#include "apps/rlhf/rlhf_driver.hpp"
#include "runtime/config/schema.hpp"
#include "tasks/task_codec.hpp"
#include "tasks/text_task.hpp"

namespace troupe::apps::rlhf {

// The shipped tasks (tasks/), as the app names them.
using tasks::make_task;
using tasks::max_response_bytes;
using tasks::task_names;
using tasks::task_schema;
using tasks::task_setting_error;
using tasks::task_setting_of;
using tasks::task_setting_problem;
using tasks::task_spec;
using tasks::text_task;
using tasks::warmup_description;

// The `rlhf:` section. Keys are veRL's where the concept is the same (docs/config.md maps them).

/// `rlhf.data`.
struct data_spec {
  int train_batch_size = 16;  ///< prompts per RL step
  int seed = 1;               ///< the prompt stream and every sampling seed
};

/// `rlhf.actor`: the policy's update (veRL's actor_rollout_ref.actor).
/// `rlhf.actor.policy_loss` (veRL's actor.policy_loss).
struct policy_loss_spec {
  std::string loss_mode = "vanilla";  ///< or "gspo": the response's ratio
};

struct actor_spec {
  int ppo_mini_batch_size = 8;  ///< prompts per optimizer step (times rollout.n responses)
  int ppo_epochs = 1;
  double clip_ratio = 0.2;
  double clip_ratio_low = -1;   ///< -1: clip_ratio
  double clip_ratio_high = -1;  ///< -1: clip_ratio
  double clip_ratio_c = 3.0;    ///< the dual clip
  double entropy_coeff = 0.0;
  bool use_kl_loss = false;
  double kl_loss_coef = 0.001;
  std::string kl_loss_type = "low_var_kl";
  std::string loss_agg_mode = "token-mean";
  policy_loss_spec policy_loss;
  double lr = 1e-4;
  double weight_decay = 0.01;
  double grad_clip = 1.0;
  int dp = 1;           ///< policy ranks: roles.policy.count
  int micro_batch = 0;  ///< sequences per forward/backward pass on a rank; 0: its whole share
  int threads = 0;      ///< cores per policy rank; 0: this machine's cores / dp
};

/// `rlhf.critic` (veRL's critic): the value model of GAE, the policy's trunk with a value head.
/// Its mini-batches and epochs are the actor's.
struct critic_spec {
  double lr = 1e-3;
  double weight_decay = 0.01;
  double grad_clip = 1.0;
  double cliprange_value = 0.5;
  int ppo_mini_batch_size = 0;  ///< prompts per critic optimizer step; 0: the actor's (veRL)
  int ppo_epochs = 0;           ///< passes over each batch; 0: the actor's (veRL)
  int dp = 1;                   ///< critic ranks: roles.critic.count
  int micro_batch = 0;  ///< sequences per forward/backward pass on a rank; 0: its whole share
  int threads = 0;      ///< cores per critic rank; 0: this machine's cores / dp

  bool operator==(const critic_spec&) const = default;
};

/// `rlhf.rollout` (veRL's actor_rollout_ref.rollout).
struct rollout_spec {
  int n = 4;  ///< responses per prompt
  double temperature = 1.0;
  int top_k = 0;
  double top_p = 1.0;
  int response_length = 0;  ///< tokens per response at most; 0: what the task needs
  int kv_blocks = 256;
  int max_batch_tokens = 256;
  int threads = 0;  ///< CPU threads per worker's engine; 0: this machine's cores / workers
};

/// `rlhf.algorithm.kl_ctrl`.
struct kl_ctrl_spec {
  std::string type = "fixed";
  double kl_coef = 0.001;
  double target_kl = 0.1;
  int horizon = 10000;
};

/// `rlhf.algorithm.rollout_correction` (veRL's).
struct rollout_correction_spec {
  /// The rollout's log-probs are the old log-probs; the policy does not recompute them.
  bool bypass_mode = true;
};

/// `rlhf.algorithm`.
struct algorithm_spec {
  std::string adv_estimator = "grpo";
  double gamma = 1.0;
  double lam = 1.0;
  bool norm_adv_by_std_in_grpo = true;
  bool use_kl_in_reward = false;
  std::string kl_penalty = "kl";
  kl_ctrl_spec kl_ctrl;
  rollout_correction_spec rollout_correction;
};

/// `rlhf.trainer` (veRL's trainer).
struct trainer_spec {
  int total_training_steps = 20;
  int test_freq = 0;  ///< greedy validation every this many steps and after the last; 0: none
  int val_prompts = 64;
  int samples_per_step = 4;  ///< rows of samples.jsonl per step
  int save_freq = 0;         ///< a checkpoint every this many steps and after the last; 0: none
  int max_actor_ckpt_to_keep = 3;
  int stop_after = 0;  ///< end this launch after this step; continue with --resume
  int critic_warmup =
      0;  ///< the policy is updated from this RL step on (1-based), the critic always
};

/// `rlhf.warmup`: the warm-up of the policy before RL, with the pretraining objective on text the
/// task generates: format-only examples (random numbers after each prompt) or the task's answers.
struct warmup_spec {
  int steps = 0;
  std::string text = "format";
  int batch = 16;
  double lr = 3e-3;
};

/// `rlhf.sync`: the weight sync to the rollout.
struct sync_spec {
  int bucket_mb = 32;
  int timeout_ms = 60000;  ///< forming the group and every broadcast
};

/// `rlhf.async`: how far generation may run ahead of the update.
struct async_spec {
  /// 0: synchronous (each step generates with the weights just synced; bit-exact on resume).
  /// 1 or more: one-step-off-policy, the next step's generation overlapping this step's update
  /// on the weights before it (its samples one version old, never more than this).
  int max_staleness = 0;
};

/// `rlhf.placement`: which roles share a process. Each group's actors of the same index run in
/// one worker process (veRL's colocated worker groups), e.g. [[policy, reference]].
struct placement_spec {
  std::vector<std::vector<std::string>> colocate;
};

struct rlhf_options {
  data_spec data;
  actor_spec actor;
  critic_spec critic;
  rollout_spec rollout;
  algorithm_spec algorithm;
  trainer_spec trainer;
  warmup_spec warmup;
  task_spec task;
  sync_spec sync;
  placement_spec placement;
  async_spec async;
  int seed = 1;  ///< the policy's initial weights
  /// A checkpoint to start from instead (a pretraining run directory, its checkpoints/, or one
  /// checkpoint): the policy's, the reference's and the critic trunk's weights.
  std::string init_from;
  /// A run directory (or checkpoint directory) to continue from; `troupe launch --resume` sets it.
  std::string resume;
};

[[nodiscard]] config::object_schema<rlhf_options> rlhf_schema();

/// The response length: rollout.response_length, or the task's longest answer in the tokens of
/// `codec`'s model (a chat model's with its template's framing of a reply and its end of turn).
[[nodiscard]] int response_length(const rlhf_options& o, const tasks::task_codec& codec = {});
[[nodiscard]] rlhf_schedule schedule_of(const rlhf_options& o, int ctx,
                                        const tasks::task_codec& codec = {});
[[nodiscard]] rl_algorithm algorithm_of(const rlhf_options& o);
[[nodiscard]] kl_controller kl_controller_of(const rlhf_options& o);
[[nodiscard]] actors::policy_objective objective_of(const rlhf_options& o);
/// The policy ranks' trainer: RL's constant learning rate, or the warm-up's for `warmup`.
[[nodiscard]] actors::trainer_options policy_trainer_options(const rlhf_options& o);
/// Whether the run has a critic: adv_estimator gae.
[[nodiscard]] bool uses_critic(const rlhf_options& o);
/// Prompts per critic optimizer step: critic.ppo_mini_batch_size, or the actor's.
[[nodiscard]] int critic_mini_batch_size(const rlhf_options& o);
/// The critic ranks' trainer (the policy's seed: the same initial trunk).
[[nodiscard]] actors::trainer_options critic_trainer_options(const rlhf_options& o);
[[nodiscard]] actors::value_objective critic_objective_of(const rlhf_options& o);
/// A rollout worker's engine for `model`: room for a whole step's sequences at once, and
/// rollout.threads threads (0: this machine's cores / `workers`, the rollout role's count).
[[nodiscard]] actors::inference_engine::options rollout_engine_options(
    const rlhf_options& o, const models::decoder_config& model, int workers);

}  // namespace troupe::apps::rlhf

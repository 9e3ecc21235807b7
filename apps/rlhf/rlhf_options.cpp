#include "apps/rlhf/rlhf_options.hpp"

#include <algorithm>
#include <thread>

namespace troupe::apps::rlhf {
namespace {

config::object_schema<data_spec> data_schema() {
  config::object_schema<data_spec> s;
  s.add("train_batch_size", &data_spec::train_batch_size)
      .range(1, 1 << 20)
      .help("prompts per RL step (veRL data.train_batch_size)");
  s.add("seed", &data_spec::seed).range(0, 1 << 30).help("the prompt stream and sampling seeds");
  return s;
}

// The keys of a trainer role's ranks (the policy's or the critic's): dp, micro_batch, threads.
template <class Spec>
void add_rank_keys(config::object_schema<Spec>& s, const std::string& role) {
  s.add("dp", &Spec::dp).range(1, 4096).help(role + " ranks; must equal roles." + role + ".count");
  s.add("micro_batch", &Spec::micro_batch)
      .range(0, 1 << 20)
      .help("sequences per forward/backward pass on a rank; 0 = its whole share");
  s.add("threads", &Spec::threads)
      .range(0, 1024)
      .help("cores per " + role + " rank; 0 = this machine's cores / dp");
}

config::object_schema<policy_loss_spec> policy_loss_schema() {
  config::object_schema<policy_loss_spec> s;
  s.add("loss_mode", &policy_loss_spec::loss_mode)
      .one_of({"vanilla", "gspo"})
      .help(
          "vanilla: PPO's loss of each token's ratio; gspo: of its response's ratio (the "
          "geometric mean of its tokens'), needing loss_agg_mode seq-mean-token-mean");
  return s;
}

config::object_schema<actor_spec> actor_schema() {
  config::object_schema<actor_spec> s;
  s.add("ppo_mini_batch_size", &actor_spec::ppo_mini_batch_size)
      .range(1, 1 << 20)
      .help("prompts per optimizer step; times rollout.n responses");
  s.add("ppo_epochs", &actor_spec::ppo_epochs).range(1, 1000).help("passes over each batch");
  s.add("clip_ratio", &actor_spec::clip_ratio).range(0.0, 10.0).help("PPO's clip range");
  s.add("clip_ratio_low", &actor_spec::clip_ratio_low)
      .range(-1.0, 10.0)
      .help("the ratio's floor is 1 - clip_ratio_low; -1 = clip_ratio");
  s.add("clip_ratio_high", &actor_spec::clip_ratio_high)
      .range(-1.0, 10.0)
      .help("the ratio's ceiling is 1 + clip_ratio_high; -1 = clip_ratio");
  s.add("clip_ratio_c", &actor_spec::clip_ratio_c)
      .range(1.0, 1000.0)
      .help("dual clip: with a negative advantage the loss is at most -A * clip_ratio_c");
  s.add("entropy_coeff", &actor_spec::entropy_coeff).range(0.0, 10.0).help("entropy bonus");
  s.add("use_kl_loss", &actor_spec::use_kl_loss).help("a KL-to-reference term in the loss");
  s.add("kl_loss_coef", &actor_spec::kl_loss_coef).range(0.0, 100.0).help("its coefficient");
  s.add("kl_loss_type", &actor_spec::kl_loss_type)
      .one_of({"kl", "abs", "mse", "low_var_kl", "k1", "k2", "k3"})
      .help("its estimator");
  s.add("loss_agg_mode", &actor_spec::loss_agg_mode)
      .one_of(
          {"token-mean", "seq-mean-token-sum", "seq-mean-token-mean", "seq-mean-token-sum-norm"})
      .help("how token losses become one number");
  s.add("policy_loss", &actor_spec::policy_loss, policy_loss_schema())
      .help("which ratio the clipped loss is of");
  s.add("lr", &actor_spec::lr).range(0.0, 10.0).help("the policy's learning rate (constant)");
  s.add("weight_decay", &actor_spec::weight_decay).range(0.0, 10.0).help("AdamW weight decay");
  s.add("grad_clip", &actor_spec::grad_clip).range(0.0, 1e6).help("0 disables clipping");
  add_rank_keys(s, "policy");
  return s;
}

config::object_schema<critic_spec> critic_schema() {
  config::object_schema<critic_spec> s;
  s.add("lr", &critic_spec::lr).range(0.0, 10.0).help("the critic's learning rate (constant)");
  s.add("weight_decay", &critic_spec::weight_decay).range(0.0, 10.0).help("AdamW weight decay");
  s.add("grad_clip", &critic_spec::grad_clip).range(0.0, 1e6).help("0 disables clipping");
  s.add("cliprange_value", &critic_spec::cliprange_value)
      .range(0.0, 1e6)
      .help("the value clip: predictions within the old values +- this");
  s.add("ppo_mini_batch_size", &critic_spec::ppo_mini_batch_size)
      .range(0, 1 << 20)
      .help("prompts per critic optimizer step (times rollout.n responses); 0: the actor's");
  s.add("ppo_epochs", &critic_spec::ppo_epochs)
      .range(0, 1000)
      .help("the critic's passes over each batch; 0: the actor's");
  add_rank_keys(s, "critic");
  return s;
}

config::object_schema<rollout_spec> rollout_schema() {
  config::object_schema<rollout_spec> s;
  s.add("n", &rollout_spec::n).range(1, 1024).help("responses per prompt");
  s.add("temperature", &rollout_spec::temperature).range(0.01, 10.0).help("sampling temperature");
  s.add("top_k", &rollout_spec::top_k).range(0, 1 << 20).help("0 = every token");
  s.add("top_p", &rollout_spec::top_p).range(0.01, 1.0).help("1 = no nucleus cut");
  s.add("response_length", &rollout_spec::response_length)
      .range(0, 1 << 20)
      .help("tokens per response at most; 0 = what the task needs");
  s.add("kv_blocks", &rollout_spec::kv_blocks).range(1, 1 << 24).help("KV-cache blocks per worker");
  s.add("max_batch_tokens", &rollout_spec::max_batch_tokens)
      .range(1, 1 << 20)
      .help("new tokens per engine iteration");
  s.add("threads", &rollout_spec::threads)
      .range(0, 1024)
      .help("CPU threads per rollout worker's engine; 0 = this machine's cores / rollout workers");
  return s;
}

config::object_schema<kl_ctrl_spec> kl_ctrl_schema() {
  config::object_schema<kl_ctrl_spec> s;
  s.add("type", &kl_ctrl_spec::type).one_of({"fixed", "adaptive"}).help("the KL controller");
  s.add("kl_coef", &kl_ctrl_spec::kl_coef).range(0.0, 100.0).help("the in-reward KL's beta");
  s.add("target_kl", &kl_ctrl_spec::target_kl).range(1e-6, 100.0).help("adaptive: the target");
  s.add("horizon", &kl_ctrl_spec::horizon).range(1, 1 << 30).help("adaptive: its horizon");
  return s;
}

config::object_schema<rollout_correction_spec> rollout_correction_schema() {
  config::object_schema<rollout_correction_spec> s;
  s.add("bypass_mode", &rollout_correction_spec::bypass_mode)
      .help(
          "the rollout's log-probs are the old log-probs (on the CPU they are the policy's, "
          "bit for bit); false: the policy recomputes them");
  return s;
}

config::object_schema<algorithm_spec> algorithm_schema() {
  config::object_schema<algorithm_spec> s;
  s.add("adv_estimator", &algorithm_spec::adv_estimator)
      .one_of({"gae", "grpo", "rloo", "reinforce_plus_plus", "reinforce_plus_plus_baseline"})
      .help("the advantage estimator");
  s.add("gamma", &algorithm_spec::gamma).range(0.0, 1.0).help("discount");
  s.add("lam", &algorithm_spec::lam).range(0.0, 1.0).help("GAE's lambda");
  s.add("norm_adv_by_std_in_grpo", &algorithm_spec::norm_adv_by_std_in_grpo)
      .help("false gives Dr.GRPO");
  s.add("use_kl_in_reward", &algorithm_spec::use_kl_in_reward)
      .help("subtract beta * KL from the token rewards");
  s.add("kl_penalty", &algorithm_spec::kl_penalty)
      .one_of({"kl", "abs", "mse", "low_var_kl", "k1", "k2", "k3"})
      .help("the in-reward KL's estimator (and the logged actor/reward_kl_penalty's)");
  s.add("kl_ctrl", &algorithm_spec::kl_ctrl, kl_ctrl_schema()).help("the in-reward KL's beta");
  s.add("rollout_correction", &algorithm_spec::rollout_correction, rollout_correction_schema())
      .help("where the old log-probs come from");
  return s;
}

config::object_schema<trainer_spec> trainer_schema() {
  config::object_schema<trainer_spec> s;
  s.add("total_training_steps", &trainer_spec::total_training_steps)
      .range(1, 100000000)
      .help("RL steps");
  s.add("test_freq", &trainer_spec::test_freq)
      .range(0, 100000000)
      .help("greedy validation every this many steps and after the last; 0 = none");
  s.add("val_prompts", &trainer_spec::val_prompts).range(1, 1 << 20).help("validation prompts");
  s.add("samples_per_step", &trainer_spec::samples_per_step)
      .range(0, 1 << 20)
      .help("responses per step written to samples.jsonl");
  s.add("save_freq", &trainer_spec::save_freq)
      .range(0, 100000000)
      .help("a checkpoint every this many steps and after the last; 0 = none");
  s.add("max_actor_ckpt_to_keep", &trainer_spec::max_actor_ckpt_to_keep)
      .range(1, 100000)
      .help("committed checkpoints kept");
  s.add("stop_after", &trainer_spec::stop_after)
      .range(0, 100000000)
      .help("end this launch after this step (checkpointed when save_freq is set); 0 = the end");
  s.add("critic_warmup", &trainer_spec::critic_warmup)
      .range(0, 100000000)
      .help("the policy is updated from this RL step on (1-based); before, only the critic");
  return s;
}

config::object_schema<warmup_spec> warmup_schema() {
  config::object_schema<warmup_spec> s;
  s.add("steps", &warmup_spec::steps)
      .range(0, 100000000)
      .help("optimizer steps on the task's text before RL; 0 = none");
  s.add("text", &warmup_spec::text)
      .one_of({"format", "answers"})
      .help(
          "format: prompts followed by random numbers (the format only); answers: the task's "
          "own examples (supervised fine-tuning)");
  s.add("batch", &warmup_spec::batch).range(1, 1 << 20).help("sequences per warm-up step");
  s.add("lr", &warmup_spec::lr)
      .range(0.0, 10.0)
      .help("the warm-up's first learning rate; cosine down to actor.lr at its end");
  return s;
}

config::object_schema<sync_spec> sync_schema() {
  config::object_schema<sync_spec> s;
  s.add("bucket_mb", &sync_spec::bucket_mb).range(1, 1 << 16).help("broadcast bucket size");
  s.add("timeout_ms", &sync_spec::timeout_ms)
      .range(100, 86400000)
      .help("limit for forming the group and for every broadcast");
  return s;
}

config::object_schema<async_spec> async_schema() {
  config::object_schema<async_spec> s;
  s.add("max_staleness", &async_spec::max_staleness)
      .range(0, 16)
      .help(
          "0: synchronous; 1 or more: the next step's generation overlaps this step's update "
          "(one-step-off-policy, samples one policy version old)");
  return s;
}

config::object_schema<placement_spec> placement_schema() {
  config::object_schema<placement_spec> s;
  s.add("colocate", &placement_spec::colocate)
      .help(
          "groups of roles whose actors of the same index share a worker process, e.g. "
          "[[policy, reference], [critic, reward]]");
  return s;
}

}  // namespace

config::object_schema<rlhf_options> rlhf_schema() {
  config::object_schema<rlhf_options> s;
  s.add("data", &rlhf_options::data, data_schema()).help("the prompts");
  s.add("actor", &rlhf_options::actor, actor_schema()).help("the policy's update");
  s.add("critic", &rlhf_options::critic, critic_schema())
      .help("the value model's update (adv_estimator gae only)");
  s.add("rollout", &rlhf_options::rollout, rollout_schema()).help("generation");
  s.add("algorithm", &rlhf_options::algorithm, algorithm_schema()).help("advantages and KL");
  s.add("trainer", &rlhf_options::trainer, trainer_schema()).help("the run's schedule");
  s.add("warmup", &rlhf_options::warmup, warmup_schema()).help("the policy's format warm-up");
  s.add("task", &rlhf_options::task, task_schema()).help("the task and its rule reward");
  s.add("sync", &rlhf_options::sync, sync_schema()).help("the weight sync to the rollout");
  s.add("async", &rlhf_options::async, async_schema())
      .help("generation ahead of the update (one-step-off-policy)");
  s.add("placement", &rlhf_options::placement, placement_schema())
      .help("which roles share a worker process");
  s.add("seed", &rlhf_options::seed).range(0, 1 << 30).help("the policy's initial weights");
  s.add("init_from", &rlhf_options::init_from)
      .help(
          "a checkpoint to start from instead of the seed's weights: a pretraining run "
          "directory (its newest checkpoint), or one checkpoint; the model must be its model");
  s.add("resume", &rlhf_options::resume)
      .help("a run directory to continue from (troupe launch --resume sets it)");
  return s;
}

int response_length(const rlhf_options& o, const tasks::task_codec& codec) {
  if (o.rollout.response_length > 0) return o.rollout.response_length;
  return codec.max_response_tokens(max_response_bytes(o.task));
}

rlhf_schedule schedule_of(const rlhf_options& o, int ctx, const tasks::task_codec& codec) {
  rlhf_schedule s;
  s.steps = o.trainer.total_training_steps;
  s.warmup_steps = o.warmup.steps;
  s.prompts = o.data.train_batch_size;
  s.n = o.rollout.n;
  s.mini_batch_prompts = o.actor.ppo_mini_batch_size;
  s.critic_mini_batch_prompts = o.critic.ppo_mini_batch_size;  // 0: the actor's
  s.ppo_epochs = o.actor.ppo_epochs;
  s.critic_ppo_epochs = o.critic.ppo_epochs;
  s.policy_ranks = o.actor.dp;
  s.critic_ranks = uses_critic(o) ? o.critic.dp : 0;
  s.critic_warmup = o.trainer.critic_warmup;
  s.max_len = ctx;
  s.response_length = response_length(o, codec);
  s.test_freq = o.trainer.test_freq;
  s.val_prompts = o.trainer.val_prompts;
  s.samples_per_step = o.trainer.samples_per_step;
  s.save_freq = o.trainer.save_freq;
  s.stop_after = o.trainer.stop_after;
  s.max_staleness = o.async.max_staleness;
  s.bypass_old_log_prob = o.algorithm.rollout_correction.bypass_mode;
  s.task = o.task.name;
  s.seed = static_cast<uint64_t>(o.data.seed);
  s.temperature = static_cast<float>(o.rollout.temperature);
  s.top_k = o.rollout.top_k;
  s.top_p = static_cast<float>(o.rollout.top_p);
  s.loss_agg_mode = *kernels::parse_loss_agg_mode(o.actor.loss_agg_mode);
  return s;
}

rl_algorithm algorithm_of(const rlhf_options& o) {
  using estimator = rl_algorithm::estimator;
  rl_algorithm a;
  const std::string& e = o.algorithm.adv_estimator;
  a.adv_estimator = e == "gae"                            ? estimator::gae
                    : e == "rloo"                         ? estimator::rloo
                    : e == "reinforce_plus_plus"          ? estimator::reinforce_plus_plus
                    : e == "reinforce_plus_plus_baseline" ? estimator::reinforce_plus_plus_baseline
                                                          : estimator::grpo;
  a.norm_adv_by_std_in_grpo = o.algorithm.norm_adv_by_std_in_grpo;
  a.use_kl_in_reward = o.algorithm.use_kl_in_reward;
  a.kl_penalty = *kernels::parse_kl_estimator(o.algorithm.kl_penalty);
  a.gamma = o.algorithm.gamma;
  a.lam = o.algorithm.lam;
  return a;
}

kl_controller kl_controller_of(const rlhf_options& o) {
  const kl_ctrl_spec& k = o.algorithm.kl_ctrl;
  return k.type == "adaptive" ? kl_controller::adaptive(k.kl_coef, k.target_kl, k.horizon)
                              : kl_controller::fixed(k.kl_coef);
}

actors::policy_objective objective_of(const rlhf_options& o) {
  actors::policy_objective p;
  p.temperature = static_cast<float>(o.rollout.temperature);
  p.loss_mode = *kernels::parse_policy_loss_mode(o.actor.policy_loss.loss_mode);
  const auto ratio = [&](double v) { return static_cast<float>(v < 0 ? o.actor.clip_ratio : v); };
  p.clip = {ratio(o.actor.clip_ratio_low), ratio(o.actor.clip_ratio_high),
            static_cast<float>(o.actor.clip_ratio_c)};
  p.entropy_coeff = static_cast<float>(o.actor.entropy_coeff);
  p.use_kl_loss = o.actor.use_kl_loss;
  p.kl_loss_coef = static_cast<float>(o.actor.kl_loss_coef);
  p.kl_loss_type = *kernels::parse_kl_estimator(o.actor.kl_loss_type);
  return p;
}

namespace {
int threads_per_rank(int configured, int ranks) {
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return configured > 0 ? configured : std::max(1, cores / ranks);
}
}  // namespace

int critic_mini_batch_size(const rlhf_options& o) {
  return o.critic.ppo_mini_batch_size > 0 ? o.critic.ppo_mini_batch_size
                                          : o.actor.ppo_mini_batch_size;
}

bool uses_critic(const rlhf_options& o) {
  return o.algorithm.adv_estimator == "gae";
}

actors::trainer_options critic_trainer_options(const rlhf_options& o) {
  actors::trainer_options t;
  t.global_batch = o.critic.dp;  // it takes RL steps only
  t.rl_rows = o.data.train_batch_size * o.rollout.n / o.critic.dp;
  t.micro_batch = o.critic.micro_batch;
  t.threads = threads_per_rank(o.critic.threads, o.critic.dp);
  t.lr = {static_cast<float>(o.critic.lr), 0, 1, 1.0f};
  t.adamw.weight_decay = static_cast<float>(o.critic.weight_decay);
  t.grad_clip = static_cast<float>(o.critic.grad_clip);
  t.overlap_comm = false;
  t.seed = static_cast<uint64_t>(o.seed);
  return t;
}

actors::value_objective critic_objective_of(const rlhf_options& o) {
  return {static_cast<float>(o.critic.cliprange_value)};
}

actors::trainer_options policy_trainer_options(const rlhf_options& o) {
  actors::trainer_options t;
  t.global_batch = o.warmup.steps > 0 ? o.warmup.batch : o.actor.dp;
  t.rl_rows = o.data.train_batch_size * o.rollout.n / o.actor.dp;  // its share of the log-probs
  t.micro_batch = o.actor.micro_batch;
  t.threads = threads_per_rank(o.actor.threads, o.actor.dp);
  // The warm-up's learning rate decays (cosine) to RL's over the warm-up; RL's is constant.
  const float rl_lr = static_cast<float>(o.actor.lr);
  if (o.warmup.steps > 0 && o.warmup.lr > 0) {
    t.lr = {static_cast<float>(o.warmup.lr), 0, o.warmup.steps,
            rl_lr / static_cast<float>(o.warmup.lr)};
  } else {
    t.lr = {rl_lr, 0, 1, 1.0f};
  }
  t.adamw.weight_decay = static_cast<float>(o.actor.weight_decay);
  t.grad_clip = static_cast<float>(o.actor.grad_clip);
  t.overlap_comm = false;
  t.seed = static_cast<uint64_t>(o.seed);
  return t;
}

actors::inference_engine::options rollout_engine_options(const rlhf_options& o,
                                                         const models::decoder_config& model,
                                                         int workers) {
  actors::inference_engine::options engine;
  engine.threads = threads_per_rank(o.rollout.threads, workers);
  engine.scheduler.ctx = model.ctx;
  engine.scheduler.max_batch_tokens = o.rollout.max_batch_tokens;
  engine.scheduler.max_sequences = std::max(1, o.data.train_batch_size * o.rollout.n);
  engine.kv_blocks = o.rollout.kv_blocks;
  return engine;
}

}  // namespace troupe::apps::rlhf

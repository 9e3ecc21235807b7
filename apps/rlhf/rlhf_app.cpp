#include "apps/rlhf/rlhf_app.hpp"

#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "actors/inference_worker_actor.hpp"
#include "actors/learned_reward.hpp"
#include "actors/trainer_actor.hpp"
#include "apps/rlhf/rlhf_driver_actor.hpp"
#include "apps/rlhf/rlhf_options.hpp"
#include "models/decoder/decoder_source.hpp"
#include "runtime/actor/rule_reward.hpp"
#include "runtime/app/app_plan.hpp"
#include "runtime/base/status.hpp"
#include "runtime/config/environment.hpp"
#include "tasks/task_codec.hpp"

namespace troupe::apps::rlhf {
namespace {

// The roles have no options; the app's `rlhf:` section configures them.
struct no_options {};

absl::StatusOr<const rlhf_options*> options_in(const app::app_plan& plan, absl::string_view role) {
  if (plan.spec.app != "rlhf" || plan.app_options == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("the ", role, " role belongs to app: rlhf, not app: ", plan.spec.app));
  }
  return static_cast<const rlhf_options*>(plan.app_options.get());
}

// A weight-sync participant: the group's name and limits (each sync round brings its members),
// listening at this process's address.
actors::weight_sync_spec sync_member(const rlhf_options& o, const actor::role_context& ctx) {
  actors::weight_sync_spec s;
  s.group.name = "rlhf/sync";
  s.group.timeout = std::chrono::milliseconds(o.sync.timeout_ms);
  s.group.host = ctx.host;
  s.bucket_bytes = int64_t{o.sync.bucket_mb} << 20;
  return s;
}

absl::StatusOr<std::shared_ptr<comm::rendezvous_store>> store_of(actor::role_context& ctx) {
  if (!ctx.rendezvous) {
    return absl::FailedPreconditionError(
        "the RLHF roles need a rendezvous, and this process has none");
  }
  return ctx.rendezvous();
}

// An elastic trainer role's rank (roles.policy.elastic, roles.critic.elastic) is the one rank of
// its worker process, computing on the cores the worker offers, and its place in the group
// comes with the controller's (regroup); a fixed group's ranks share this machine's cores. An
// elastic rank has room for its share of a step's `rows` at the group's smallest, and its
// warm-up batch a sequence for each rank at the largest.
void place_rank(actors::trainer_actor_spec& spec, const actor::role_context& ctx, int dp,
                int rows) {
  const auto& elastic = ctx.plan.find_role(ctx.role)->spec.elastic;
  spec.rank = elastic ? 0 : ctx.index;
  spec.ranks = elastic ? 1 : dp;
  spec.elastic = elastic.has_value();
  spec.options.elastic = elastic.has_value();
  if (!elastic) return;
  if (ctx.cores > 0) spec.options.threads = ctx.cores;
  spec.options.rl_rows = (rows + elastic->min - 1) / elastic->min;
  spec.options.global_batch = std::max(spec.options.global_batch, elastic->max);
}

absl::StatusOr<caf::actor> spawn_policy(actor::role_context& ctx, const no_options&) {
  TROUPE_ASSIGN_OR_RETURN(const rlhf_options* o, options_in(ctx.plan, "policy"));
  TROUPE_ASSIGN_OR_RETURN(const models::decoder_config model,
                          models::decoder_config_of(ctx.plan.spec.model));
  TROUPE_ASSIGN_OR_RETURN(std::shared_ptr<comm::rendezvous_store> store, store_of(ctx));
  actors::trainer_actor_spec spec;
  spec.model = model;
  spec.options = policy_trainer_options(*o);
  place_rank(spec, ctx, o->actor.dp, o->data.train_batch_size * o->rollout.n);
  spec.group.name = "rlhf/policy";
  spec.group.timeout = std::chrono::milliseconds(o->sync.timeout_ms);
  spec.group.host = ctx.host;
  if (o->warmup.steps > 0) {
    TROUPE_ASSIGN_OR_RETURN(std::shared_ptr<const text_task> task, make_task(o->task));
    // Enough examples that the warm-up does not repeat them.
    const int lines = std::max(2000, o->warmup.steps * o->warmup.batch * model.ctx / 8);
    TROUPE_ASSIGN_OR_RETURN(
        actors::text_corpus corpus,
        actors::text_corpus::from_text(
            task->warmup_text(static_cast<uint64_t>(o->seed), lines, o->warmup.text == "answers"),
            0.05, model.ctx, "the task's warm-up text"));
    spec.corpus = std::make_shared<const actors::text_corpus>(std::move(corpus));
  }
  spec.data_seed = static_cast<uint64_t>(o->seed);
  spec.eval_windows = 1;
  spec.objective = objective_of(*o);
  if (ctx.index == 0 || spec.elastic) spec.sync = sync_member(*o, ctx);  // rank 0 sends
  TROUPE_ASSIGN_OR_RETURN(config::test_hooks hooks, config::test_hooks_from_environment());
  spec.pacer = run::work_pacer(std::move(hooks));
  return caf::actor_cast<caf::actor>(
      actors::spawn_trainer(ctx.system, ctx.metrics, ctx.actor_name(), store, std::move(spec)));
}

absl::StatusOr<caf::actor> spawn_reference(actor::role_context& ctx, const no_options&) {
  TROUPE_ASSIGN_OR_RETURN(const rlhf_options* o, options_in(ctx.plan, "reference"));
  actors::trainer_actor_spec spec;
  TROUPE_ASSIGN_OR_RETURN(spec.model, models::decoder_config_of(ctx.plan.spec.model));
  spec.options = policy_trainer_options(*o);  // the policy's initial weights (same seed)
  spec.options.global_batch = 1;
  spec.options.rl_rows = o->data.train_batch_size * o->rollout.n;  // it takes the whole batch
  spec.objective = objective_of(*o);  // for its temperature: the reference's distribution too
  return caf::actor_cast<caf::actor>(
      actors::spawn_trainer(ctx.system, ctx.metrics, ctx.actor_name(), nullptr, std::move(spec)));
}

absl::StatusOr<caf::actor> spawn_critic(actor::role_context& ctx, const no_options&) {
  TROUPE_ASSIGN_OR_RETURN(const rlhf_options* o, options_in(ctx.plan, "critic"));
  TROUPE_ASSIGN_OR_RETURN(std::shared_ptr<comm::rendezvous_store> store, store_of(ctx));
  actors::trainer_actor_spec spec;
  TROUPE_ASSIGN_OR_RETURN(spec.model, models::decoder_config_of(ctx.plan.spec.model));
  spec.options = critic_trainer_options(*o);
  place_rank(spec, ctx, o->critic.dp, o->data.train_batch_size * o->rollout.n);
  spec.group.name = "rlhf/critic";
  spec.group.timeout = std::chrono::milliseconds(o->sync.timeout_ms);
  spec.group.host = ctx.host;
  spec.critic = critic_objective_of(*o);
  spec.file_prefix = "critic-";  // beside the policy's files in the run's checkpoints
  TROUPE_ASSIGN_OR_RETURN(config::test_hooks hooks, config::test_hooks_from_environment());
  spec.pacer = run::work_pacer(std::move(hooks));
  return caf::actor_cast<caf::actor>(
      actors::spawn_trainer(ctx.system, ctx.metrics, ctx.actor_name(), store, std::move(spec)));
}

absl::StatusOr<caf::actor> spawn_rollout(actor::role_context& ctx, const no_options&) {
  TROUPE_ASSIGN_OR_RETURN(const rlhf_options* o, options_in(ctx.plan, "rollout"));
  TROUPE_ASSIGN_OR_RETURN(std::shared_ptr<comm::rendezvous_store> store, store_of(ctx));
  TROUPE_ASSIGN_OR_RETURN(const models::decoder_config model,
                          models::decoder_config_of(ctx.plan.spec.model));
  // Weights until the first sync replaces them: the policy's initialisation.
  auto served = std::make_shared<actors::served_model>();
  served->layout = std::make_unique<models::decoder_layout>(model, models::layer_range::all(model));
  served->params.resize(served->layout->total());
  served->layout->initialize(served->params.data(), static_cast<uint64_t>(o->seed));
  const config::role_spec& role = ctx.plan.find_role("rollout")->spec;
  const actors::inference_engine::options engine =
      rollout_engine_options(*o, model, role.elastic ? role.elastic->min : role.count);
  TROUPE_ASSIGN_OR_RETURN(config::test_hooks hooks, config::test_hooks_from_environment());
  TROUPE_ASSIGN_OR_RETURN(actor::inference_worker_actor worker,
                          actors::spawn_inference_worker(
                              ctx.system, ctx.metrics, ctx.actor_name(), std::move(served), engine,
                              run::work_pacer(std::move(hooks)), std::chrono::milliseconds(500),
                              actors::rollout_sync{store, sync_member(*o, ctx)}));
  return caf::actor_cast<caf::actor>(worker);
}

// An elastic policy or critic (roles.<role>.elastic): its ranks are the members alive, so
// rlhf.<group>.dp stays unset, and each of up to max ranks needs a response of every mini-batch.
void check_elastic_ranks(const rlhf_options& o, const char* group, int mini_batch,
                         const config::elastic_spec& elastic, const config::parse_context& ctx,
                         const YAML::Node& section) {
  const YAML::Node node = section[group];
  const int dp = std::string_view(group) == "actor" ? o.actor.dp : o.critic.dp;
  const char* role = std::string_view(group) == "actor" ? "policy" : "critic";
  // Compared with the default, not "is it written": workers get the config with every default.
  if (dp != 1) {
    ctx.child(group).child("dp").error(
        node.IsDefined() && node["dp"].IsDefined() ? node["dp"] : section,
        absl::StrCat("is ", dp, ", but roles.", role, ".elastic makes the ", role,
                     "'s ranks the actors that are alive (within elastic.min and max); remove it"));
  }
  if (mini_batch * o.rollout.n < elastic.max) {
    ctx.child(group)
        .child("ppo_mini_batch_size")
        .error(node.IsDefined() && node["ppo_mini_batch_size"].IsDefined()
                   ? node["ppo_mini_batch_size"]
                   : section,
               absl::StrCat("is ", mini_batch, " prompts x rollout.n ", o.rollout.n, ", but roles.",
                            role, ".elastic.max ", elastic.max,
                            " ranks each need a response of every "
                            "mini-batch"));
  }
  if (std::string_view(group) == "actor" && o.warmup.steps > 0 && o.warmup.batch < elastic.max) {
    ctx.child("warmup").child("batch").error(
        section["warmup"].IsDefined() ? section["warmup"] : section,
        absl::StrCat("is ", o.warmup.batch, ", but roles.policy.elastic.max ", elastic.max,
                     " ranks each need a sequence of every warm-up step"));
  }
}

// The built-in reward of the task named like it (reward/<task>): that task's rule.
absl::StatusOr<caf::actor> spawn_task_reward(actor::role_context& ctx, const no_options&) {
  TROUPE_ASSIGN_OR_RETURN(const rlhf_options* o, options_in(ctx.plan, "reward"));
  // check_rlhf_plan refused a built-in reward of another task than rlhf.task.name.
  TROUPE_ASSIGN_OR_RETURN(std::shared_ptr<const text_task> task, make_task(o->task));
  return caf::actor_cast<caf::actor>(actor::spawn_rule_reward(
      ctx.system, ctx.metrics, ctx.actor_name(), o->task.name,
      [task](std::string_view prompt, std::string_view response, bool ended) {
        return task->reward(prompt, response, ended);
      }));
}

// The learned reward's options: the reward model's run (app: reward_model).
struct reward_model_options {
  std::string checkpoint;
};

config::object_schema<reward_model_options> reward_model_schema() {
  config::object_schema<reward_model_options> s;
  s.add("checkpoint", &reward_model_options::checkpoint)
      .required()
      .non_empty()
      .help(
          "the reward model: an app: reward_model run directory (its newest good checkpoint) "
          "or checkpoint directory, of the same model: shape");
  return s;
}

// A learned reward (impl reward_model): the reward model's checkpoint scoring each (prompt,
// response) in batches, on this process's cores; the task's rule is still logged beside it.
absl::StatusOr<caf::actor> spawn_reward_model(actor::role_context& ctx,
                                              const reward_model_options& options) {
  TROUPE_ASSIGN_OR_RETURN(const rlhf_options* o, options_in(ctx.plan, "reward"));
  TROUPE_ASSIGN_OR_RETURN(const models::decoder_config model,
                          models::decoder_config_of(ctx.plan.spec.model));
  // The responses as the reward model's pairs were encoded (a chat model's through its
  // template).
  TROUPE_ASSIGN_OR_RETURN(
      const tasks::task_codec codec,
      tasks::task_codec_of(ctx.plan.spec.model, schedule_of(*o, model.ctx).end_string));
  TROUPE_ASSIGN_OR_RETURN(
      std::shared_ptr<actors::learned_reward> rm,
      actors::learned_reward::load(
          model, options.checkpoint, "roles.reward.options.checkpoint",
          [codec](std::string_view prompt, std::string_view response, bool ended) {
            return codec.reward_tokens(prompt, response, ended);
          },
          ctx.cores > 0 ? ctx.cores : 1));
  return caf::actor_cast<caf::actor>(actor::spawn_reward(
      ctx.system, ctx.metrics, ctx.actor_name(),
      [rm](const actor::reward_request& request) { return rm->score(request); }));
}

// troupe check: what scores the responses.
std::string reward_description(const app::app_plan& plan, const rlhf_options& o) {
  const auto* reward = plan.find_role("reward");
  if (reward == nullptr || reward->spec.impl != "reward_model" || reward->options == nullptr) {
    return absl::StrCat("reward: ", reward != nullptr ? reward->spec.impl : o.task.name, "'s rule");
  }
  const auto& rm = *static_cast<const reward_model_options*>(reward->options.get());
  return absl::StrCat("reward: the reward model of ", rm.checkpoint, "; the task's rule (",
                      o.task.name, ") logged beside it as critic/true_score/mean");
}

// What each role must be: name, kind, impl (any, when empty: the reward may be a plugin's
// rule), and whether only GAE has it.
struct expected_role {
  const char* name;
  const char* kind;
  const char* impl;
  bool gae_only = false;
};
constexpr expected_role expected_roles[] = {{"policy", "trainer", "gpt_policy"},
                                            {"reference", "trainer", "gpt_reference"},
                                            {"critic", "trainer", "gpt_critic", true},
                                            {"rollout", "inference_worker", "gpt_rollout"},
                                            {"reward", "reward", ""}};

void check_rlhf_plan(const app::app_plan& plan, const void* opaque,
                     const config::parse_context& ctx, const YAML::Node& section) {
  const auto& o = *static_cast<const rlhf_options*>(opaque);
  const YAML::Node node_of = section;
  const auto at = [&](const char* group, const char* key) {
    const YAML::Node n = section[group][key];
    return n.IsDefined() ? n : (section[group].IsDefined() ? section[group] : node_of);
  };
  const auto resolved = models::decoder_config_of(plan.spec.model);
  if (!resolved.ok()) ctx.error(section, std::string(resolved.status().message()));
  const models::decoder_config model = resolved.value_or(models::decoder_config{});
  const std::string model_dir = models::hf_model_dir(plan.spec.model);
  // How the task's prompts reach the model: a chat model's template renders them.
  tasks::task_codec codec;
  if (!model_dir.empty()) {
    if (absl::Status s = models::check_model_dir(plan.spec.model); !s.ok()) {
      ctx.error(section, absl::StrCat("model.path: ", s.message()));
    } else if (auto c = tasks::task_codec_of(plan.spec.model); !c.ok()) {
      ctx.error(section, std::string(c.status().message()));
    } else {
      codec = *std::move(c);
    }
    if (o.warmup.steps > 0) {
      ctx.child("warmup").child("steps").error(
          at("warmup", "steps"),
          absl::StrCat("is ", o.warmup.steps,
                       ", but the warm-up trains on the task's byte text "
                       "and model.path's model starts from its own weights (or rlhf.init_from's, "
                       "e.g. an SFT run): set warmup.steps 0"));
    }
  } else if (model.vocab != 256) {
    ctx.error(section, absl::StrCat("the task is byte-level text, so model.vocab must be 256, not ",
                                    model.vocab));
  }
  if (o.actor.policy_loss.loss_mode == "gspo" && o.actor.loss_agg_mode != "seq-mean-token-mean") {
    ctx.error(section, absl::StrCat("rlhf.actor.policy_loss.loss_mode gspo is a loss per "
                                    "response (veRL aggregates it by seq-mean-token-mean whatever "
                                    "loss_agg_mode says), but rlhf.actor.loss_agg_mode is ",
                                    o.actor.loss_agg_mode, ": set it to seq-mean-token-mean"));
  }
  const bool gae = uses_critic(o);
  for (const auto& want : expected_roles) {
    const auto* role = plan.find_role(want.name);
    if (want.gae_only && !gae) {
      if (role != nullptr) {
        ctx.error(section, absl::StrCat("roles.critic is set, but adv_estimator is ",
                                        o.algorithm.adv_estimator,
                                        ", which has no critic: remove the role, or use gae"));
      }
      continue;
    }
    const std::string impl = *want.impl != 0 ? want.impl : o.task.name;
    if (role == nullptr || role->spec.kind != want.kind ||
        (*want.impl != 0 && role->spec.impl != want.impl)) {
      ctx.error(section,
                absl::StrCat("app: rlhf needs a role '", want.name, "' of kind ", want.kind,
                             *want.impl != 0 ? absl::StrCat(" and impl ", want.impl) : "",
                             ", e.g. roles: {", want.name, ": {kind: ", want.kind, ", impl: ", impl,
                             "}}"));
    } else if (*want.impl == 0 && role->spec.impl != o.task.name &&
               std::find(task_names().begin(), task_names().end(), role->spec.impl) !=
                   task_names().end()) {
      ctx.error(section,
                absl::StrCat("roles.reward.impl is ", role->spec.impl,
                             ", the reward of that task, but rlhf.task.name is ", o.task.name,
                             ": use impl ", o.task.name, ", or a plugin's reward rule"));
    } else if (const std::string_view name = want.name;
               role->spec.elastic && name != "rollout" && name != "policy" && name != "critic") {
      ctx.error(section, absl::StrCat("roles.", want.name,
                                      " cannot be elastic in app: rlhf (the rollout, the policy "
                                      "and the critic can: one actor per worker process)"));
    }
  }
  for (const auto& role : plan.roles) {
    bool known = false;
    for (const auto& want : expected_roles)
      known = known || role.spec.name == want.name;
    if (!known) {
      ctx.error(section, absl::StrCat("app: rlhf has no role '", role.spec.name,
                                      "'; its roles are policy, reference, rollout, reward, and "
                                      "critic with adv_estimator gae"));
    }
  }
  const auto* policy = plan.find_role("policy");
  if (policy != nullptr && policy->spec.elastic) {
    check_elastic_ranks(o, "actor", o.actor.ppo_mini_batch_size, *policy->spec.elastic, ctx,
                        section);
  } else if (policy != nullptr && policy->spec.count != o.actor.dp) {
    ctx.child("actor").child("dp").error(
        section["actor"]["dp"].IsDefined() ? section["actor"]["dp"] : section,
        absl::StrCat("is ", o.actor.dp, " but roles.policy.count is ", policy->spec.count,
                     ": each policy rank is one trainer actor; set both to the same number"));
  }
  // Colocated groups: roles of the run, each in one group, none elastic (a group's actors are
  // placed together by index).
  std::set<std::string> grouped;
  const YAML::Node placement = section["placement"];
  const YAML::Node colocate =
      placement.IsDefined() && placement["colocate"].IsDefined() ? placement["colocate"] : section;
  for (const auto& group : o.placement.colocate) {
    if (group.size() < 2) {
      ctx.child("placement")
          .child("colocate")
          .error(colocate, "each group names two roles or more, e.g. [[policy, reference]]");
    }
    for (const auto& name : group) {
      const auto* role = plan.find_role(name);
      if (role == nullptr) {
        ctx.child("placement")
            .child("colocate")
            .error(colocate, absl::StrCat("names '", name, "', which is not a role of this run"));
      } else if (role->spec.elastic) {
        ctx.child("placement")
            .child("colocate")
            .error(colocate,
                   absl::StrCat("names '", name,
                                "', an elastic role: its actors follow the workers, so they "
                                "cannot share a process with another role's"));
      } else if (!grouped.insert(name).second) {
        ctx.child("placement")
            .child("colocate")
            .error(colocate, absl::StrCat("names '", name, "' in two groups; a role is in one"));
      }
    }
  }
  for (const char* single : {"reference", "reward"}) {
    const auto* r = plan.find_role(single);
    if (r != nullptr && r->spec.count != 1) {
      ctx.error(section, absl::StrCat("roles.", single, ".count is ", r->spec.count,
                                      "; app: rlhf runs one ", single, " actor"));
    }
  }
  // A resolved config (what the head hands its workers) spells every default out: only a critic
  // section that sets something is refused.
  if (!gae && !(o.critic == critic_spec{})) {
    ctx.child("critic").error(
        section["critic"].IsDefined() ? section["critic"] : section,
        absl::StrCat("is set, but adv_estimator ", o.algorithm.adv_estimator,
                     " has no critic (only gae does): remove the section, or use gae"));
  }
  const auto* critic = plan.find_role("critic");
  if (gae && critic != nullptr && critic->spec.elastic) {
    check_elastic_ranks(o, "critic", critic_mini_batch_size(o), *critic->spec.elastic, ctx,
                        section);
  } else if (gae && critic != nullptr && critic->spec.count != o.critic.dp) {
    ctx.child("critic").child("dp").error(
        at("critic", "dp"),
        absl::StrCat("is ", o.critic.dp, " but roles.critic.count is ", critic->spec.count,
                     ": each critic rank is one trainer actor; set both to the same number"));
  }
  // The policy's and the critic's mini-batches divide the batch, and each of their ranks takes
  // an equal share of one.
  const auto check_mini_batch = [&](const char* group, int mini, int dp) {
    if (o.data.train_batch_size % mini != 0) {
      ctx.child(group)
          .child("ppo_mini_batch_size")
          .error(
              at(group, "ppo_mini_batch_size"),
              absl::StrCat("is ", mini, ", which does not divide data.train_batch_size ",
                           o.data.train_batch_size,
                           " (both count prompts): make the batch a multiple of the mini-batch"));
      return;
    }
    const int responses = mini * o.rollout.n;
    if (responses % dp == 0) return;
    ctx.child(group).child("dp").error(
        at(group, "dp"), absl::StrCat("is ", dp, ", which does not divide a mini-batch's ",
                                      responses, " responses (", group, ".ppo_mini_batch_size ",
                                      mini, " x rollout.n ", o.rollout.n, ")"));
  };
  // An elastic group splits a mini-batch as evenly as it goes over its members.
  const bool elastic_policy = policy != nullptr && policy->spec.elastic;
  const bool elastic_critic = critic != nullptr && critic->spec.elastic;
  check_mini_batch("actor", o.actor.ppo_mini_batch_size, elastic_policy ? 1 : o.actor.dp);
  if (gae) check_mini_batch("critic", critic_mini_batch_size(o), elastic_critic ? 1 : o.critic.dp);
  if (o.warmup.steps > 0 && o.warmup.batch % o.actor.dp != 0) {
    ctx.child("warmup").child("batch").error(
        at("warmup", "batch"),
        absl::StrCat("is ", o.warmup.batch, ", not a multiple of actor.dp ", o.actor.dp));
  }
  absl::StatusOr<std::shared_ptr<const text_task>> task = make_task(o.task);
  if (!task.ok()) {
    // A setting's error is located at rlhf.task.KEY.
    if (const std::optional<task_setting_problem> p = task_setting_of(task.status())) {
      ctx.child("task").child(p->key).error(at("task", p->key.c_str()), p->what);
    } else {
      ctx.child("task").error(section["task"].IsDefined() ? section["task"] : section,
                              std::string(task.status().message()));
    }
    return;
  }
  // A token holds a byte at least; a chat model's prompt adds its template's framing.
  int prompt_tokens = (*task)->max_prompt_bytes();
  absl::StatusOr<std::vector<int32_t>> framing = codec.prompt_tokens("");
  if (!framing.ok()) {
    ctx.error(section, absl::StrCat("model.path: the chat template cannot render a task prompt: ",
                                    framing.status().message()));
    return;
  }
  if (codec.chat_model()) prompt_tokens += static_cast<int>(framing->size());
  if (prompt_tokens + response_length(o, codec) > model.ctx) {
    ctx.child("rollout")
        .child("response_length")
        .error(at("rollout", "response_length"),
               absl::StrCat("prompts of up to ", prompt_tokens, " tokens and responses of ",
                            response_length(o, codec), " tokens do not fit model.ctx ", model.ctx,
                            ": raise model.ctx or lower rollout.response_length"));
  }
}

// Where the roles land: which share a process, which run beside the driver, which spread.
std::string placement_of(const app::app_plan& plan, const rlhf_options& o) {
  if (plan.spec.cluster.local_workers == 0) {
    return "placement: every role in this process (cluster.local_workers 0); under troupe head, "
           "spread over the workers that join";
  }
  std::vector<std::string> together, head, spread;
  std::set<std::string> grouped;
  for (const auto& group : o.placement.colocate) {
    together.push_back(absl::StrCat("[", absl::StrJoin(group, ", "), "]"));
    grouped.insert(group.begin(), group.end());
  }
  for (const auto& role : plan.roles) {
    const std::string& name = role.spec.name;
    if (role.spec.placement == "head") {
      head.push_back(name);
    } else if (!grouped.contains(name)) {
      spread.push_back(role.spec.elastic ? absl::StrCat(name, " (one per worker)") : name);
    }
  }
  std::string out =
      absl::StrCat("placement over ", plan.spec.cluster.local_workers, " worker processes:");
  if (!together.empty()) {
    absl::StrAppend(&out, " one process each for ", absl::StrJoin(together, " and "),
                    " (rlhf.placement.colocate);");
  }
  if (!head.empty()) absl::StrAppend(&out, " beside the driver: ", absl::StrJoin(head, ", "), ";");
  if (!spread.empty()) {
    absl::StrAppend(&out, " spread over the workers: ", absl::StrJoin(spread, ", "));
  }
  return out;
}

// The batch units, derived: what one RL step generates and how many optimizer steps it takes.
std::vector<std::string> describe_rlhf_plan(const app::app_plan& plan, const void* opaque) {
  const auto& o = *static_cast<const rlhf_options*>(opaque);
  const rlhf_schedule s =  // the plan is checked already
      schedule_of(o,
                  models::decoder_config_of(plan.spec.model).value_or(models::decoder_config{}).ctx,
                  tasks::task_codec_of(plan.spec.model).value_or(tasks::task_codec()));
  // "N updates per RL step (ppo_epochs E x P / ppo_mini_batch_size M), each on R responses,
  // R / ranks per rank" for the policy or the critic.
  const auto updates = [&](bool critic) {
    const int mini = s.mini_batch(critic) * s.n;
    const int ranks = critic ? s.critic_ranks : s.policy_ranks;
    const char* role = critic ? "critic" : "policy";
    const auto* group = plan.find_role(role);
    return absl::StrCat(
        role, " updates per RL step: ", s.updates_per_step(critic), " (ppo_epochs ",
        s.epochs(critic), " x ", s.prompts, " / ppo_mini_batch_size ", s.mini_batch(critic),
        "), each on ", mini, " responses, ",
        group != nullptr && group->spec.elastic
            ? absl::StrCat("split over ", group->spec.elastic->min, " to ",
                           group->spec.elastic->max, " ", role, " ranks (roles.", role, ".elastic)")
            : absl::StrCat(mini / ranks, " per ", role, " rank"));
  };
  return {absl::StrCat("per RL step: ", s.prompts, " prompts (data.train_batch_size) x ", s.n,
                       " responses (rollout.n) = ", s.prompts * s.n, " responses of up to ",
                       s.response_length, " tokens"),
          absl::StrCat(updates(false), s.critic_ranks > 0 ? absl::StrCat("; ", updates(true)) : "",
                       s.critic_warmup > 1
                           ? absl::StrCat("; the policy from RL step ", s.critic_warmup, " on")
                           : ""),
          absl::StrCat(s.warmup_steps > 0
                           ? absl::StrCat("before RL: a warm-up of ", s.warmup_steps, " steps of ",
                                          o.warmup.batch, " sequences on ",
                                          warmup_description(o.task, o.warmup.text == "answers"))
                           : std::string("no warm-up"),
                       o.init_from.empty() ? ", from the seed's weights"
                                           : absl::StrCat(", from the checkpoint ", o.init_from),
                       "; ", s.steps, " RL steps"),
          reward_description(plan, o), placement_of(plan, o)};
}

}  // namespace

absl::Status register_rlhf(actor::role_registry& registry) {
  auto app = actor::make_role_factory<rlhf_options>(
      "RLHF (PPO with GAE and a critic, or GRPO, RLOO, REINFORCE++ advantages) with separate "
      "policy, critic, reference, rollout and reward roles, weights synced on the data plane",
      rlhf_schema(), [](actor::role_context& ctx, const rlhf_options& options) {
        return spawn_rlhf_driver(ctx, options);
      });
  app.check_plan = check_rlhf_plan;
  app.describe_plan = describe_rlhf_plan;
  app.colocation = [](const void* opaque) {
    return static_cast<const rlhf_options*>(opaque)->placement.colocate;
  };
  TROUPE_RETURN_IF_ERROR(registry.add("app", "rlhf", std::move(app)));
  auto policy = actor::make_role_factory<no_options>(
      "one data-parallel rank of app: rlhf's policy (GPT on the CPU, the PPO objective)",
      config::object_schema<no_options>(), spawn_policy);
  policy.restartable = false;      // its state is the run's
  policy.app_decides_loss = true;  // the controller ends the run, saying how to resume
  TROUPE_RETURN_IF_ERROR(registry.add("trainer", "gpt_policy", std::move(policy)));
  auto reference = actor::make_role_factory<no_options>(
      "app: rlhf's reference: the initial policy, frozen, forward only",
      config::object_schema<no_options>(), spawn_reference);
  reference.restartable = false;
  reference.app_decides_loss = true;
  TROUPE_RETURN_IF_ERROR(registry.add("trainer", "gpt_reference", std::move(reference)));
  auto critic = actor::make_role_factory<no_options>(
      "one data-parallel rank of app: rlhf's critic (the policy's GPT trunk with a value head, "
      "the clipped value loss)",
      config::object_schema<no_options>(), spawn_critic);
  critic.restartable = false;
  critic.app_decides_loss = true;
  TROUPE_RETURN_IF_ERROR(registry.add("trainer", "gpt_critic", std::move(critic)));
  auto rollout = actor::make_role_factory<no_options>(
      "one rollout worker of app: rlhf (the serving engine; weights synced from the policy)",
      config::object_schema<no_options>(), spawn_rollout);
  // A lost rollout worker restarted elsewhere joins the weight-sync group at the next sync.
  TROUPE_RETURN_IF_ERROR(registry.add("inference_worker", "gpt_rollout", std::move(rollout)));
  TROUPE_RETURN_IF_ERROR(registry.add("reward", "digit_completion",
                                      actor::make_role_factory<no_options>(
                                          "app: rlhf's rule reward for the digit-completion task",
                                          config::object_schema<no_options>(), spawn_task_reward)));
  TROUPE_RETURN_IF_ERROR(registry.add(
      "reward", "reward_model",
      actor::make_role_factory<reward_model_options>(
          "app: rlhf's learned reward: a reward model's checkpoint (app: reward_model) scoring "
          "(prompt, response), the task's rule logged beside it as critic/true_score",
          reward_model_schema(), spawn_reward_model)));
  return registry.add(
      "reward", "fortunes",
      actor::make_role_factory<no_options>(
          "app: rlhf's rule reward for the fortunes task: the share of distinct known words",
          config::object_schema<no_options>(), spawn_task_reward));
}

}  // namespace troupe::apps::rlhf

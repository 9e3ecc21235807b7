// `app: rlhf` end to end through the real binary: GRPO on the digit-completion task raises the
// score, writes veRL's metrics, samples and reward.svg, and bad configs are refused with their
// file, line and column.

#include <algorithm>
#include <filesystem>
#include <set>

#include <gtest/gtest.h>

#include "tests/integration/troupe_cli.hpp"

namespace troupe::testing {
namespace {

namespace fs = std::filesystem;

const std::string ppo_config = std::string(TROUPE_SOURCE_DIR) + "/configs/rlhf_ppo.yaml";

// rlhf.async.max_staleness 1: each step after the first trains on samples generated while the
// step before it updated, one policy version old, and says so.
TEST(RlhfTest, OneStepOffPolicyTrainsOnSamplesOneVersionOld) {
  temp_dir dir;
  const std::string run_dir = dir.file("run");
  const process_result r = troupe(
      launch_args(grpo_config, run_dir,
                  short_rl_run(4, {"rlhf.async.max_staleness=1", "cluster.local_workers=0"})),
      std::chrono::minutes(5));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(summary_of(r)["steps"], 4);
  std::vector<int> staleness;
  for (const auto& row : read_jsonl(run_dir + "/metrics.jsonl")) {
    if (row.contains("staleness/max")) staleness.push_back(row["staleness/max"]);
  }
  EXPECT_EQ(staleness, (std::vector<int>{0, 1, 1, 1}));
}

TEST(RlhfTest, GrpoOnDigitCompletionRaisesTheScore) {
  temp_dir dir;
  const std::string run_dir = dir.file("run");
  const process_result r =
      troupe({"launch", grpo_config, "--run-dir", run_dir}, std::chrono::minutes(10));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json summary = summary_of(r);
  EXPECT_EQ(summary["status"], "succeeded") << r.out;
  EXPECT_EQ(summary["steps"], 40);

  std::vector<double> validation;
  std::vector<nlohmann::json> steps;
  for (const auto& row : read_jsonl(run_dir + "/metrics.jsonl")) {
    if (row.contains("val-core/digit_completion/reward/mean@1")) {
      validation.push_back(row["val-core/digit_completion/reward/mean@1"]);
    }
    if (row.contains("critic/score/mean")) steps.push_back(row);
  }
  ASSERT_EQ(steps.size(), 40u);
  ASSERT_GE(validation.size(), 2u);
  // The greedy validation at the end beats the one before RL, and the policy's best training
  // score beats its first.
  EXPECT_GT(validation.back(), validation.front() + 0.05);
  EXPECT_GT(summary["score_best"].get<double>(), summary["score_first"].get<double>() + 0.1);
  for (const char* key :
       {"critic/score/mean", "critic/rewards/mean", "critic/advantages/mean", "actor/pg_loss",
        "actor/pg_clipfrac", "actor/ppo_kl", "actor/entropy", "actor/kl_loss",
        "actor/reward_kl_penalty", "response_length/mean", "response_length/clip_ratio",
        "timing_s/gen", "timing_s/reward", "timing_s/ref", "timing_s/update_actor",
        "timing_s/update_weights", "perf/throughput", "policy_version", "staleness/max"}) {
    EXPECT_TRUE(steps.back().contains(key)) << key;
  }
  // Synchronous: every step generates with the version just synced, none stale.
  for (const auto& row : steps) {
    EXPECT_EQ(row["staleness/max"], 0) << row["step"];
    EXPECT_EQ(row["policy_version"], row["step"]) << row["step"];
  }
  // samples.jsonl shows what the policy writes, with the version that wrote it.
  const auto samples = read_jsonl(run_dir + "/samples.jsonl");
  ASSERT_EQ(samples.size(), 40u * 4);
  for (const char* key : {"prompt", "response", "score", "reward", "advantage", "kl"})
    EXPECT_TRUE(samples.back().contains(key)) << key;
  EXPECT_EQ(samples.back()["policy_version"], 40);
  EXPECT_TRUE(fs::exists(run_dir + "/reward.svg"));
  EXPECT_TRUE(fs::exists(run_dir + "/init/step-60/manifest.json")) << "the initial policy";
}

// rlhf.actor.policy_loss.loss_mode gspo (veRL's key): the policy trains on each response's ratio,
// and GRPO on digit completion still raises the greedy validation score; the same run with
// veRL's vanilla loss takes other steps.
TEST(RlhfTest, GspoTrainsOnEachResponsesRatioAndRaisesTheScore) {
  temp_dir dir;
  auto run = [&](const std::string& name, std::vector<std::string> sets) {
    std::vector<std::string> args = {"launch", grpo_config, "--run-dir", dir.file(name)};
    for (const auto& s : sets) {
      args.push_back("--set");
      args.push_back(s);
    }
    const process_result r = troupe(args, std::chrono::minutes(10));
    EXPECT_EQ(r.exit_code, 0) << r.err;
    std::vector<nlohmann::json> rows = read_jsonl(dir.file(name) + "/metrics.jsonl");
    return rows;
  };
  const auto gspo = run("gspo", {"rlhf.actor.policy_loss.loss_mode=gspo",
                                 "rlhf.actor.loss_agg_mode=seq-mean-token-mean"});
  const auto vanilla = run("vanilla", {"rlhf.actor.loss_agg_mode=seq-mean-token-mean"});
  std::vector<double> validation, gspo_losses, vanilla_losses;
  for (const auto& row : gspo) {
    if (row.contains("val-core/digit_completion/reward/mean@1")) {
      validation.push_back(row["val-core/digit_completion/reward/mean@1"]);
    }
    if (row.contains("actor/pg_loss")) gspo_losses.push_back(row["actor/pg_loss"]);
  }
  for (const auto& row : vanilla) {
    if (row.contains("actor/pg_loss")) vanilla_losses.push_back(row["actor/pg_loss"]);
  }
  ASSERT_EQ(gspo_losses.size(), 40u);
  ASSERT_GE(validation.size(), 2u);
  EXPECT_GT(validation.back(), validation.front() + 0.05);
  EXPECT_NE(gspo_losses, vanilla_losses);
}

// The upper median (the 6th smallest) of values[first, first + 10).
double median_of_ten(std::vector<double> values, size_t first) {
  std::nth_element(values.begin() + first, values.begin() + first + 5, values.begin() + first + 10);
  return values[first + 5];
}

// The mean over a run's steps of the KL to the reference, and its last row.
struct kl_trace {
  double mean_kl = 0;
  nlohmann::json last;
};
kl_trace kl_of(const std::string& run_dir) {
  kl_trace t;
  int steps = 0;
  for (const auto& row : read_jsonl(run_dir + "/metrics.jsonl")) {
    if (!row.contains("critic/score/mean")) continue;
    t.mean_kl += row["actor/reward_kl_penalty"].get<double>();
    t.last = row;
    ++steps;
  }
  t.mean_kl /= std::max(1, steps);
  return t;
}

// PPO with GAE and a critic (configs/rlhf_ppo.yaml for 60 of its steps): the score rises (the
// median of the last 10 steps' scores beats the first 10's: a step's score of 256 responses is
// noisy, and now and then one step's falls to half the others'; a median of 10 ignores it), the
// critic's metrics are veRL's, and the KL penalty bounds the KL: the same run with kl_coef 0
// drifts further from the reference.
TEST(RlhfTest, PpoWithACriticRaisesTheScoreAndItsKlPenaltyBoundsTheKl) {
  temp_dir dir;
  const auto launch = [&](const std::string& name, std::vector<std::string> extra) {
    std::vector<std::string> args = {"launch",    ppo_config,
                                     "--run-dir", dir.file(name),
                                     "--set",     "rlhf.trainer.total_training_steps=60",
                                     "--set",     "rlhf.trainer.test_freq=0",
                                     "--set",     "rlhf.trainer.save_freq=0"};
    args.insert(args.end(), extra.begin(), extra.end());
    const process_result r = troupe(args, std::chrono::minutes(10));
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return summary_of(r);
  };
  const nlohmann::json ppo = launch("ppo", {});
  EXPECT_EQ(ppo["status"], "succeeded");
  std::vector<double> scores;
  for (const auto& row : read_jsonl(dir.file("ppo") + "/metrics.jsonl")) {
    if (row.contains("critic/score/mean")) scores.push_back(row["critic/score/mean"]);
  }
  ASSERT_EQ(scores.size(), 60u);
  EXPECT_GT(median_of_ten(scores, 50), median_of_ten(scores, 0) + 0.02)
      << "the last 10 steps' median score against the first's";
  const nlohmann::json free = launch("free", {"--set", "rlhf.algorithm.kl_ctrl.type=fixed", "--set",
                                              "rlhf.algorithm.kl_ctrl.kl_coef=0"});
  EXPECT_EQ(free["status"], "succeeded");

  const kl_trace bounded = kl_of(dir.file("ppo")), unbounded = kl_of(dir.file("free"));
  EXPECT_LT(bounded.mean_kl, 0.75 * unbounded.mean_kl)
      << "with the KL penalty " << bounded.mean_kl << ", without " << unbounded.mean_kl;
  EXPECT_NE(bounded.last["actor/reward_kl_penalty_coeff"].get<double>(), 0.01)
      << "the adaptive controller steers the coefficient";
  EXPECT_EQ(unbounded.last["actor/reward_kl_penalty_coeff"].get<double>(), 0.0);
  for (const char* key :
       {"critic/values/mean", "critic/vf_explained_var", "critic/vf_loss", "critic/vf_clipfrac",
        "critic/vpred_mean", "critic/grad_norm", "critic/lr", "timing_s/values",
        "timing_s/update_critic", "actor/pg_loss", "critic/rewards/mean", "critic/returns/mean"}) {
    EXPECT_TRUE(bounded.last.contains(key)) << key;
  }
  // The critic learned something of the returns (in most steps: a step whose score falls to half
  // the others' has returns it did not expect).
  std::vector<double> explained;
  for (const auto& row : read_jsonl(dir.file("ppo") + "/metrics.jsonl")) {
    if (row.contains("critic/vf_explained_var"))
      explained.push_back(row["critic/vf_explained_var"]);
  }
  ASSERT_EQ(explained.size(), 60u);
  EXPECT_GT(median_of_ten(explained, 50), 0.3);
  EXPECT_TRUE(fs::exists(dir.file("ppo") + "/init/step-300/manifest.json"));
}

// The rollout's log-probs are the policy's, bit for bit (the CPU kernels are batch-invariant),
// the end token's included: a PPO run whose policy recomputes them
// (rollout_correction.bypass_mode false) measures no difference, and the default run, which
// takes the rollout's instead, is the same run row for row.
TEST(RlhfTest, TheRolloutsLogProbsAreThePolicysSoBypassingTheRecomputeChangesNothing) {
  temp_dir dir;
  const auto launch = [&](const std::string& name, const std::string& set) {
    const process_result r =
        troupe(launch_args(ppo_config, dir.file(name),
                           short_rl_run(5, {"rlhf.warmup.steps=50", "rlhf.data.train_batch_size=32",
                                            "rlhf.actor.ppo_mini_batch_size=16", set})),
               std::chrono::minutes(5));
    EXPECT_EQ(r.exit_code, 0) << r.err;
  };
  launch("bypass", "rlhf.algorithm.rollout_correction.bypass_mode=true");
  launch("recompute", "rlhf.algorithm.rollout_correction.bypass_mode=false");
  const auto bypassed = rl_step_rows(dir.file("bypass"));
  auto recomputed = rl_step_rows(dir.file("recompute"));
  ASSERT_EQ(recomputed.size(), 5u);
  for (auto& row : recomputed) {
    EXPECT_EQ(row["training/rollout_probs_diff_max"].get<double>(), 0.0) << row["step"];
    EXPECT_LT(row["response_length/clip_ratio"].get<double>(), 1.0) << "some responses ended";
    row.erase("training/rollout_probs_diff_max");
    row.erase("training/rollout_probs_diff_mean");
  }
  EXPECT_EQ(bypassed, recomputed);
}

// Two elastic policy ranks (roles.policy.elastic, one per local worker) train as a fixed group
// of two (rlhf.actor.dp 2) does: the same rows, bit for bit (the same split of every
// mini-batch, each rank on the same cores).
TEST(RlhfTest, TwoElasticPolicyRanksTrainAsAFixedPairDoes) {
  temp_dir dir;
  const auto run = [&](const std::string& name, std::vector<std::string> sets) {
    for (const char* set : {"cluster.local_workers=2", "roles.reference.placement=head",
                            "roles.reward.placement=head", "roles.rollout.placement=head"}) {
      sets.push_back(set);
    }
    std::vector<std::string> args = {"launch", grpo_config, "--run-dir", dir.file(name)};
    for (const auto& set : short_rl_run(3, sets))
      args.push_back(set);
    const process_result r = troupe(args, std::chrono::minutes(3));
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return rl_step_rows(dir.file(name));
  };
  const auto elastic = run("elastic", {"roles.policy.elastic={min: 1, max: 2}"});
  const auto fixed = run("fixed", {"rlhf.actor.dp=2", "roles.policy.count=2"});
  ASSERT_EQ(elastic.size(), 3u);
  EXPECT_EQ(elastic, fixed);
}

// A run stopped after step 3 and resumed continues bit for bit as the uninterrupted run: the
// policy's (and with PPO the critic's) weights and optimizer, the prompt cursor, the policy
// version and the KL coefficient come back, the reference stays on the initial policy, and
// sampling seeds are a function of the prompt only. "elastic": the policy and the critic each
// one rank per worker of two (roles.<role>.elastic), whose first generation restores the
// checkpoint as it forms.
class RlhfResumeTest : public ::testing::TestWithParam<std::string> {};

TEST_P(RlhfResumeTest, AResumedRunMatchesTheUninterruptedOneBitForBit) {
  temp_dir dir;
  const std::string name = GetParam().substr(0, GetParam().find(' '));
  const std::string config = std::string(TROUPE_SOURCE_DIR) + "/configs/" + name + ".yaml";
  std::vector<std::string> shortened = {"--set", "rlhf.trainer.total_training_steps=6",
                                        "--set", "rlhf.trainer.save_freq=3",
                                        "--set", "rlhf.trainer.test_freq=0",
                                        "--set", "rlhf.warmup.steps=20",
                                        "--set", "rlhf.data.train_batch_size=16",
                                        "--set", "rlhf.actor.ppo_mini_batch_size=8",
                                        "--set", "rlhf.algorithm.use_kl_in_reward=true",
                                        "--set", "rlhf.algorithm.kl_ctrl.type=adaptive"};
  if (GetParam().ends_with(" elastic")) {
    shortened.insert(
        shortened.end(),
        {"--set", "cluster.local_workers=2", "--set", "roles.policy.elastic={min: 1, max: 2}",
         "--set", "roles.critic.elastic={min: 1, max: 2}", "--set",
         "roles.reference.placement=head", "--set", "roles.reward.placement=head", "--set",
         "roles.rollout.placement=head"});
  }
  const auto launch = [&](const std::string& name, std::vector<std::string> extra) {
    std::vector<std::string> args = {"launch", config, "--run-dir", dir.file(name)};
    args.insert(args.end(), shortened.begin(), shortened.end());
    args.insert(args.end(), extra.begin(), extra.end());
    const process_result r = troupe(args, std::chrono::minutes(5));
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return summary_of(r);
  };
  const nlohmann::json straight = launch("straight", {});
  const nlohmann::json first = launch("first", {"--set", "rlhf.trainer.stop_after=3"});
  EXPECT_EQ(first["stopped_after"], 3);
  const nlohmann::json second = launch("second", {"--resume", dir.file("first")});
  EXPECT_EQ(second["steps"], 6);

  const auto want = rl_step_rows(dir.file("straight"));
  auto got = rl_step_rows(dir.file("first"));
  const auto rest = rl_step_rows(dir.file("second"));
  got.insert(got.end(), rest.begin(), rest.end());
  ASSERT_EQ(want.size(), 6u);
  ASSERT_EQ(got.size(), 6u);
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_EQ(got[i], want[i]) << "step " << i + 1;
  EXPECT_EQ(second["kl_coef"], straight["kl_coef"]);
  EXPECT_NE(straight["kl_coef"], 0.001) << "the adaptive KL coefficient moved";
  if (name == "rlhf_ppo") {
    EXPECT_TRUE(want.back().contains("critic/vf_loss"));
    EXPECT_TRUE(fs::exists(dir.file("first") + "/checkpoints/step-3/critic-model.safetensors"));
  }
}

INSTANTIATE_TEST_SUITE_P(Configs, RlhfResumeTest,
                         ::testing::Values("rlhf_grpo", "rlhf_ppo", "rlhf_ppo elastic"));

TEST(RlhfTest, BadConfigsAreRefusedWithTheirLocation) {
  temp_dir dir;
  const std::string path =
      dir.write("bad.yaml",
                "app: rlhf\n"
                "model: {vocab: 256, ctx: 32, layers: 2, dim: 64, heads: 4}\n"
                "roles:\n"
                "  policy: {kind: trainer, impl: gpt_policy, count: 1}\n"
                "  reference: {kind: trainer, impl: gpt_reference}\n"
                "  rollout: {kind: inference_worker, impl: gpt_rollout, count: 1}\n"
                "  reward: {kind: reward, impl: digit_completion}\n"
                "  critic: {kind: trainer, impl: gpt_policy}\n"
                "rlhf:\n"
                "  data: {train_batch_size: 16}\n"
                "  actor: {ppo_mini_batch_size: 6, dp: 1}\n"
                "  rollout: {n: 3}\n"
                "  algorithm: {adv_estimator: grpo}\n");
  process_result r = troupe({"check", path});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find(path + ":11:32: rlhf.actor.ppo_mini_batch_size: is 6, which does not "
                              "divide data.train_batch_size 16"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("roles.critic is set, but adv_estimator is grpo, which has no critic"),
            std::string::npos)
      << r.err;

  // GSPO is a loss per response: veRL aggregates it by seq-mean-token-mean, and so must the config.
  r = troupe({"check", grpo_config, "--set", "rlhf.actor.policy_loss.loss_mode=gspo"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("rlhf.actor.loss_agg_mode is token-mean: set it to seq-mean-token-mean"),
            std::string::npos)
      << r.err;

  // A critic section with grpo; gae without the critic role.
  r = troupe({"check", grpo_config, "--set", "rlhf.critic.lr=0.01"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("rlhf.critic: is set, but adv_estimator grpo has no critic (only gae does)"),
            std::string::npos)
      << r.err;
  r = troupe({"check", grpo_config, "--set", "rlhf.algorithm.adv_estimator=gae"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("app: rlhf needs a role 'critic' of kind trainer and impl gpt_critic"),
            std::string::npos)
      << r.err;

  const std::string unknown =
      dir.write("unknown.yaml",
                "app: rlhf\n"
                "model: {vocab: 256, ctx: 32, layers: 2, dim: 64, heads: 4}\n"
                "rlhf:\n"
                "  algorithm: {adv_estimator: ppo}\n");
  r = troupe({"check", unknown});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find(unknown + ":4:30: rlhf.algorithm.adv_estimator: 'ppo' is not allowed"),
            std::string::npos)
      << r.err;

  // 5 policy ranks cannot split a mini-batch of 8 prompts x 8 responses.
  r = troupe({"check", grpo_config, "--set", "rlhf.actor.dp=5", "--set", "roles.policy.count=5"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("rlhf.actor.dp: is 5, which does not divide a mini-batch's 64 responses"),
            std::string::npos)
      << r.err;

  r = troupe({"check", grpo_config});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("policy updates per RL step: 2"), std::string::npos) << r.out;

  // An elastic policy's ranks are its members: no dp, and a response of every mini-batch for
  // each of up to max ranks.
  r = troupe({"check", grpo_config, "--set", "roles.policy.elastic={min: 1, max: 100}", "--set",
              "rlhf.actor.dp=2"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("rlhf.actor.dp: is 2, but roles.policy.elastic makes the policy's ranks "
                       "the actors that are alive"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("rlhf.actor.ppo_mini_batch_size: is 8 prompts x rollout.n 8, but "
                       "roles.policy.elastic.max 100 ranks each need a response of every "
                       "mini-batch"),
            std::string::npos)
      << r.err;
  r = troupe({"check", grpo_config, "--set", "roles.policy.elastic={min: 1, max: 4}"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("each on 64 responses, split over 1 to 4 policy ranks "
                       "(roles.policy.elastic)"),
            std::string::npos)
      << r.out;

  // The critic's own mini-batch must divide the batch too; its updates are listed beside the
  // policy's.
  r = troupe({"check", ppo_config, "--set", "rlhf.critic.ppo_mini_batch_size=100"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("rlhf.critic.ppo_mini_batch_size: is 100, which does not divide "
                       "data.train_batch_size"),
            std::string::npos)
      << r.err;
  r = troupe({"check", ppo_config, "--set", "rlhf.critic.ppo_epochs=2"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("critic updates per RL step: 8 (ppo_epochs 2"), std::string::npos) << r.out;

  // Where the roles land, and colocation groups that cannot be.
  r = troupe({"check", ppo_config, "--set",
              "rlhf.placement.colocate=[[policy, reference], [critic, reward]]"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("one process each for [policy, reference] and [critic, reward] "
                       "(rlhf.placement.colocate); spread over the workers: rollout"),
            std::string::npos)
      << r.out;
  r = troupe({"check", grpo_config, "--set", "rlhf.placement.colocate=[[policy, critic], [policy]]",
              "--set", "roles.rollout.elastic={min: 1, max: 2}"});
  EXPECT_EQ(r.exit_code, 2);
  for (const char* error : {"names 'critic', which is not a role of this run",
                            "each group names two roles or more", "names 'policy' in two groups"}) {
    EXPECT_NE(r.err.find(std::string("rlhf.placement.colocate: ") + error), std::string::npos)
        << error << "\n"
        << r.err;
  }
  r = troupe({"check", grpo_config, "--set", "rlhf.placement.colocate=[[rollout, reward]]", "--set",
              "roles.rollout.elastic={min: 1, max: 2}"});
  EXPECT_NE(r.err.find("names 'rollout', an elastic role"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace troupe::testing

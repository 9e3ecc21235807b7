// `app: rlhf` end to end through the real binary: GRPO on the digit-completion task raises the
// score, writes veRL's metrics, samples and reward.svg, and bad configs are refused with their
// file, line and column.

#include <filesystem>
#include <set>

#include <gtest/gtest.h>

#include "tests/integration/troupe_cli.hpp"

namespace troupe::testing {
namespace {

namespace fs = std::filesystem;

const std::string grpo_config = std::string(TROUPE_SOURCE_DIR) + "/configs/rlhf_grpo.yaml";

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
  for (const char* key : {"critic/score/mean",
                          "critic/rewards/mean",
                          "critic/advantages/mean",
                          "actor/pg_loss",
                          "actor/pg_clipfrac",
                          "actor/ppo_kl",
                          "actor/entropy",
                          "actor/kl_loss",
                          "actor/reward_kl_penalty",
                          "response_length/mean",
                          "response_length/clip_ratio",
                          "timing_s/gen",
                          "timing_s/reward",
                          "timing_s/ref",
                          "timing_s/old_log_prob",
                          "timing_s/update_actor",
                          "timing_s/update_weights",
                          "perf/throughput",
                          "policy_version",
                          "staleness/max",
                          "training/rollout_probs_diff_max"}) {
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
  EXPECT_NE(r.err.find("app: rlhf has no role 'critic'"), std::string::npos) << r.err;

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
}

}  // namespace
}  // namespace troupe::testing

// DPO and the alignment chain from the shipped configs (issue 19), on real processes and files:
// `troupe data preferences` on the SFT policy, a reward model and a DPO policy each started from
// the SFT run, every stage improving its own held-out figure; DPO's reference log-probabilities
// cached beside the pairs and computed anew for another reference; `troupe eval` scoring greedy
// responses by the rule; a DPO run resumed bit for bit; DPO's keys refused where they do not
// belong.

#include <filesystem>

#include "tests/integration/alignment_fixture.hpp"

namespace troupe::testing {
namespace {

namespace fs = std::filesystem;

const std::string task_config = std::string(TROUPE_SOURCE_DIR) + "/configs/rlhf_ppo.yaml";

// The rows of a run's metrics that hold `key`.
std::vector<nlohmann::json> rows_with(const std::string& run, const std::string& key) {
  std::vector<nlohmann::json> out;
  for (const auto& row : read_jsonl(run + "/metrics.jsonl"))
    if (row.contains(key)) out.push_back(row);
  return out;
}

// SFT -> preference data -> reward model and DPO, as docs/alignment.md runs them, shortened:
// SFT's held-out loss falls, the reward model's held-out loss falls and its reward gap rises
// (its accuracy, over 50 held-out pairs, already about 0.7 at the first evaluation, stays above
// chance: one pair more or less is 0.02 there), and DPO's held-out pairs' implicit reward accuracy
// and margin rise while its loss falls. Every DPO step reports TRL's figures.
TEST_F(AlignmentTest, TheChainSftPreferencesRewardModelDpoImprovesEachStage) {
  const auto sft = rows_with(dir_.file("sft"), "val_loss");
  ASSERT_GE(sft.size(), 2u);
  EXPECT_LT(sft.back()["val_loss"].get<double>(), sft.front()["val_loss"].get<double>());

  const std::string pairs = dir_.file("data/policy_pairs.jsonl");
  process_result r =
      troupe({"data", "preferences", task_config, "--policy", dir_.file("sft"), "--prompts", "1500",
              "--samples", "8", "--rejected", "random", "--out", pairs});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(summary_of(r)["out"]["pairs"], read_jsonl(pairs).size());

  r = troupe({"launch", rm_config, "--run-dir", dir_.file("rm"), "--set",
              "reward_model.data.path=" + pairs, "--set",
              "reward_model.init_from=" + dir_.file("sft"), "--set", "reward_model.train.steps=200",
              "--set", "reward_model.data.eval_every=50"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto rm = rows_with(dir_.file("rm"), "val_accuracy");
  ASSERT_EQ(rm.size(), 4u);
  EXPECT_GE(rm.back()["val_accuracy"].get<double>(), 0.6) << rm.front().dump() << "\n"
                                                          << rm.back().dump();
  EXPECT_GT(rm.back()["val_reward_gap"].get<double>(), rm.front()["val_reward_gap"].get<double>());
  EXPECT_LT(rm.back()["val_loss"].get<double>(), rm.front()["val_loss"].get<double>());

  r = dpo("dpo", pairs, 200);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json summary = summary_of(r);
  EXPECT_EQ(summary["app"], "dpo");
  const auto evals = rows_with(dir_.file("dpo"), "val_rewards/accuracies");
  ASSERT_EQ(evals.size(), 4u);
  const auto& first = evals.front();
  const auto& last = evals.back();
  EXPECT_GT(last["val_rewards/accuracies"].get<double>(),
            first["val_rewards/accuracies"].get<double>())
      << first.dump() << "\n"
      << last.dump();
  EXPECT_GT(last["val_rewards/margins"].get<double>(), first["val_rewards/margins"].get<double>());
  EXPECT_LT(last["val_loss"].get<double>(), first["val_loss"].get<double>());
  EXPECT_EQ(summary["val_rewards/accuracies"], last["val_rewards/accuracies"]);
  const auto steps = rows_with(dir_.file("dpo"), "rewards/chosen");
  ASSERT_EQ(steps.size(), 200u);
  for (const char* key : {"loss", "rewards/rejected", "rewards/accuracies", "rewards/margins",
                          "logps/chosen", "logps/rejected"}) {
    EXPECT_TRUE(steps.back().contains(key)) << key;
  }
  // At step 1 the policy is its reference: the implicit rewards are 0.
  EXPECT_NEAR(steps.front()["rewards/chosen"].get<double>(), 0.0, 1e-3);
  EXPECT_NEAR(steps.front()["rewards/margins"].get<double>(), 0.0, 1e-3);
  std::ifstream plot(summary.value("loss_plot", ""));
  const std::string svg((std::istreambuf_iterator<char>(plot)), std::istreambuf_iterator<char>());
  EXPECT_NE(svg.find("held-out pairs ranked right"), std::string::npos);
}

// The reference's log-probabilities are computed once into a cache beside the pairs and read
// back by the next run; a run against another reference computes them anew.
TEST_F(AlignmentTest, DposReferenceLogProbsAreCachedBesideThePairsUntilTheReferenceChanges) {
  const std::string cache = pairs_ + ".reference.safetensors";
  process_result r = dpo("first", pairs_, 20);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_TRUE(fs::exists(cache));
  const auto made = fs::last_write_time(cache);
  r = dpo("second", pairs_, 20);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(fs::last_write_time(cache), made) << "read, not written again";
  EXPECT_EQ(rows_by_step({dir_.file("first")}), rows_by_step({dir_.file("second")}));
  // The first DPO run's checkpoint as the reference: other weights, so other log-probs.
  r = dpo("third", pairs_, 20, {"--set", "dpo.reference=" + dir_.file("first")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(fs::last_write_time(cache), made) << "computed anew for another reference";
  EXPECT_NE(rows_with(dir_.file("third"), "loss").front()["rewards/margins"],
            rows_with(dir_.file("first"), "loss").front()["rewards/margins"]);
}

// Stopped after step 30 and resumed in a new run directory, DPO's metrics rows are the
// uninterrupted run's bit for bit.
TEST_F(AlignmentTest, ADpoRunResumesBitForBit) {
  const std::string every_10 = "dpo.data.eval_every=10";
  process_result whole = dpo("whole", pairs_, 50, {"--set", every_10});
  ASSERT_EQ(whole.exit_code, 0) << whole.err;
  process_result first =
      dpo("split", pairs_, 50, {"--set", every_10, "--set", "dpo.train.stop_after=30"});
  ASSERT_EQ(first.exit_code, 0) << first.err;
  process_result second =
      dpo("resumed", pairs_, 50, {"--set", every_10, "--resume", dir_.file("split")});
  ASSERT_EQ(second.exit_code, 0) << second.err;
  expect_the_same_rows("whole", "split", "resumed");
}

// `troupe eval` scores a policy's greedy responses by the task's rule: the summary's mean is
// the mean of the written responses' scores, each a share in [0, 1].
TEST_F(AlignmentTest, EvalScoresGreedyResponsesByTheRule) {
  const std::string out = dir_.file("eval.jsonl");
  process_result r = troupe({"eval", task_config, "--policy", dir_.file("sft"), "--prompts", "60",
                             "--first", "100", "--out", out});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json summary = summary_of(r);
  const auto lines = read_jsonl(out);
  ASSERT_EQ(lines.size(), 60u);
  double sum = 0;
  for (const auto& line : lines) {
    const double score = line["score"];
    EXPECT_GE(score, 0.0);
    EXPECT_LE(score, 1.0);
    sum += score;
  }
  EXPECT_NEAR(summary["greedy_score_mean"].get<double>(), sum / 60, 1e-9);
  EXPECT_GT(summary["greedy_score_mean"].get<double>(), 0.0) << "SFT answers some prompts";
  // Greedy: the same responses again.
  r = troupe({"eval", task_config, "--policy", dir_.file("sft"), "--prompts", "60", "--first",
              "100", "--out", out});
  EXPECT_EQ(read_jsonl(out), lines);
  r = troupe({"eval", task_config, "--policy", dir_.file("nowhere")});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--policy"), std::string::npos) << r.err;
}

// PPO against the learned reward (configs/align/ppo_rm.yaml, shortened): the reward role scores
// with the reward model's checkpoint, and the task's rule is logged beside it
// (critic/true_score/mean, each sample's true_score, a series of reward.svg). A reward role
// pointed at a language model's checkpoint is refused, naming the setting.
TEST_F(AlignmentTest, PpoAgainstTheRewardModelLogsTheRulesTrueScoreBesideIt) {
  process_result r = reward_model("rm", 100);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::vector<std::string> shortened = {"--set", "rlhf.init_from=" + dir_.file("sft"),
                                              "--set", "rlhf.trainer.total_training_steps=3",
                                              "--set", "rlhf.trainer.test_freq=3",
                                              "--set", "rlhf.data.train_batch_size=16",
                                              "--set", "rlhf.actor.ppo_mini_batch_size=8",
                                              "--set", "rlhf.trainer.val_prompts=8",
                                              "--set", "cluster.local_workers=0"};
  std::vector<std::string> args = {
      "launch",         ppo_rm_config, "--run-dir",
      dir_.file("ppo"), "--set",       "roles.reward.options.checkpoint=" + dir_.file("rm")};
  args.insert(args.end(), shortened.begin(), shortened.end());
  r = troupe(args, std::chrono::minutes(5));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto rows = rows_with(dir_.file("ppo"), "critic/true_score/mean");
  ASSERT_EQ(rows.size(), 3u);
  for (const auto& row : rows) {
    const double rule = row["critic/true_score/mean"];
    EXPECT_GE(rule, 0.0);
    EXPECT_LE(rule, 1.0);
    EXPECT_NE(row["critic/score/mean"].get<double>(), rule) << "the reward model's, not the rule's";
  }
  EXPECT_FALSE(rows_with(dir_.file("ppo"), "val-core/digit_completion/true_reward/mean@1").empty());
  for (const auto& sample : read_jsonl(dir_.file("ppo") + "/samples.jsonl")) {
    ASSERT_TRUE(sample.contains("true_score")) << sample.dump();
  }
  std::ifstream plot(dir_.file("ppo") + "/reward.svg");
  const std::string svg((std::istreambuf_iterator<char>(plot)), std::istreambuf_iterator<char>());
  EXPECT_NE(svg.find("critic/true_score/mean"), std::string::npos);

  args[5] = "roles.reward.options.checkpoint=" + dir_.file("sft");  // a language model
  args[3] = dir_.file("ppo_lm");
  r = troupe(args, std::chrono::minutes(5));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("roles.reward.options.checkpoint"), std::string::npos) << r.err;
}

// DPO starts from a policy, its keys belong to app: dpo alone, and cDPO's smoothing is the
// sigmoid loss's.
TEST_F(AlignmentTest, DposConfigMistakesAreRefusedWithTheKey) {
  process_result r = troupe(
      {"check", dpo_config, "--set", "dpo.data.path=" + pairs_, "--set", "dpo.init_from=''"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("init_from: is not set"), std::string::npos) << r.err;
  r = troupe({"check", dpo_config, "--set", "dpo.data.path=" + pairs_, "--set",
              "dpo.init_from=" + dir_.file("sft"), "--set", "dpo.loss_type=ipo", "--set",
              "dpo.label_smoothing=0.1"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("label_smoothing: is 0.1, but it is cDPO's"), std::string::npos) << r.err;
  r = troupe({"check", rm_config, "--set", "reward_model.beta=0.2"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("beta: is set, but it configures app: dpo's loss"), std::string::npos)
      << r.err;
  r = troupe({"check", dpo_config, "--set", "dpo.init_from=" + dir_.file("sft"), "--set",
              "dpo.data.format=sft"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("app: dpo trains on preference pairs"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace troupe::testing

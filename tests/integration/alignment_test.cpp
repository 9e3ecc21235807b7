// The alignment pipeline's stages from the shipped configs (issue 19), on real processes and
// files: SFT (configs/align/sft.yaml) on `troupe data sft`'s examples, then a reward model
// (configs/align/rm.yaml) started from the SFT checkpoint on preference pairs, whose held-out
// accuracy rises; the reward model resumes bit for bit; a malformed pair file is refused naming
// its line.

#include <cstdio>
#include <fstream>
#include <iterator>

#include <gtest/gtest.h>

#include "tests/integration/alignment_fixture.hpp"

namespace troupe::testing {
namespace {

TEST_F(AlignmentTest, TheRewardModelLearnsToRankTheChosenResponseAbove) {
  const process_result r = reward_model("rm", 200);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json summary = summary_of(r);
  EXPECT_EQ(summary["app"], "reward_model");
  std::vector<nlohmann::json> evals;
  for (const auto& row : read_jsonl(dir_.file("rm") + "/metrics.jsonl")) {
    if (row.contains("val_accuracy")) evals.push_back(row);
  }
  ASSERT_EQ(evals.size(), 4u);
  EXPECT_GT(evals.back()["val_accuracy"].get<double>(), evals.front()["val_accuracy"].get<double>())
      << evals.front().dump() << "\n"
      << evals.back().dump();
  EXPECT_GT(evals.back()["val_accuracy"].get<double>(), 0.65) << evals.back().dump();
  EXPECT_GT(evals.back()["val_reward_gap"].get<double>(), 0.0);
  EXPECT_LT(evals.back()["val_loss"].get<double>(), evals.front()["val_loss"].get<double>());
  EXPECT_EQ(summary["val_accuracy"], evals.back()["val_accuracy"]);
  // loss.svg charts the pairs' loss, the held-out accuracy and the reward gap.
  std::ifstream plot(summary.value("loss_plot", ""));
  const std::string svg((std::istreambuf_iterator<char>(plot)), std::istreambuf_iterator<char>());
  EXPECT_NE(svg.find("Bradley-Terry loss"), std::string::npos);
  EXPECT_NE(svg.find("held-out pairs ranked right"), std::string::npos);
  EXPECT_NE(svg.find("held-out reward gap"), std::string::npos);
}

// Stopped after step 60 and resumed in a new run directory, the reward model's metrics rows are
// the uninterrupted run's bit for bit.
TEST_F(AlignmentTest, ARewardModelResumesBitForBit) {
  // (Evaluated every 20 steps: the stop's own evaluation is one of them.)
  const std::string every_20 = "reward_model.data.eval_every=20";
  process_result whole = reward_model("whole", 100, {"--set", every_20});
  ASSERT_EQ(whole.exit_code, 0) << whole.err;
  process_result first =
      reward_model("split", 100, {"--set", every_20, "--set", "reward_model.train.stop_after=60"});
  ASSERT_EQ(first.exit_code, 0) << first.err;
  process_result second =
      reward_model("resumed", 100, {"--set", every_20, "--resume", dir_.file("split")});
  ASSERT_EQ(second.exit_code, 0) << second.err;
  expect_the_same_rows("whole", "split", "resumed");
}

// `troupe data preferences` samples the SFT policy's responses and ranks them by the task's
// rule: every pair's chosen response scores above its rejected one (digit completion's rule,
// recomputed here: the share of the answer's characters right until the first mismatch), the
// held-out file has the next prompts' pairs, and the reward model's config reads the file.
TEST_F(AlignmentTest, DataPreferencesRanksThePolicysOwnResponsesByTheRule) {
  const std::string out = dir_.file("data/prefs.jsonl"), held = dir_.file("data/held.jsonl");
  process_result r =
      troupe({"data", "preferences", std::string(TROUPE_SOURCE_DIR) + "/configs/rlhf_ppo.yaml",
              "--policy", dir_.file("sft"), "--prompts", "400", "--samples", "4", "--out", out,
              "--held-out", held, "--held-out-prompts", "100"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json summary = summary_of(r);
  const auto pairs = read_jsonl(out), held_pairs = read_jsonl(held);
  EXPECT_EQ(summary["out"]["pairs"], pairs.size());
  EXPECT_EQ(summary["held_out"]["pairs"], held_pairs.size());
  ASSERT_GT(pairs.size(), 50u) << "most prompts get responses that score differently";
  EXPECT_GT(summary["out"]["chosen_score_mean"].get<double>(),
            summary["out"]["rejected_score_mean"].get<double>() + 0.2);
  // The rule: the answer is the next n numbers of the sequence modulo max, then the newline.
  const auto score = [](const std::string& prompt, const std::string& response) {
    int a = 0, b = 0, max = 0, n = 0;
    EXPECT_EQ(std::sscanf(prompt.c_str(), "%d,%d:%d,%d=", &a, &b, &max, &n), 4) << prompt;
    std::string want;
    for (int k = 1, x = b; k <= n; ++k) {
      x = ((x + (b - a)) % max + max) % max;
      if (k > 1) want += ',';
      want += std::to_string(x);
    }
    want += "\n";
    size_t right = 0;
    while (right < want.size() && right < response.size() && want[right] == response[right])
      ++right;
    return static_cast<double>(right) / static_cast<double>(want.size());
  };
  for (const auto& p : pairs) {
    const std::string prompt = p["prompt"], chosen = p["chosen"], rejected = p["rejected"];
    EXPECT_GT(score(prompt, chosen), score(prompt, rejected)) << p.dump();
  }
  EXPECT_EQ(summary["held_out"]["prompts"], 100);
  EXPECT_GT(held_pairs.size(), 0u);
  r = troupe({"check", rm_config, "--set", "reward_model.data.path=" + out});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("data: pairs, "), std::string::npos) << r.out;
  r = troupe({"data", "preferences", std::string(TROUPE_SOURCE_DIR) + "/configs/rlhf_ppo.yaml",
              "--policy", dir_.file("nowhere"), "--out", out});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--policy"), std::string::npos) << r.err;
}

TEST_F(AlignmentTest, AMalformedPairFileIsRefusedNamingTheLine) {
  std::string kept;
  {
    std::ifstream in(pairs_);
    std::string line;
    for (int i = 0; i < 40 && std::getline(in, line); ++i)
      kept += line + "\n";
  }
  const std::string bad =
      dir_.write("bad.jsonl", kept + "{\"prompt\": \"1,2:20,3=\", \"chosen\": \"3,4,5\\n\"}\n");
  process_result r = troupe({"check", rm_config, "--set", "reward_model.data.path=" + bad});
  EXPECT_NE(r.out.find(bad + ":41: rejected is missing or not a string"), std::string::npos)
      << r.out;
  r = troupe({"launch", rm_config, "--run-dir", dir_.file("bad"), "--set",
              "reward_model.data.path=" + bad});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(summary_of(r).value("error", "").find(bad + ":41: rejected is missing"),
            std::string::npos)
      << r.err;
  // A pretraining config cannot read pairs, and a reward model reads nothing else.
  r = troupe({"check", rm_config, "--set", "reward_model.data.format=sft"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("app: reward_model trains on preference pairs"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace troupe::testing

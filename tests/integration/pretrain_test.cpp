// `app: pretrain` end to end, on real processes and files: exact resume (after a planned stop
// and after Ctrl-C), a resume past a corrupted checkpoint, dp=1 against dp=2, ZeRO-1/2 against
// plain data parallel, resharding, and an export of the trained run read back.

#include <algorithm>
#include <cmath>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <numeric>
#include <thread>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "models/decoder/decoder_layout.hpp"
#include "runtime/checkpoint/checkpoint_store.hpp"
#include "tests/integration/troupe_cli.hpp"

namespace troupe::testing {
namespace {

namespace fs = std::filesystem;

// Text with enough structure to learn from: numbered sentences over a small vocabulary.
std::string corpus_text() {
  const char* words[] = {"the", "actor", "sends", "a",     "message", "to",     "its", "peer",
                         "and", "waits", "for",   "reply", "while",   "others", "run"};
  std::string text;
  uint32_t x = 12345;
  for (int line = 0; line < 3000; ++line) {
    text += std::to_string(line % 97) + ":";
    for (int w = 0; w < 8; ++w) {
      x = x * 1664525u + 1013904223u;
      text += std::string(" ") + words[(x >> 16) % 15];
    }
    text += ".\n";
  }
  return text;
}

struct run_result {
  process_result process;
  nlohmann::json summary;
  std::vector<double> losses;  // by step, from metrics.jsonl
  int64_t first_step = 0;
};

class PretrainTest : public ::testing::Test {
 protected:
  PretrainTest() {
    text_ = dir_.write("corpus.txt", corpus_text());
    config_ = dir_.write("pretrain.yaml",
                         "app: pretrain\n"
                         "model: {vocab: 256, ctx: 32, layers: 2, dim: 32, heads: 2}\n"
                         "roles: {trainer: {kind: trainer, impl: gpt, count: 1}}\n"
                         "pretrain:\n"
                         "  train: {steps: 40, batch: 8, lr: 3.0e-3, warmup: 4, seed: 7}\n"
                         "  data: {path: " +
                             text_ +
                             ", eval_every: 20, eval_windows: 32}\n"
                             "  checkpoint: {every_steps: 10, keep: 5}\n"
                             "  parallel: {dp: 1, zero: 0}\n");
  }

  // `troupe launch` of the config (or of `config`) with `dp` ranks (on dp local worker processes
  // when dp > 1).
  run_result launch(const std::string& name, int dp, int zero, std::vector<std::string> extra = {},
                    const std::string& config = "") {
    std::vector<std::string> args = {
        "launch",    config.empty() ? config_ : config,
        "--run-dir", dir_.file(name),
        "--set",     "pretrain.parallel.dp=" + std::to_string(dp),
        "--set",     "roles.trainer.count=" + std::to_string(dp),
        "--set",     "pretrain.parallel.zero=" + std::to_string(zero),
        "--set",     "cluster.local_workers=" + std::to_string(dp > 1 ? dp : 0)};
    args.insert(args.end(), extra.begin(), extra.end());
    run_result r;
    r.process = troupe(args, std::chrono::minutes(3));
    r.summary = summary_of(r.process);
    bool first = true;
    for (const auto& row : read_jsonl(dir_.file(name) + "/metrics.jsonl")) {
      if (!row.contains("loss")) continue;
      if (first) r.first_step = row["step"];
      first = false;
      r.losses.push_back(row["loss"]);
    }
    return r;
  }

  std::string file_bytes(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(in)), {});
  }

  // A run split in two launches: the first's losses, then the resumed one's.
  static std::vector<double> joined(const run_result& first, const run_result& rest) {
    std::vector<double> losses = first.losses;
    losses.insert(losses.end(), rest.losses.begin(), rest.losses.end());
    return losses;
  }

  static void expect_close(const std::vector<double>& a, const std::vector<double>& b,
                           double tolerance, const std::string& what) {
    ASSERT_EQ(a.size(), b.size()) << what;
    for (size_t i = 0; i < a.size(); ++i) {
      EXPECT_NEAR(a[i], b[i], tolerance * std::abs(a[i])) << what << " at step " << i + 1;
    }
  }

  // A 40-step ZeRO-1 run on two workers (`dp` ranks and `extra`), against the same run stopped
  // after step 20 and resumed: the losses and the final checkpoint's files agree bit for bit.
  void expect_exact_resume(int dp, const std::vector<std::string>& extra) {
    const auto with = [&](std::vector<std::string> more) {
      more.insert(more.begin(), extra.begin(), extra.end());
      return more;
    };
    const run_result straight = launch("straight", dp, 1, extra);
    ASSERT_EQ(straight.process.exit_code, 0) << straight.process.err;
    EXPECT_EQ(straight.summary["steps"], 40);
    ASSERT_EQ(straight.losses.size(), 40u);
    const run_result first =
        launch("first", dp, 1, with({"--set", "pretrain.train.stop_after=20"}));
    ASSERT_EQ(first.process.exit_code, 0) << first.process.err;
    EXPECT_EQ(first.summary["steps"], 20);
    const run_result second = launch("second", dp, 1, with({"--resume", dir_.file("first")}));
    ASSERT_EQ(second.process.exit_code, 0) << second.process.err;
    EXPECT_EQ(second.first_step, 21);
    std::vector<double> split = joined(first, second);
    EXPECT_EQ(split, straight.losses);  // bit for bit
    EXPECT_EQ(second.summary["val_loss"], straight.summary["val_loss"]);
    for (const char* file :
         {"model.safetensors", "optimizer-0.safetensors", "optimizer-1.safetensors"}) {
      const std::string a = file_bytes(dir_.file("straight") + "/checkpoints/step-40/" + file);
      ASSERT_FALSE(a.empty()) << file;
      EXPECT_TRUE(a == file_bytes(dir_.file("second") + "/checkpoints/step-40/" + file)) << file;
    }
  }

  temp_dir dir_;
  std::string text_, config_;
};

TEST_F(PretrainTest, ResumeIsBitExactAcrossTwoWorkers) {
  expect_exact_resume(2, {});
}

// The quickstart's kind of group, elastic with ZeRO-1 and shard replicas, resumes bit for bit
// too: the first generation restores the checkpoint (moments, replicas and all) as it forms.
// (Each local worker offers its share of the machine's cores, which an elastic trainer computes
// on: the join lines say how many.)
TEST_F(PretrainTest, AnElasticZeroOneResumeIsBitExact) {
  expect_exact_resume(1,
                      {"--set", "roles.trainer.elastic={min: 2, max: 2}", "--set",
                       "pretrain.parallel.shard_replicas=1", "--set", "cluster.local_workers=2"});
  const unsigned share = std::max(1u, std::thread::hardware_concurrency() / 2);
  const std::string log = file_bytes(dir_.file("straight") + "/troupe.log");
  EXPECT_NE(log.find(absl::StrCat(", ", share, share == 1 ? " core, epoch" : " cores, epoch")),
            std::string::npos)
      << log;
}

// Ctrl-C mid-run, with step 31 held (so the run is in flight by construction): the driver makes
// the step in flight the last one and says so; released, it is checkpointed (off schedule) and
// the launch exits 130 naming it; resuming from it ends bit for bit where an uninterrupted run
// does.
TEST_F(PretrainTest, CtrlCCheckpointsTheStepInFlightAndTheResumeIsBitExact) {
  const std::vector<std::string> longer = {"--set", "pretrain.train.steps=60", "--set",
                                           "pretrain.checkpoint.every_steps=50"};
  const run_result straight = launch("straight", 2, 1, longer);
  ASSERT_EQ(straight.process.exit_code, 0) << straight.process.err;

  std::vector<std::string> args = {TROUPE_BINARY,
                                   "launch",
                                   config_,
                                   "--run-dir",
                                   dir_.file("stopped"),
                                   "--set",
                                   "pretrain.parallel.dp=2",
                                   "--set",
                                   "roles.trainer.count=2",
                                   "--set",
                                   "pretrain.parallel.zero=1",
                                   "--set",
                                   "cluster.local_workers=2"};
  args.insert(args.end(), longer.begin(), longer.end());
  test_hold hold(dir_);
  hold.hold(30);  // steps 1-30 run, step 31 waits
  subprocess job(args, {hold.env()});
  const auto trained = [&] {
    int64_t last = 0;
    for (const auto& row : read_jsonl(dir_.file("stopped") + "/metrics.jsonl")) {
      if (row.contains("loss")) last = row["step"];
    }
    return last;
  };
  ASSERT_TRUE(wait_until([&] { return trained() >= 30; }, std::chrono::minutes(2)))
      << job.wait(std::chrono::seconds(1)).err;
  ASSERT_EQ(trained(), 30) << "the hold let more steps run";
  job.signal(SIGINT);
  const auto stopping = wait_for_event(dir_.file("stopped"), "training_stopping");
  ASSERT_TRUE(stopping.is_object()) << job.wait(std::chrono::seconds(1)).err;
  EXPECT_EQ(stopping["step"], 31);
  hold.release();
  const process_result stopped = job.wait(std::chrono::seconds(60));
  EXPECT_EQ(stopped.exit_code, 130) << stopped.err;
  const std::string error = summary_of(stopped).value("error", "");
  EXPECT_NE(error.find("interrupted after step 31; checkpoint 31 is committed: troupe launch "
                       "CONFIG --resume"),
            std::string::npos)
      << error;
  EXPECT_EQ(trained(), 31);

  std::vector<std::string> resume = longer;
  resume.insert(resume.end(), {"--resume", dir_.file("stopped")});
  const run_result resumed = launch("resumed", 2, 1, resume);
  ASSERT_EQ(resumed.process.exit_code, 0) << resumed.process.err;
  EXPECT_EQ(resumed.first_step, 32);
  for (const char* file :
       {"model.safetensors", "optimizer-0.safetensors", "optimizer-1.safetensors"}) {
    const std::string a = file_bytes(dir_.file("straight") + "/checkpoints/step-60/" + file);
    ASSERT_FALSE(a.empty()) << file;
    EXPECT_TRUE(a == file_bytes(dir_.file("resumed") + "/checkpoints/step-60/" + file)) << file;
  }
}

// A malformed test hook is refused by name before anything runs.
TEST_F(PretrainTest, AMalformedSlowdownIsRefusedByName) {
  auto r = run({TROUPE_BINARY, "launch", config_, "--run-dir", dir_.file("run")},
               std::chrono::seconds(60), {"TROUPE_TEST_SLOWDOWN=fast"});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(summary_of(r).value("error", "").find("TROUPE_TEST_SLOWDOWN is 'fast'"),
            std::string::npos)
      << r.out;
}

TEST_F(PretrainTest, ResumeSkipsACorruptedCheckpointAndSaysWhich) {
  const run_result first = launch("first", 1, 0, {"--set", "pretrain.train.stop_after=30"});
  ASSERT_EQ(first.process.exit_code, 0) << first.process.err;
  // Flip one byte in the newest checkpoint's optimizer state.
  const std::string damaged = dir_.file("first") + "/checkpoints/step-30/optimizer-0.safetensors";
  {
    std::fstream f(damaged, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(200);
    f.put('\x7f');
  }
  const run_result resumed = launch("resumed", 1, 0, {"--resume", dir_.file("first")});
  ASSERT_EQ(resumed.process.exit_code, 0) << resumed.process.err;
  EXPECT_EQ(resumed.first_step, 21) << "step 30 is damaged, so step 20 is used";
  const auto warnings = events_of(dir_.file("resumed"), "checkpoint_skipped");
  ASSERT_EQ(warnings.size(), 1u);
  const std::string message = warnings[0]["message"];
  EXPECT_NE(message.find("step-30"), std::string::npos) << message;
  EXPECT_NE(message.find("optimizer-0.safetensors"), std::string::npos) << message;
  EXPECT_NE(resumed.process.err.find("warning: "), std::string::npos) << resumed.process.err;

  // With every checkpoint damaged there is nothing to resume from: a clear failure.
  for (const char* step : {"step-10", "step-20"}) {
    fs::resize_file(dir_.file("first") + "/checkpoints/" + step + "/model.safetensors", 64);
  }
  const run_result none = launch("none", 1, 0, {"--resume", dir_.file("first")});
  EXPECT_EQ(none.process.exit_code, 1);
  EXPECT_NE(none.summary.value("error", "").find("--resume " + dir_.file("first")),
            std::string::npos)
      << none.summary;
}

// pretrain.data.format: sft on prompt/response examples ("17+25=" -> "42\n"): the loss is the
// mean over the responses' bytes only, the same whatever the split of the global batch (two
// ranks train as one within float tolerance), and it falls.
TEST_F(PretrainTest, SftTrainsOnTheResponsesAndTwoRanksMatchOne) {
  std::string lines;
  uint32_t x = 99;
  for (int i = 0; i < 800; ++i) {
    x = x * 1664525u + 1013904223u;
    const int a = static_cast<int>((x >> 8) % 50), b = static_cast<int>((x >> 20) % 50);
    lines += absl::StrCat("{\"prompt\": \"", a, "+", b, "=\", \"response\": \"", a + b, "\\n\"}\n");
  }
  const std::vector<std::string> sft = {"--set", "pretrain.data.format=sft", "--set",
                                        "pretrain.data.path=" + dir_.write("sums.jsonl", lines)};
  const run_result one = launch("sft1", 1, 0, sft);
  ASSERT_EQ(one.process.exit_code, 0) << one.process.err;
  ASSERT_EQ(one.losses.size(), 40u);
  const auto mean = [](auto first, auto last) {
    return std::accumulate(first, last, 0.0) / static_cast<double>(last - first);
  };
  EXPECT_LT(mean(one.losses.end() - 5, one.losses.end()),
            0.6 * mean(one.losses.begin(), one.losses.begin() + 5))
      << "the responses are learnt";
  const run_result two = launch("sft2", 2, 0, sft);
  ASSERT_EQ(two.process.exit_code, 0) << two.process.err;
  expect_close(one.losses, two.losses, 1e-4, "sft at dp 2");
  EXPECT_NEAR(two.summary["val_loss"].get<double>(), one.summary["val_loss"].get<double>(), 1e-4);
}

// ZeRO-1 runs on a CURVE cluster (cluster.auth: curve): the control plane's encryption changes
// nothing of the training.
// pretrain.data.source: the records of a source role (the built-in source/text here, a record a
// line; a plugin's in InstallTest), read by each trainer rank from an instance in its own worker
// process, train bit for bit as the same text from data.path does; that role gets no actor of
// its own.
TEST_F(PretrainTest, ADataSourceRoleTrainsAsTheSameTextFromAFile) {
  std::string joined = corpus_text();
  joined.pop_back();  // the records joined by newlines: no newline after the last
  const run_result from_file =
      launch("file", 2, 1, {"--set", "pretrain.data.path=" + dir_.write("joined.txt", joined)});
  ASSERT_EQ(from_file.process.exit_code, 0) << from_file.process.err;
  const std::string config =
      dir_.write("source.yaml",
                 "app: pretrain\n"
                 "model: {vocab: 256, ctx: 32, layers: 2, dim: 32, heads: 2}\n"
                 "roles:\n"
                 "  trainer: {kind: trainer, impl: gpt, count: 1}\n"
                 "  corpus: {kind: source, impl: text, options: {path: " +
                     text_ +
                     ", delimiter: ''}}\n"
                     "pretrain:\n"
                     "  train: {steps: 40, batch: 8, lr: 3.0e-3, warmup: 4, seed: 7}\n"
                     "  data: {source: corpus, eval_every: 20, eval_windows: 32}\n");
  const run_result from_source = launch("source", 2, 1, {}, config);
  ASSERT_EQ(from_source.process.exit_code, 0) << from_source.process.err;
  ASSERT_EQ(from_source.losses.size(), 40u);
  EXPECT_EQ(from_source.losses, from_file.losses);  // bit for bit
  EXPECT_EQ(from_source.summary["val_loss"], from_file.summary["val_loss"]);
  EXPECT_EQ(events_of(dir_.file("source"), "job_started").at(0)["actors"], 2);  // the trainers
}

TEST_F(PretrainTest, TwoRanksAndZeroStagesMatchOneRank) {
  const run_result one = launch("dp1", 1, 0);
  ASSERT_EQ(one.process.exit_code, 0) << one.process.err;
  const std::string keys = dir_.file("keys");
  ASSERT_EQ(troupe({"keys", "generate", "--out", keys}, std::chrono::seconds(30)).exit_code, 0);
  for (int zero : {0, 1, 2}) {
    std::vector<std::string> curve;
    if (zero == 1) curve = {"--set", "cluster.auth=curve", "--set", "cluster.keys=" + keys};
    const run_result two = launch("dp2-zero" + std::to_string(zero), 2, zero, curve);
    ASSERT_EQ(two.process.exit_code, 0) << two.process.err;
    const auto ready = events_of(dir_.file("dp2-zero" + std::to_string(zero)), "cluster_ready");
    ASSERT_EQ(ready.size(), 1u);
    EXPECT_EQ(ready[0]["auth"], zero == 1 ? "curve" : "token");
    expect_close(one.losses, two.losses, 1e-4, "dp2 zero " + std::to_string(zero));
    EXPECT_NEAR(two.summary["val_loss"].get<double>(), one.summary["val_loss"].get<double>(), 1e-4);
  }
}

// parallel.zero 3 over two worker processes trains as ZeRO-2 within float tolerance (each pass's
// gradients are summed over the ranks block by block), checkpoints the whole model and the
// moments of each rank's chunks, and a run stopped at step 20 resumes at ZeRO-1 as the
// uninterrupted ZeRO-3 run continues.
TEST_F(PretrainTest, ZeroThreeTrainsAsZeroTwoAndResumesAtZeroOne) {
  const run_result zero2 = launch("zero2", 2, 2);
  ASSERT_EQ(zero2.process.exit_code, 0) << zero2.process.err;
  const run_result zero3 = launch("zero3", 2, 3);
  ASSERT_EQ(zero3.process.exit_code, 0) << zero3.process.err;
  expect_close(zero2.losses, zero3.losses, 1e-5, "zero 3 against zero 2");
  EXPECT_NEAR(zero3.summary["val_loss"].get<double>(), zero2.summary["val_loss"].get<double>(),
              1e-5);
  const run_result first = launch("first", 2, 3, {"--set", "pretrain.train.stop_after=20"});
  ASSERT_EQ(first.process.exit_code, 0) << first.process.err;
  const run_result second = launch("second", 2, 1, {"--resume", dir_.file("first")});
  ASSERT_EQ(second.process.exit_code, 0) << second.process.err;
  EXPECT_EQ(second.first_step, 21);
  std::vector<double> split = joined(first, second);
  expect_close(zero3.losses, split, 1e-5, "zero 3 resumed at zero 1");
}

// pretrain.parallel.activation_checkpointing recomputes the activations it did not keep with
// the same arithmetic: with every block's input kept (blocks) and with segments of 2 of the 4
// blocks (every_k), the run trains as the one that keeps everything, loss for loss, bit for bit,
// and ends with the same weights.
TEST_F(PretrainTest, ActivationCheckpointingTrainsBitForBitAsWithout) {
  const std::vector<std::string> four_layers = {"--set", "model.layers=4"};
  const run_result none = launch("none", 1, 0, four_layers);
  ASSERT_EQ(none.process.exit_code, 0) << none.process.err;
  ASSERT_EQ(none.losses.size(), 40u);
  for (const std::string mode : {"blocks", "every_k"}) {
    std::vector<std::string> sets = four_layers;
    sets.insert(sets.end(), {"--set", "pretrain.parallel.activation_checkpointing=" + mode, "--set",
                             "pretrain.parallel.checkpoint_every=2"});
    const run_result checkpointed = launch(mode, 1, 0, sets);
    ASSERT_EQ(checkpointed.process.exit_code, 0) << checkpointed.process.err;
    EXPECT_EQ(checkpointed.losses, none.losses) << mode;  // bit for bit
    EXPECT_EQ(file_bytes(dir_.file(mode) + "/checkpoints/step-40/model.safetensors"),
              file_bytes(dir_.file("none") + "/checkpoints/step-40/model.safetensors"))
        << mode;
  }
}

// Pipeline parallelism: the 2-layer model in two stages of one block (4 micro-batches, 1F1B;
// and dp 2 x pp 2 in zb1) trains as one rank, loss for loss within float tolerance (only the order
// in which gradients are added differs); a pipeline run stopped at step 20 resumes on one rank and
// a one-rank run at pp 2, both continuing as the uninterrupted run; the pipeline's checkpoint
// exports as one model.
TEST_F(PretrainTest, APipelineTrainsAsOneRankAndResumesAtAnotherLayout) {
  const run_result one = launch("one", 1, 0);
  ASSERT_EQ(one.process.exit_code, 0) << one.process.err;
  const auto pipeline = [](int dp, std::vector<std::string> more = {}) {
    std::vector<std::string> sets = {
        "--set", "pretrain.parallel.pp=2",
        "--set", "pretrain.parallel.micro_batches=" + std::to_string(4 / dp),
        "--set", "roles.trainer.count=" + std::to_string(2 * dp),
        "--set", "cluster.local_workers=2"};
    sets.insert(sets.end(), more.begin(), more.end());
    return sets;
  };
  const run_result pp2 = launch("pp2", 1, 0, pipeline(1));
  ASSERT_EQ(pp2.process.exit_code, 0) << pp2.process.err;
  expect_close(one.losses, pp2.losses, 1e-5, "pp 2");
  EXPECT_NEAR(pp2.summary["val_loss"].get<double>(), one.summary["val_loss"].get<double>(), 1e-4);
  const auto rows = read_jsonl(dir_.file("pp2") + "/metrics.jsonl");
  ASSERT_TRUE(rows.front().contains("pipeline")) << rows.front();
  EXPECT_EQ(rows.front()["pipeline"]["busy_s"].size(), 2u);
  EXPECT_DOUBLE_EQ(rows.front()["pipeline"]["bubble_theory"].get<double>(), 0.2);
  ASSERT_TRUE(pp2.summary.contains("pipeline_bubble")) << pp2.summary;
  EXPECT_GT(pp2.summary["pipeline_bubble"].get<double>(), 0.0);
  EXPECT_LT(pp2.summary["pipeline_bubble"].get<double>(), 1.0);

  // The grid in the zero-bubble schedule (its own bits: tests/actors/pipeline_trainer_test).
  const run_result grid =
      launch("dp2pp2", 2, 0, pipeline(2, {"--set", "pretrain.parallel.schedule=zb1"}));
  ASSERT_EQ(grid.process.exit_code, 0) << grid.process.err;
  expect_close(one.losses, grid.losses, 1e-5, "dp 2 x pp 2, zb1");
  EXPECT_LT(grid.summary["pipeline_bubble_theory"].get<double>(), 1.0 / 3.0)
      << "below 1F1B's (p - 1) / (m + p - 1) at p = m = 2";

  // pp 2 -> one rank, and one rank -> pp 2, each stopped after step 20.
  const run_result first =
      launch("first", 1, 0, pipeline(1, {"--set", "pretrain.train.stop_after=20"}));
  ASSERT_EQ(first.process.exit_code, 0) << first.process.err;
  const run_result rest = launch("rest", 1, 0, {"--resume", dir_.file("first")});
  ASSERT_EQ(rest.process.exit_code, 0) << rest.process.err;
  EXPECT_EQ(rest.first_step, 21);
  std::vector<double> split = joined(first, rest);
  expect_close(one.losses, split, 1e-4, "pp 2 -> pp 1");
  const run_result head = launch("head", 1, 0, {"--set", "pretrain.train.stop_after=20"});
  ASSERT_EQ(head.process.exit_code, 0) << head.process.err;
  const run_result tail = launch("tail", 1, 0, pipeline(1, {"--resume", dir_.file("head")}));
  ASSERT_EQ(tail.process.exit_code, 0) << tail.process.err;
  split = joined(head, tail);
  expect_close(one.losses, split, 1e-4, "pp 1 -> pp 2");

  const process_result exported =
      troupe({"export", dir_.file("pp2"), "--out", dir_.file("exported")});
  ASSERT_EQ(exported.exit_code, 0) << exported.err;
  EXPECT_TRUE(fs::exists(dir_.file("exported") + "/model.safetensors"));
}

// Tensor parallelism through the app: the 2-head model on two tensor-parallel ranks (a head
// each, two worker processes) trains as one rank over 40 steps, within float tolerance (the
// row-parallel sums add in another order), and so does dp 2 x tp 2 (ZeRO-1, four workers); a tp
// run stopped at step 20 resumes on one rank, and one rank's at pp 2 x tp 2, both continuing as
// the uninterrupted run; the tp run's checkpoint exports as one model.
// The --set arguments of a dp x pp x tp 2 grid (one worker per rank), then `more`.
std::vector<std::string> tp2_grid(int dp, int pp, std::vector<std::string> more = {}) {
  std::vector<std::string> sets = {
      "--set", "pretrain.parallel.tp=2",
      "--set", "pretrain.parallel.pp=" + std::to_string(pp),
      "--set", "pretrain.parallel.micro_batches=" + std::to_string(4 / dp),
      "--set", "roles.trainer.count=" + std::to_string(2 * dp * pp),
      "--set", "cluster.local_workers=" + std::to_string(2 * dp * pp)};
  sets.insert(sets.end(), more.begin(), more.end());
  return sets;
}

TEST_F(PretrainTest, TensorParallelRanksTrainAsOneAndResumeAtAnotherLayout) {
  const run_result one = launch("one", 1, 0);
  ASSERT_EQ(one.process.exit_code, 0) << one.process.err;
  const run_result tp2 = launch("tp2", 1, 0, tp2_grid(1, 1));
  ASSERT_EQ(tp2.process.exit_code, 0) << tp2.process.err;
  expect_close(one.losses, tp2.losses, 1e-5, "tp 2");
  EXPECT_NEAR(tp2.summary["val_loss"].get<double>(), one.summary["val_loss"].get<double>(), 1e-4);
  const run_result dp2tp2 = launch("dp2tp2", 2, 1, tp2_grid(2, 1));
  ASSERT_EQ(dp2tp2.process.exit_code, 0) << dp2tp2.process.err;
  expect_close(one.losses, dp2tp2.losses, 1e-5, "dp 2 x tp 2, zero 1");

  const run_result first =
      launch("first", 1, 0, tp2_grid(1, 1, {"--set", "pretrain.train.stop_after=20"}));
  ASSERT_EQ(first.process.exit_code, 0) << first.process.err;
  const run_result rest = launch("rest", 1, 0, {"--resume", dir_.file("first")});
  ASSERT_EQ(rest.process.exit_code, 0) << rest.process.err;
  EXPECT_NE(rest.process.err.find("(saved at dp 1 x tp 2, parameters and optimizer state "
                                  "resharded to dp 1)"),
            std::string::npos)
      << rest.process.err;
  std::vector<double> split = joined(first, rest);
  expect_close(one.losses, split, 1e-4, "tp 2 -> one rank");
  const run_result head = launch("head", 1, 0, {"--set", "pretrain.train.stop_after=20"});
  ASSERT_EQ(head.process.exit_code, 0) << head.process.err;
  const run_result tail = launch("tail", 1, 0, tp2_grid(1, 2, {"--resume", dir_.file("head")}));
  ASSERT_EQ(tail.process.exit_code, 0) << tail.process.err;
  split = joined(head, tail);
  expect_close(one.losses, split, 1e-4, "one rank -> pp 2 x tp 2");

  const process_result exported =
      troupe({"export", dir_.file("tp2"), "--out", dir_.file("exported")});
  ASSERT_EQ(exported.exit_code, 0) << exported.err;
  const models::decoder_config model{256, 32, 2, 32, 2};
  const models::decoder_layout layout(model, models::layer_range::all(model));
  auto weights = tensor::read_safetensors(dir_.file("exported") + "/model.safetensors");
  ASSERT_TRUE(weights.ok()) << weights.status();
  std::vector<float> params(layout.total());
  EXPECT_TRUE(layout.from_named(*weights, params.data()).ok());
}

// The Llama family through the same app: a Llama (grouped-query attention, SwiGLU) at pp 2 x
// tp 2 trains as one rank, and its checkpoint at step 20 resumes on one rank as the
// uninterrupted run continues; it exports as LlamaForCausalLM.
TEST_F(PretrainTest, ALlamaTrainsAtPipelineAndTensorParallelAndResumesOnOneRank) {
  const std::vector<std::string> llama = {"--set", "model.arch=llama", "--set", "model.heads=4",
                                          "--set", "model.kv_heads=2"};
  const auto with = [&](std::vector<std::string> sets) {
    sets.insert(sets.end(), llama.begin(), llama.end());
    return sets;
  };
  const run_result one = launch("one", 1, 0, llama);
  ASSERT_EQ(one.process.exit_code, 0) << one.process.err;
  const run_result first =
      launch("first", 1, 0, with(tp2_grid(1, 2, {"--set", "pretrain.train.stop_after=20"})));
  ASSERT_EQ(first.process.exit_code, 0) << first.process.err;
  const run_result rest = launch("rest", 1, 0, with({"--resume", dir_.file("first")}));
  ASSERT_EQ(rest.process.exit_code, 0) << rest.process.err;
  expect_close(one.losses, joined(first, rest), 1e-4, "llama pp 2 x tp 2 -> one rank");
  const process_result exported =
      troupe({"export", dir_.file("rest"), "--out", dir_.file("exported")});
  ASSERT_EQ(exported.exit_code, 0) << exported.err;
  EXPECT_NE(read_file(dir_.file("exported") + "/config.json").find("LlamaForCausalLM"),
            std::string::npos);
}

TEST_F(PretrainTest, ResumingAtAnotherDpReshardsTheOptimizer) {
  const run_result straight = launch("straight", 2, 2);
  ASSERT_EQ(straight.process.exit_code, 0) << straight.process.err;
  const run_result first = launch("first", 2, 2, {"--set", "pretrain.train.stop_after=20"});
  ASSERT_EQ(first.process.exit_code, 0) << first.process.err;
  const run_result resumed = launch("resumed", 1, 0, {"--resume", dir_.file("first")});
  ASSERT_EQ(resumed.process.exit_code, 0) << resumed.process.err;
  EXPECT_EQ(resumed.first_step, 21);
  EXPECT_FALSE(events_of(dir_.file("resumed"), "resume").empty());
  std::vector<double> split = joined(first, resumed);
  expect_close(straight.losses, split, 1e-4, "dp2 -> dp1");
}

TEST_F(PretrainTest, ExportOfATrainedRunReadsBack) {
  const run_result run = launch("run", 1, 0);
  ASSERT_EQ(run.process.exit_code, 0) << run.process.err;
  const std::string out = dir_.file("export");
  auto exported = troupe({"export", dir_.file("run"), "--format", "safetensors", "--out", out});
  ASSERT_EQ(exported.exit_code, 0) << exported.err;
  EXPECT_EQ(nlohmann::json::parse(exported.out)["step"], 40);

  const models::decoder_config model{256, 32, 2, 32, 2};
  models::decoder_layout layout(model, models::layer_range::all(model));
  auto saved = checkpoint::checkpoint_store::read(dir_.file("run") + "/checkpoints/step-40");
  ASSERT_TRUE(saved.ok()) << saved.status();
  auto weights = tensor::read_safetensors(out + "/model.safetensors");
  ASSERT_TRUE(weights.ok()) << weights.status();
  std::vector<float> got(layout.total()), want(layout.total());
  ASSERT_TRUE(layout.from_named(*weights, got.data()).ok());
  ASSERT_TRUE(layout.from_named(saved->files.at("model.safetensors"), want.data()).ok());
  EXPECT_EQ(got, want);
  std::ifstream config_file(out + "/config.json");
  const auto hf = nlohmann::json::parse(config_file);
  EXPECT_EQ(hf["n_layer"], 2);
  EXPECT_EQ(hf["n_positions"], 32);
}

}  // namespace
}  // namespace troupe::testing

// `troupe launch` end to end: real processes, real files, the example plugin.

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "tests/integration/troupe_cli.hpp"

namespace troupe::testing {
namespace {

std::string caesar(std::string s, int shift) {
  for (char& c : s) {
    if (c >= 'a' && c <= 'z') c = static_cast<char>('a' + (c - 'a' + shift) % 26);
    if (c >= 'A' && c <= 'Z') c = static_cast<char>('A' + (c - 'A' + shift) % 26);
  }
  return s;
}

class LaunchTest : public ::testing::Test {
 protected:
  // A pipeline: lines of `input` -> caesar(shift) x stages -> digest.
  std::string write_config(int lines, int shift, int count) {
    input_ = dir_.write("input.txt", numbered_lines(lines));
    return dir_.write("app.yaml",
                      "app: pipeline\n"
                      "runtime: {scheduler_threads: 2}\n"
                      "roles:\n"
                      "  lines: {kind: source, impl: text, options: {path: " +
                          input_ +
                          ", delimiter: ''}}\n"
                          "  rotate: {kind: stage, impl: caesar, plugin: example, count: " +
                          std::to_string(count) + ", options: {shift: " + std::to_string(shift) +
                          "}}\n"
                          "  digest: {kind: sink, impl: digest}\n"
                          "pipeline: {flow: [lines, rotate, digest], max_in_flight: 32}\n");
  }

  temp_dir dir_;
  std::string input_;
};

TEST_F(LaunchTest, PluginPipelineRunsEndToEnd) {
  const std::string config = write_config(500, 3, 3);
  const std::string run_dir = dir_.file("run");
  auto r = troupe({"launch", config, "--run-dir", run_dir});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto summary = summary_of(r);
  EXPECT_EQ(summary["app"], "pipeline");
  EXPECT_EQ(summary["status"], "succeeded");
  EXPECT_EQ(summary["run_dir"], run_dir);
  EXPECT_EQ(summary["items"], 500);
  std::vector<std::string> expected;
  for (int i = 0; i < 500; ++i) {
    expected.push_back(caesar("line " + std::to_string(i) + " of the Quick Brown Fox", 3));
  }
  EXPECT_EQ(summary["digest"], expected_digest(expected));
  // Exactly one JSON line on stdout.
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << r.out;

  // The run directory holds the resolved config, the event log, the log and the summary.
  for (const char* f :
       {"config.yaml", "events.jsonl", "troupe.log", "summary.json", "metrics.json"}) {
    EXPECT_TRUE(std::filesystem::exists(run_dir + "/" + f)) << f;
  }
  std::ifstream cfg(run_dir + "/config.yaml");
  std::string resolved((std::istreambuf_iterator<char>(cfg)), {});
  EXPECT_NE(resolved.find("shift: 3"), std::string::npos) << resolved;
  EXPECT_NE(resolved.find("max_attempts: 3"), std::string::npos) << resolved;  // defaults explicit
  EXPECT_EQ(events_of(run_dir, "job_succeeded").size(), 1u);
  auto progress = events_of(run_dir, "progress");
  ASSERT_FALSE(progress.empty());
  EXPECT_EQ(progress.back()["done"], 500);
  // Plain progress lines on stderr when it is not a terminal.
  EXPECT_NE(r.err.find("progress:"), std::string::npos) << r.err;
  // Every actor's messages are counted in the metrics registry.
  std::ifstream metrics_file(run_dir + "/metrics.json");
  auto metrics = nlohmann::json::parse(metrics_file);
  EXPECT_GE(metrics["actors"]["digest/0"]["messages"].get<int>(), 501);  // 500 items + finish
}

TEST_F(LaunchTest, SetOverridesChangeTheRun) {
  const std::string config = write_config(50, 3, 1);
  auto r = troupe({"launch", config, "--run-dir", dir_.file("run"), "--set",
                   "roles.rotate.options.shift=13", "--set", "roles.rotate.count=2"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::vector<std::string> expected;
  for (int i = 0; i < 50; ++i)
    expected.push_back(caesar("line " + std::to_string(i) + " of the Quick Brown Fox", 13));
  EXPECT_EQ(summary_of(r)["digest"], expected_digest(expected));
}

TEST_F(LaunchTest, BrokenConfigExitsTwoWithALocatedMessage) {
  const std::string config = write_config(5, 3, 1);
  auto r = troupe({"launch", config, "--set", "roles.rotate.cuont=2"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.out, "");
  EXPECT_NE(r.err.find("--set roles.rotate.cuont=2: roles.rotate.cuont: unknown key 'cuont'. "
                       "Did you mean 'count'?"),
            std::string::npos)
      << r.err;
}

TEST_F(LaunchTest, RefusesANonEmptyRunDirectory) {
  const std::string config = write_config(5, 3, 1);
  dir_.write("used/events.jsonl", "{}\n");
  auto r = troupe({"launch", config, "--run-dir", dir_.file("used")});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("is not empty"), std::string::npos) << r.err;
}

TEST_F(LaunchTest, InterruptStopsTheJobCleanly) {
  // A stage that holds its items keeps the job running until the interrupt.
  test_hold hold(dir_);
  hold.hold();
  const std::string input = dir_.write("input.txt", numbered_lines(300));
  const std::string config = dir_.write(
      "slow.yaml",
      "app: pipeline\nroles:\n"
      "  lines: {kind: source, impl: text, options: {path: " +
          input +
          ", delimiter: ''}}\n"
          "  slow: {kind: stage, impl: faulty, plugin: faulty, options: {fail_first: 1000, mode: "
          "hold}}\n"
          "  digest: {kind: sink, impl: digest}\n"
          "pipeline: {flow: [lines, slow, digest]}\n");
  subprocess p({TROUPE_BINARY, "launch", config, "--run-dir", dir_.file("run")},
               {std::string("TROUPE_PLUGIN_PATH=") + TROUPE_TEST_PLUGIN_DIR, hold.env()});
  ASSERT_TRUE(p.wait_for_stderr("started", std::chrono::seconds(20)));
  p.signal(SIGINT);
  auto r = p.wait(std::chrono::seconds(20));
  EXPECT_FALSE(r.timed_out);
  EXPECT_EQ(r.exit_code, 130) << r.err;
  EXPECT_EQ(summary_of(r)["status"], "interrupted");
  EXPECT_EQ(events_of(dir_.file("run"), "job_interrupted").size(), 1u);
}

}  // namespace
}  // namespace troupe::testing

// The README's run command as a new user runs it: the quickstart trains to the end (600 steps,
// two worker processes, dp=2) and reaches the pretraining issue's held-out loss.

#include <filesystem>

#include <gtest/gtest.h>

#include "tests/integration/troupe_cli.hpp"

namespace troupe::testing {
namespace {

TEST(Quickstart, TrainsToTheEnd) {
  temp_dir dir;
  const std::string run_dir = dir.file("run");
  auto r = troupe(
      {"launch", std::string(TROUPE_SOURCE_DIR) + "/configs/quickstart.yaml", "--run-dir", run_dir},
      std::chrono::minutes(14));  // inside CTest's 15 (a slow machine, TROUPE_TEST_SLOWDOWN)
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto summary = summary_of(r);
  EXPECT_EQ(summary["status"], "succeeded");
  EXPECT_EQ(summary["steps"], 600);
  EXPECT_LE(summary["val_loss"].get<double>(), 2.70) << summary;
  EXPECT_LT(summary["train_loss"].get<double>(), 2.70) << summary;
  EXPECT_GT(summary["tokens_per_s"].get<double>(), 0);
  EXPECT_EQ(summary["checkpoint_step"], 600);
  EXPECT_EQ(read_jsonl(run_dir + "/metrics.jsonl").front()["step"], 1);
  EXPECT_TRUE(std::filesystem::exists(run_dir + "/loss.svg"));
  EXPECT_NE(r.err.find("step 600: held-out loss"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace troupe::testing

// Supervision through `troupe launch`: actors that throw, return errors or hang are restarted
// per their role's policy, or fail the job with exit code 1 and the cause in the summary.

#include <gtest/gtest.h>

#include "tests/integration/troupe_cli.hpp"

namespace troupe::testing {
namespace {

class SupervisionTest : public ::testing::Test {
 protected:
  // lines -> faulty stage -> digest; `stage` is the YAML of the faulty role's extra keys.
  std::string config(int lines, const std::string& stage, const std::string& extra = "") {
    input_ = dir_.write("input.txt", numbered_lines(lines));
    for (int i = 0; i < lines; ++i)
      payloads_.push_back("line " + std::to_string(i) + " of the Quick Brown Fox");
    return dir_.write("app.yaml",
                      "app: pipeline\n"
                      "roles:\n"
                      "  lines: {kind: source, impl: text, options: {path: " +
                          input_ +
                          ", delimiter: ''}}\n"
                          "  flaky: {kind: stage, impl: faulty, plugin: faulty, " +
                          stage +
                          "}\n"
                          "  digest: {kind: sink, impl: digest}\n"
                          "pipeline: {flow: [lines, flaky, digest]" +
                          extra + "}\n");
  }

  process_result launch(const std::string& cfg) {
    return troupe({"launch", cfg, "--run-dir", run_dir()});
  }
  std::string run_dir() const { return dir_.file("run"); }

  temp_dir dir_;
  std::string input_;
  std::vector<std::string> payloads_;
};

TEST_F(SupervisionTest, ThrowingActorIsRestartedAndNoItemIsLostOrRepeated) {
  auto r = launch(config(200,
                         "on_failure: {restart: {max: 3, backoff_ms: 10}}, "
                         "options: {fail_first: 2, mode: throw}"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto summary = summary_of(r);
  EXPECT_EQ(summary["status"], "succeeded");
  EXPECT_EQ(summary["items"], 200);
  EXPECT_EQ(summary["digest"], expected_digest(payloads_));  // exactly once, in order
  EXPECT_EQ(summary["retries"], 2);
  auto failed = events_of(run_dir(), "actor_failed");
  ASSERT_EQ(failed.size(), 2u);
  EXPECT_EQ(failed[0]["actor"], "flaky/0");
  EXPECT_NE(failed[0]["error"].get<std::string>().find("injected failure on item 0"),
            std::string::npos);
  EXPECT_NE(failed[0]["error"].get<std::string>().find("std::runtime_error"), std::string::npos);
  EXPECT_EQ(failed[0]["delay_ms"], 10);
  EXPECT_EQ(failed[1]["delay_ms"], 20);  // doubled
  EXPECT_EQ(events_of(run_dir(), "actor_restarted").size(), 2u);
  EXPECT_NE(r.err.find("warning: flaky/0 failed"), std::string::npos) << r.err;
}

TEST_F(SupervisionTest, ActorReturningAnErrorIsRestarted) {
  auto r = launch(config(50,
                         "on_failure: {restart: {max: 2, backoff_ms: 1}}, "
                         "options: {fail_first: 1, mode: error}"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(summary_of(r)["digest"], expected_digest(payloads_));
  auto failed = events_of(run_dir(), "actor_failed");
  ASSERT_EQ(failed.size(), 1u);
  EXPECT_EQ(failed[0]["error"], "injected failure on item 0");
}

TEST_F(SupervisionTest, FailJobPolicyFailsTheJobWithTheCause) {
  auto r = launch(config(50, "on_failure: fail_job, options: {fail_first: 1, mode: throw}"));
  EXPECT_EQ(r.exit_code, 1) << r.err;
  auto summary = summary_of(r);
  EXPECT_EQ(summary["status"], "failed");
  const std::string error = summary["error"];
  EXPECT_NE(error.find("flaky/0 failed"), std::string::npos) << error;
  EXPECT_NE(error.find("injected failure on item 0"), std::string::npos) << error;
  EXPECT_NE(error.find("(on_failure: fail_job)"), std::string::npos) << error;
  EXPECT_EQ(events_of(run_dir(), "job_failed").size(), 1u);
  EXPECT_TRUE(events_of(run_dir(), "actor_restarted").empty());
}

TEST_F(SupervisionTest, ExhaustedRestartsFailTheJob) {
  auto r = launch(config(50,
                         "on_failure: {restart: {max: 2, backoff_ms: 1}}, "
                         "options: {fail_first: 1000, mode: error}",
                         ", max_attempts: 100"));
  EXPECT_EQ(r.exit_code, 1) << r.err;
  const std::string error = summary_of(r)["error"];
  EXPECT_NE(error.find("after 2 restarts; on_failure.restart.max is 2"), std::string::npos)
      << error;
  EXPECT_EQ(events_of(run_dir(), "actor_restarted").size(), 2u);
}

TEST_F(SupervisionTest, PoisonItemFailsTheJobAfterMaxAttempts) {
  auto r = launch(config(50,
                         "count: 2, on_failure: {restart: {max: 100, backoff_ms: 1}}, "
                         "options: {fail_first: 1000, mode: error}",
                         ", max_attempts: 3"));
  EXPECT_EQ(r.exit_code, 1) << r.err;
  const std::string error = summary_of(r)["error"];
  EXPECT_NE(error.find("failed 3 attempts at stage 'flaky'"), std::string::npos) << error;
}

// The first item hangs its actor until the test has seen both the hang reported and the item
// delivered by the other actor (items reach the sink in order, so two delivered means the hung
// one, the first or the second, was retried): the order of events holds by construction.
TEST_F(SupervisionTest, HungActorIsReportedAndItsItemRetriedElsewhere) {
  test_hold hold(dir_);
  hold.hold();
  const std::string cfg =
      config(40, "count: 2, options: {fail_first: 1, mode: hang}", ", item_timeout_ms: 300");
  subprocess job(
      {TROUPE_BINARY, "launch", cfg, "--run-dir", run_dir(), "--set", "health.interval_ms=50",
       "--set", "health.ping_timeout_ms=50", "--set", "health.unresponsive_after=2"},
      {std::string("TROUPE_PLUGIN_PATH=") + TROUPE_TEST_PLUGIN_DIR, hold.env()});
  const auto unresponsive = wait_for_event(run_dir(), "actor_unresponsive");
  ASSERT_TRUE(unresponsive.is_object()) << job.wait(std::chrono::seconds(1)).err;
  EXPECT_EQ(unresponsive["actor"].get<std::string>().rfind("flaky/", 0), 0u);
  const auto past_the_hung_item = [&] {
    for (const auto& e : events_of(run_dir(), "progress")) {
      if (e["done"].get<int>() >= 2) return true;
    }
    return false;
  };
  EXPECT_TRUE(wait_until(past_the_hung_item)) << "the hung item was not retried elsewhere";
  hold.release();
  auto r = job.wait(std::chrono::seconds(60));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto summary = summary_of(r);
  EXPECT_EQ(summary["digest"], expected_digest(payloads_));
  EXPECT_GE(summary["retries"].get<int>(), 1);
}

}  // namespace
}  // namespace troupe::testing

// Request-driven autoscaling of `app: serve` (roles.worker.autoscale, docs/serve.md#autoscaling)
// with local worker processes: a burst takes the job from 1 worker to 3, and when it has gone
// the job drains two and stops their processes, losing no request.
//
// Every state the test looks at is held by construction with the test hold (docs/testing.md):
// the engines run no iteration, or a bounded number, until the test lets them.

#include <cerrno>
#include <regex>

#include <signal.h>

#include "tests/integration/serve_fixture.hpp"

namespace troupe::testing {
namespace {

class ServeAutoscaleTest : public ServeTest {
 protected:
  ServeAutoscaleTest() { config_ = TROUPE_SOURCE_DIR "/configs/serve_autoscale.yaml"; }

  // The pid of worker node `node`'s process, from its member_joined event; 0 if not found.
  pid_t pid_of(const nlohmann::json& node) const {
    for (const auto& e : events_of(run_dir(), "member_joined")) {
      std::smatch m;
      const std::string message = e.value("message", "");
      if (e["node"] == node && std::regex_search(message, m, std::regex("\\(pid ([0-9]+)"))) {
        return std::stoi(m[1]);
      }
    }
    return 0;
  }

  // Whether the process of the node that `retired` (a worker_retired event) names has ended
  // within `limit` (the head collects it).
  bool process_ended(const nlohmann::json& retired, std::chrono::milliseconds limit) {
    const pid_t pid = pid_of(retired["node"]);
    if (pid <= 0) return false;
    return wait_until([&] { return ::kill(pid, 0) != 0 && errno == ESRCH; }, limit);
  }
};

TEST_F(ServeAutoscaleTest, ABurstScalesOneWorkerToThreeAndBackWithEveryRequestAnswered) {
  hold_.hold();
  const auto released = hold_.release_at_exit();
  // A look-back shorter than the autoscaler's ticks: each tick's count decides alone.
  start({"--set", "roles.worker.autoscale.upscale_delay_s=0", "--set",
         "roles.worker.autoscale.downscale_delay_s=0.5", "--set",
         "roles.worker.autoscale.look_back_period_s=0.05"},
        1);
  // Six requests on the one worker, held: 6 ongoing / 2 per worker wants 3 workers.
  auto shorts = completions(6, 2);
  ASSERT_TRUE(metric_reaches("troupe_serve_in_flight", 6, 30s));
  ASSERT_TRUE(metric_reaches("troupe_serve_workers", 3, 60s))
      << "the burst did not bring 3 workers; see " << run_dir();
  const auto up = events_of(run_dir(), "autoscaled");
  ASSERT_EQ(up.size(), 1u);
  EXPECT_EQ(up[0]["from"], 1);
  EXPECT_EQ(up[0]["to"], 3);
  // The look-back holds the deciding tick's count alone: more than 4 (5 when the tick came
  // while the sixth request was still on its way, as on a loaded machine), which asks for 3.
  EXPECT_GT(up[0]["mean_ongoing"].get<double>(), 4.0);
  EXPECT_LE(up[0]["mean_ongoing"].get<double>(), 6.0);
  EXPECT_EQ(metric("troupe_serve_autoscale_target_workers"), 3);
  // Two long requests go to the new workers, the least loaded, one each.
  auto longs = completions(2, 40);
  ASSERT_TRUE(metric_reaches("troupe_serve_in_flight", 8, 30s));
  EXPECT_EQ(metric("troupe_serve_dispatched_total{worker=\"worker/1\"}"), 1);
  EXPECT_EQ(metric("troupe_serve_dispatched_total{worker=\"worker/2\"}"), 1);
  // Each engine may run 20 iterations: the short requests finish, the long ones stop short of
  // their 40 tokens. 2 ongoing want 1 worker: worker/0 (idle) and the newer of the two busy ones
  // (the later to join the router: worker/1 and worker/2 start at once) are drained; worker/0
  // stops at once, the other keeps its request.
  const auto joins = events_of(run_dir(), "worker_joined");
  ASSERT_EQ(joins.size(), 3u);
  const std::string newer = joins[2]["worker"];
  hold_.hold(20);
  for (auto& f : shorts) {
    const auto body = f.get();
    ASSERT_TRUE(body.is_object()) << "a request failed";
    EXPECT_EQ(body["usage"]["completion_tokens"], 2);
  }
  ASSERT_TRUE(metric_reaches("troupe_serve_workers", 2, 30s));
  EXPECT_TRUE(metric_reaches("troupe_serve_draining_workers", 1, 30s));
  EXPECT_EQ(metric("troupe_serve_in_flight"), 2);
  const auto retired = events_of(run_dir(), "worker_retired");
  ASSERT_EQ(retired.size(), 1u);
  EXPECT_EQ(retired[0]["worker"], "worker/0");
  EXPECT_TRUE(process_ended(retired[0], 30s)) << retired[0];
  // Released, the held request finishes on its draining worker, which then stops too.
  hold_.release();
  for (auto& f : longs) {
    const auto body = f.get();
    ASSERT_TRUE(body.is_object()) << "a request failed";
    EXPECT_EQ(body["usage"]["completion_tokens"], 40);
  }
  EXPECT_TRUE(metric_reaches("troupe_serve_workers", 1, 30s));
  const auto both = events_of(run_dir(), "worker_retired");
  ASSERT_EQ(both.size(), 2u);
  EXPECT_EQ(both[1]["worker"], newer);
  EXPECT_TRUE(process_ended(both[1], 30s)) << both[1];
  EXPECT_EQ(metric("troupe_serve_replays_total"), 0) << "a drained worker's request was moved";
  EXPECT_EQ(metric("troupe_serve_autoscale_target_workers"), 1);
  EXPECT_TRUE(events_of(run_dir(), "worker_lost").empty());
}

// A worker process that dies is replaced by a new one, which serves, as Ray Serve's controller
// replaces a crashed replica.
TEST_F(ServeAutoscaleTest, AKilledWorkerProcessIsReplacedByANewOne) {
  start({"--set", "cluster.local_workers=2", "--set", "roles.worker.autoscale.min=2"}, 2);
  const auto joined = events_of(run_dir(), "member_joined");
  ASSERT_EQ(joined.size(), 2u);
  const pid_t victim = pid_of(joined[1]["node"]);
  ASSERT_GT(victim, 0) << joined[1];
  ASSERT_EQ(::kill(victim, SIGKILL), 0);
  // Below min, the role shrinks (no second engine in the surviving process) and a new process
  // joins, where the role grows back.
  ASSERT_TRUE(wait_until([&] { return events_of(run_dir(), "worker_joined").size() == 3; }, 60s))
      << "no worker replaced the killed one; see " << run_dir();
  const auto replaced = events_of(run_dir(), "worker_replaced");
  ASSERT_EQ(replaced.size(), 1u);
  EXPECT_EQ(replaced[0]["node"], joined[1]["node"]);
  EXPECT_EQ(events_of(run_dir(), "role_shrunk").size(), 1u);
  const auto members = events_of(run_dir(), "member_joined");
  ASSERT_EQ(members.size(), 3u);
  const auto grown = events_of(run_dir(), "role_grown");
  ASSERT_FALSE(grown.empty());
  EXPECT_EQ(grown.back()["actor"], "worker/2");
  EXPECT_TRUE(metric_reaches("troupe_serve_workers", 2, 30s));
  EXPECT_EQ(metric("troupe_serve_autoscale_target_workers"), 2);
  for (auto& f : completions(4, 2)) {
    const auto body = f.get();
    ASSERT_TRUE(body.is_object()) << "a request failed";
    EXPECT_EQ(body["usage"]["completion_tokens"], 2);
  }
}

// With min 0 an idle job stops its last worker, and a request that comes then waits in the
// router while a worker starts at once (Ray Serve's scale to zero and cold start).
TEST_F(ServeAutoscaleTest, AnIdleJobGoesToZeroWorkersAndTheNextRequestStartsOne) {
  start({"--set", "roles.worker.autoscale.min=0", "--set",
         "roles.worker.autoscale.downscale_to_zero_delay_s=0"},
        0);
  ASSERT_TRUE(wait_until([&] { return !events_of(run_dir(), "worker_retired").empty(); }, 60s))
      << "the idle worker was not stopped; see " << run_dir();
  const auto retired = events_of(run_dir(), "worker_retired");
  EXPECT_EQ(retired[0]["worker"], "worker/0");
  EXPECT_TRUE(process_ended(retired[0], 30s)) << retired[0];
  EXPECT_TRUE(metric_reaches("troupe_serve_workers", 0, 30s));
  EXPECT_EQ(metric("troupe_serve_autoscale_target_workers"), 0);
  // Two requests, held on the worker they start until both run there.
  hold_.hold();
  auto calls = completions(2, 3);
  const auto released = hold_.release_at_exit();
  ASSERT_TRUE(metric_reaches("troupe_serve_in_flight", 2, 60s))
      << "no worker took the requests; see " << run_dir();
  EXPECT_EQ(metric("troupe_serve_workers"), 1);
  hold_.release();
  for (auto& f : calls) {
    const auto body = f.get();
    ASSERT_TRUE(body.is_object()) << "a request failed; see " << run_dir();
    EXPECT_EQ(body["usage"]["completion_tokens"], 3);
  }
  const auto scaled = events_of(run_dir(), "autoscaled");  // then maybe to 0 again
  ASSERT_GE(scaled.size(), 2u);
  EXPECT_EQ(scaled[0]["to"], 0);
  EXPECT_EQ(scaled[1]["from"], 0);
  EXPECT_EQ(scaled[1]["to"], 1);
  const auto joins = events_of(run_dir(), "worker_joined");
  ASSERT_EQ(joins.size(), 2u);
  EXPECT_EQ(joins[1]["worker"], "worker/1");
  EXPECT_EQ(events_of(run_dir(), "member_joined").size(), 2u) << "no new worker process";
  EXPECT_EQ(metric("troupe_serve_replays_total"), 0);
}

// Without local workers the scale command starts the first worker too. One that fails is
// reported with its exit code and log while the job waits, and the job fails naming the workers
// it waited for.
TEST_F(ServeAutoscaleTest, AFailingScaleCommandIsReportedAndTheJobFailsClearly) {
  const auto r = run(
      {TROUPE_BINARY, "launch", config_, "--run-dir", run_dir(), "--set", "cluster.local_workers=0",
       "--set", "cluster.scale_command='exit 3'", "--set", "cluster.join_wait_s=10"},
      60s);
  EXPECT_EQ(r.exit_code, 1) << r.err;
  const auto asked = events_of(run_dir(), "scale_command");
  ASSERT_EQ(asked.size(), 1u) << r.err;
  EXPECT_EQ(asked[0]["from"], 0);
  EXPECT_EQ(asked[0]["to"], 1);
  const auto failed = events_of(run_dir(), "scale_failed");
  ASSERT_EQ(failed.size(), 1u) << r.err;
  EXPECT_NE(failed[0]["message"].get<std::string>().find("exit code 3"), std::string::npos)
      << failed[0];
  EXPECT_NE(r.err.find("only 0 of 1 workers joined within 10 s"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace troupe::testing

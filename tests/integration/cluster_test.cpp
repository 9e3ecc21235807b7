// Real clusters on loopback: a head and worker processes, as a user starts them.

#include <random>
#include <regex>
#include <thread>

#include <gtest/gtest.h>
#include <signal.h>

#include "runtime/cluster/head_client.hpp"
#include "runtime/cluster/msgpack_view.hpp"
#include "tests/integration/cluster_harness.hpp"

namespace troupe::testing {
namespace {

using namespace std::chrono_literals;
using clock = std::chrono::steady_clock;

class ClusterTest : public cluster_harness {
 protected:
  // A pipeline: lines -> stage -> digest (on the head), with `stage` the stage role's YAML.
  std::string pipeline(int lines, const std::string& stage, const std::string& cluster = "") {
    std::string text;
    for (int i = 0; i < lines; ++i) {
      payloads_.push_back("line " + std::to_string(i) + " of the Quick Brown Fox");
      text += payloads_.back() + "\n";
    }
    return dir_.write("app.yaml",
                      "app: pipeline\n"
                      "cluster: {" +
                          cluster +
                          "}\n"
                          "roles:\n"
                          "  lines: {kind: source, impl: text, options: {path: " +
                          dir_.write("input.txt", text) +
                          ", delimiter: ''}}\n"
                          "  work: {kind: stage, " +
                          stage +
                          "}\n"
                          "  digest: {kind: sink, impl: digest, placement: head}\n"
                          "pipeline: {flow: [lines, work, digest], item_timeout_ms: 60000}\n");
  }

  std::vector<std::string> payloads_;
};

TEST_F(ClusterTest, StatusShowsTheHeadAndItsWorkers) {
  start_head();
  start_worker();
  start_worker();
  ASSERT_EQ(live_workers(2).size(), 2u);
  auto s = status();
  EXPECT_EQ(s["members"].size(), 3u);
  EXPECT_EQ(s["epoch"], 3);
  auto table = run({TROUPE_BINARY, "status", "--head", endpoint_, "--token", token}, 10s);
  EXPECT_EQ(table.exit_code, 0) << table.err;
  EXPECT_NE(table.out.find("3 members"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("w2     alive"), std::string::npos) << table.out;
  // Stopping the head shuts its workers down cleanly.
  head_->signal(SIGINT);
  EXPECT_EQ(head_->wait(10s).exit_code, 0);
  for (auto& w : workers_)
    EXPECT_EQ(w->wait(10s).exit_code, 0);
}

// A head whose workers do not all join within cluster.join_wait_s fails the job, saying how many
// did and which setting to raise.
TEST_F(ClusterTest, AJobWhoseWorkersDoNotJoinFailsAfterTheJoinWait) {
  start_head(pipeline(10, "impl: caesar, plugin: example, options: {shift: 13}"),
             {"--set", "cluster.min_workers=2", "--set", "cluster.join_wait_s=1"});
  start_worker();
  const process_result r = head_->wait(60s);
  ASSERT_FALSE(r.timed_out);
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("of 2 workers joined within 1 s (cluster.join_wait_s)"), std::string::npos)
      << r.err;
}

TEST_F(ClusterTest, AJobRunsAcrossThreeWorkers) {
  start_head(pipeline(300, "impl: caesar, plugin: example, count: 6, options: {shift: 13}"),
             {"--set", "cluster.min_workers=3"});
  for (int i = 0; i < 3; ++i)
    start_worker();
  auto r = head_->wait(60s);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto summary = summary_of(r);
  std::vector<std::string> expected;
  for (const auto& p : payloads_) {
    std::string s = p;
    for (char& c : s) {
      if (c >= 'a' && c <= 'z') c = static_cast<char>('a' + (c - 'a' + 13) % 26);
      if (c >= 'A' && c <= 'Z') c = static_cast<char>('A' + (c - 'A' + 13) % 26);
    }
    expected.push_back(s);
  }
  EXPECT_EQ(summary["digest"], expected_digest(expected));  // every item once, in order
  uint64_t processed = 0;
  for (const auto& [name, n] : summary["processed_by"].items())
    processed += n.get<uint64_t>();
  EXPECT_EQ(processed, 300u);
  EXPECT_EQ(summary["processed_by"].size(), 6u);
  auto ready = events_of(run_dir(), "cluster_ready");
  ASSERT_EQ(ready.size(), 1u);
  EXPECT_EQ(ready[0]["workers"], 3);
  for (auto& w : workers_)
    EXPECT_EQ(w->wait(10s).exit_code, 0) << "a worker outlived its head";
}

// A killed worker is declared dead by its missed heartbeats (500 ms x 4 by default: the deadline
// is membership_test's, on a fake clock). The job is held until then, so the victim has items.
TEST_F(ClusterTest, AKilledWorkerIsDeclaredDeadByItsHeartbeatsAndTheJobCompletes) {
  hold_.hold();
  start_head(pipeline(600,
                      "impl: faulty, plugin: faulty, count: 3, "
                      "options: {fail_first: 1000000, mode: hold}"),
             {"--set", "cluster.min_workers=3"});
  for (int i = 0; i < 3; ++i)
    start_worker();
  auto workers = live_workers(3);
  ASSERT_EQ(workers.size(), 3u);
  ASSERT_TRUE(head_->wait_for_stderr("started", 20s));
  const std::string victim = workers[1]["node"];
  ASSERT_EQ(kill(workers[1]["pid"].get<pid_t>(), SIGKILL), 0);
  expect_declared_dead_by_its_heartbeats(victim);
  // Its actors are restarted while the job is still held (after their backoff), so that the
  // restart cannot come after the job's end on a loaded machine.
  EXPECT_FALSE(wait_for_event(run_dir(), "actor_restarted", 30s).is_null());
  hold_.release();
  auto r = head_->wait(60s);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(summary_of(r)["digest"], expected_digest(payloads_));
  // Requests pending on the dead worker failed at once, naming it; its actors were restarted.
  bool named = false;
  for (const auto& e : events_of(run_dir(), "actor_failed")) {
    named = named ||
            e["error"].get<std::string>().find("node " + victim + " died") != std::string::npos;
  }
  EXPECT_TRUE(named) << "no actor_failed event names " << victim;
  EXPECT_FALSE(events_of(run_dir(), "actor_restarted").empty());
}

TEST_F(ClusterTest, AFrozenWorkerIsDeclaredDeadAndRefusedWhenItWakes) {
  hold_.hold();
  start_head(pipeline(600,
                      "impl: faulty, plugin: faulty, count: 3, "
                      "options: {fail_first: 1000000, mode: hold}"),
             {"--set", "cluster.min_workers=2"});
  start_worker();
  subprocess& frozen = start_worker();
  auto workers = live_workers(2);
  ASSERT_EQ(workers.size(), 2u);
  ASSERT_TRUE(head_->wait_for_stderr("started", 20s));
  std::string node;
  for (const auto& w : workers) {
    if (w["pid"].get<pid_t>() == frozen.pid()) node = w["node"];
  }
  ASSERT_FALSE(node.empty());
  frozen.signal(SIGSTOP);
  expect_declared_dead_by_its_heartbeats(node);
  hold_.release();
  frozen.signal(SIGCONT);
  // Back from the dead, it is refused instead of resuming as `node`.
  auto woke = frozen.wait(20s);
  EXPECT_EQ(woke.exit_code, 1) << woke.err;
  EXPECT_NE(woke.err.find("declared"), std::string::npos) << woke.err;
  auto r = head_->wait(60s);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(summary_of(r)["digest"], expected_digest(payloads_));
}

// The job is held until both newcomers have their actor, so that it is still running when they
// join however fast the machine, and each gets work.
TEST_F(ClusterTest, AnElasticRoleGrowsWhenWorkersJoinMidRun) {
  hold_.hold();
  start_head(pipeline(400,
                      "impl: faulty, plugin: faulty, elastic: {min: 1, max: 8}, "
                      "options: {fail_first: 1000000, mode: hold}"),
             {"--set", "cluster.min_workers=1"});
  start_worker();
  ASSERT_TRUE(head_->wait_for_stderr("started", 20s));
  start_worker();
  start_worker();
  ASSERT_TRUE(wait_until([&] { return events_of(run_dir(), "role_grown").size() >= 2; }));
  ASSERT_EQ(events_of(run_dir(), "role_grown").size(), 2u) << "the role did not grow twice";
  hold_.release();
  auto r = head_->wait(60s);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto summary = summary_of(r);
  EXPECT_EQ(summary["digest"], expected_digest(payloads_));
  EXPECT_EQ(events_of(run_dir(), "role_grown").size(), 2u);
  ASSERT_EQ(summary["processed_by"].size(), 3u) << summary.dump();
  for (const auto& [name, n] : summary["processed_by"].items()) {
    EXPECT_GT(n.get<uint64_t>(), 0u) << name << " received no work";
  }
}

// docs/protocol.md is enough to talk to a head: a Python client written from it alone, with
// plain ZeroMQ and msgpack, queries the head and uses its key-value store.
TEST_F(ClusterTest, AForeignClientSpeaksTheDocumentedProtocol) {
  start_head();
  start_worker();
  ASSERT_EQ(live_workers(1).size(), 1u);
  auto r = run(
      {"/usr/bin/python3", std::string(TROUPE_SOURCE_DIR) + "/tests/integration/foreign_client.py",
       endpoint_, token},
      30s);
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("ok: 2 members"), std::string::npos) << r.out << r.err;
}

// CURVE as a new user runs it (docs/security.md): `troupe keys generate`, a head and two workers
// with the keys, `troupe status` with them, a job across the workers. A worker without the keys,
// or with another cluster's, is refused with what is wrong; the head logs the refusals.
TEST_F(ClusterTest, ACurveClusterRunsAJobAndRefusesWorkersWithoutItsKeys) {
  const std::string keys = dir_.file("keys");
  const auto generated = run({TROUPE_BINARY, "keys", "generate", "--out", keys}, 10s);
  ASSERT_EQ(generated.exit_code, 0) << generated.err;
  const std::string other = dir_.file("other-keys");
  ASSERT_EQ(run({TROUPE_BINARY, "keys", "generate", "--out", other}, 10s).exit_code, 0);
  keys_ = keys;
  hold_.hold();  // the job waits until the refusals are seen
  start_head(pipeline(100,
                      "impl: faulty, plugin: faulty, count: 2, "
                      "options: {fail_first: 1000000, mode: hold}"),
             {"--keys", keys, "--set", "cluster.min_workers=2"});
  EXPECT_NE(head_->stderr_so_far().find("(CURVE, keys in " + keys + ")"), std::string::npos);
  start_worker(token, keys);
  start_worker("any-token", keys);  // CURVE admits by key; the token is not checked
  ASSERT_EQ(live_workers(2).size(), 2u) << head_->stderr_so_far();
  EXPECT_EQ(status()["members"].size(), 3u);

  auto plain = start_worker().wait(20s);
  EXPECT_EQ(plain.exit_code, 1);
  EXPECT_NE(plain.err.find("requires CURVE (cluster.auth: curve) and this process has no keys: "
                           "pass --keys DIR or set TROUPE_KEYS"),
            std::string::npos)
      << plain.err;
  auto wrong = start_worker(token, other).wait(30s);
  EXPECT_EQ(wrong.exit_code, 1);
  EXPECT_NE(wrong.err.find(other), std::string::npos) << wrong.err;
  const auto status_without = run({TROUPE_BINARY, "status", "--head", endpoint_}, 20s);
  EXPECT_NE(status_without.exit_code, 0);
  EXPECT_NE(status_without.err.find("requires CURVE"), std::string::npos) << status_without.err;
  EXPECT_TRUE(head_->wait_for_stderr("refused a connection whose handshake failed", 10s));
  EXPECT_EQ(live_workers(2).size(), 2u);

  hold_.release();
  auto r = head_->wait(60s);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(summary_of(r)["digest"], expected_digest(payloads_));  // every item, across CURVE
  const auto ready = events_of(run_dir(), "cluster_ready");
  ASSERT_EQ(ready.size(), 1u);
  EXPECT_EQ(ready[0]["auth"], "curve");
}

TEST_F(ClusterTest, AJoinWithoutTheTokenIsRefusedAndLogged) {
  start_head();
  auto r = start_worker("not-the-token").wait(20s);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("the head refused the join: join refused: missing or wrong cluster token"),
            std::string::npos)
      << r.err;
  EXPECT_TRUE(head_->wait_for_stderr("refused a join", 10s));
  EXPECT_TRUE(live_workers(0).empty());
}

// Random bytes, truncated and oversized envelopes, other versions and unknown types: each is
// refused and counted, the connection that sent them keeps working, and so does the job.
TEST_F(ClusterTest, GarbageFramesAreRefusedWithoutHarm) {
  hold_.hold();  // the job runs until the barrage is over
  start_head(pipeline(200,
                      "impl: faulty, plugin: faulty, count: 2, "
                      "options: {fail_first: 1000000, mode: hold}",
                      "max_frame_bytes: 65536"),
             {"--set", "cluster.min_workers=1"});
  start_worker();
  auto workers = live_workers(1);
  ASSERT_EQ(workers.size(), 1u);
  ASSERT_TRUE(head_->wait_for_stderr("started", 20s));
  zmq::context_t context;
  for (const std::string& target : {endpoint_, workers[0]["endpoint"].get<std::string>()}) {
    auto client = cluster::head_client::connect(context, target, {.token = token});
    ASSERT_TRUE(client.ok());
    std::mt19937 rng(7);
    for (int i = 0; i < 200; ++i) {
      std::string junk(1 + rng() % 64, '\0');
      for (char& c : junk)
        c = static_cast<char>(rng());
      ASSERT_TRUE((*client)->send_raw(junk).ok());
    }
    const std::string valid = cluster::encode(cluster::envelope{.type = "status"});
    ASSERT_TRUE((*client)->send_raw(valid.substr(0, valid.size() / 2)).ok());  // truncated
    ASSERT_TRUE((*client)->send_raw(std::string(100000, 'x')).ok());           // oversized
    ASSERT_TRUE(
        (*client)->send_raw(cluster::encode(cluster::envelope{.v = 9, .type = "status"})).ok());
    ASSERT_TRUE((*client)->send_raw(cluster::encode(cluster::envelope{.type = "teleport"})).ok());
    if (target == endpoint_) {
      // The same connection still gets answers.
      auto reply = (*client)->call("status", {}, 5s);
      ASSERT_TRUE(reply.ok()) << reply.status();
      auto metrics = (*client)->call("metrics", {}, 5s);
      ASSERT_TRUE(metrics.ok()) << metrics.status();
      const std::string text =
          cluster::map_view::of(metrics->payload, "metrics").value().get_string("text").value();
      for (const char* reason : {"malformed", "oversized", "bad_version", "unknown_type"}) {
        EXPECT_NE(text.find(std::string("troupe_rejected_frames_total{where=\"head\",reason=\"") +
                            reason + "\"}"),
                  std::string::npos)
            << reason << " not counted:\n"
            << text;
      }
    }
  }
  hold_.release();
  auto r = head_->wait(60s);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(summary_of(r)["digest"], expected_digest(payloads_));
}

// `troupe launch` with local workers: every process stops at the end, also on failure and on
// Ctrl-C. The job is held, so that it is still running when the test interrupts it.
class LocalWorkersTest : public ClusterTest {
 protected:
  // Launches `stage` on two local workers; returns the worker pids once the job started.
  std::vector<pid_t> launch(const std::string& stage) {
    hold_.hold();
    const std::string config = pipeline(400, stage, "local_workers: 2, token: " + token);
    launcher_ = std::make_unique<subprocess>(
        std::vector<std::string>{TROUPE_BINARY, "launch", config, "--run-dir", run_dir()}, env());
    EXPECT_TRUE(launcher_->wait_for_stderr("started", 30s)) << launcher_->wait(1s).err;
    const auto ready = wait_for_event(run_dir(), "cluster_ready");
    EXPECT_TRUE(ready.is_object()) << "no cluster_ready event";
    if (ready.is_object()) endpoint_ = ready["head"];
    std::vector<pid_t> pids;
    for (const auto& w : live_workers(2))
      pids.push_back(w["pid"].get<pid_t>());
    return pids;
  }

  static bool gone(const std::vector<pid_t>& pids, clock::duration within) {
    const auto deadline = clock::now() + within;
    while (clock::now() < deadline) {
      bool any = false;
      for (pid_t pid : pids)
        any = any || kill(pid, 0) == 0;
      if (!any) return true;
      std::this_thread::sleep_for(20ms);
    }
    return false;
  }

  std::unique_ptr<subprocess> launcher_;
};

TEST_F(LocalWorkersTest, CtrlCStopsEveryProcess) {
  auto pids = launch(
      "impl: faulty, plugin: faulty, count: 2, "
      "options: {fail_first: 1000000, mode: hold}");
  ASSERT_EQ(pids.size(), 2u);
  launcher_->signal(SIGINT);
  auto r = launcher_->wait(30s);
  EXPECT_EQ(r.exit_code, 130) << r.err;
  EXPECT_EQ(summary_of(r)["status"], "interrupted");
  EXPECT_TRUE(gone(pids, 10s)) << "a worker outlived the launch";
}

TEST_F(LocalWorkersTest, AFailedJobStopsEveryProcess) {
  auto pids = launch(
      "impl: faulty, plugin: faulty, count: 2, on_failure: fail_job, "
      "options: {fail_first: 1000000, mode: hold}");
  ASSERT_EQ(pids.size(), 2u);
  // Kill a worker: its actors fail, and their policy ends the job.
  kill(pids[0], SIGKILL);
  auto r = launcher_->wait(30s);
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(summary_of(r)["error"].get<std::string>().find("on_failure: fail_job"),
            std::string::npos);
  EXPECT_TRUE(gone(pids, 10s)) << "a worker outlived the launch";
}

}  // namespace
}  // namespace troupe::testing

// troupe under a real Slurm cluster (docs/launch.md#slurm): scripts/slurm/local_cluster.sh starts
// three slurmd nodes on this machine, and scripts/slurm/troupe.sbatch runs `troupe launch
// --slurm` over three tasks: task 0 the head and the app, the others workers found through the
// rendezvous file in the submit directory.

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>

#include <gtest/gtest.h>

#include "tests/integration/troupe_cli.hpp"

namespace troupe::testing {
namespace {

namespace fs = std::filesystem;

// The helpers every test's script may call (SlurmTest::on_cluster).
const std::string script_functions = R"sh(
wait_for() {
  local what=$1; shift
  for _ in $(seq 1 600); do "$@" && return 0; sleep 0.1; done
  echo "no $what within 60 s"; squeue; tail -n 5 troupe-*.out ./*/scale_command.log 2>/dev/null
  exit 1
}
job_state() { scontrol show job "$1" | grep -o 'JobState=[A-Z]*\|ExitCode=[0-9:]*' | tr '\n' ' '; }
)sh";

class SlurmTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* tool :
         {"/usr/sbin/slurmctld", "/usr/sbin/slurmd", "/usr/sbin/munged", "/usr/bin/sbatch"}) {
      if (!fs::exists(tool)) GTEST_SKIP() << tool << " is missing; scripts/setup.sh installs it";
    }
  }

  // Runs `script` (bash, in the test's directory, with TROUPE set to the built binary,
  // TROUPE_SOURCE to the source tree, sbatch_script to troupe.sbatch, and the functions
  // `wait_for WHAT COMMAND...` (until COMMAND succeeds, up to 60 s, else it fails the script) and
  // `job_state JOB` (its JobState and ExitCode)) on a fresh three-node cluster.
  process_result on_cluster(const std::string& script) {
    const std::string path = dir_.write(
        "job.sh", "set -euo pipefail\ncd " + dir_.path().string() +
                      "\nexport TROUPE=" TROUPE_BINARY "\nTROUPE_SOURCE=" TROUPE_SOURCE_DIR
                      "\nsbatch_script=$TROUPE_SOURCE/scripts/slurm/troupe.sbatch\n" +
                      script_functions + script);
    return run({TROUPE_SOURCE_DIR "/scripts/slurm/local_cluster.sh", "--nodes", "3", "--",
                "/bin/bash", path},
               std::chrono::minutes(4));
  }

  // The summary.json of the run directory `run` (in the test's directory); null if unreadable.
  nlohmann::json summary_in(const std::string& run) const {
    return nlohmann::json::parse(read_file(dir_.file(run + "/summary.json")), nullptr, false);
  }

  temp_dir dir_;
};

TEST_F(SlurmTest, SbatchRunsTheQuickstartOverThreeTasks) {
  const auto r = on_cluster(R"sh(
sbatch --wait --parsable -N 3 -n 3 "$sbatch_script" "$TROUPE_SOURCE/configs/quickstart.yaml" \
  --run-dir run --set pretrain.train.steps=12 --set pretrain.train.warmup=2 \
  --set pretrain.checkpoint.every_steps=6 --set pretrain.data.eval_every=6
)sh");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const auto summary = summary_in("run");
  EXPECT_EQ(summary["status"], "succeeded") << summary;
  EXPECT_EQ(summary["steps"], 12);
  EXPECT_EQ(summary["world_size"], 2);  // the two tasks that joined as workers
  // The workers came from tasks on the other nodes, and left with the head.
  EXPECT_EQ(events_of(dir_.file("run"), "member_joined").size(), 2u);
  const std::string job = r.out.substr(0, r.out.find('\n'));  // sbatch --parsable's
  const std::string output = read_file(dir_.file("troupe-" + job + ".out"));
  EXPECT_NE(output.find("this one (on n1) runs the head"), std::string::npos) << output;
  EXPECT_NE(output.find("troupe worker w1: done"), std::string::npos) << output;
  EXPECT_NE(output.find("troupe worker w2: done"), std::string::npos) << output;
  // The rendezvous file went with the head.
  EXPECT_FALSE(fs::exists(dir_.file(".troupe/slurm-" + job + ".json")));
}

// With cluster.auth: curve the tasks find the keys where the config says (a directory every node
// sees): the worker's task joins over CURVE and the quickstart trains to its end.
TEST_F(SlurmTest, WithCurveTheTasksJoinWithTheConfigsKeys) {
  const auto r = on_cluster(R"sh(
"$TROUPE" keys generate --out keys > /dev/null
sbatch --wait --parsable -N 2 -n 2 "$sbatch_script" "$TROUPE_SOURCE/configs/quickstart.yaml" \
  --run-dir run --set cluster.auth=curve --set cluster.keys="$PWD/keys" \
  --set pretrain.train.steps=4 --set pretrain.train.warmup=2 --set pretrain.checkpoint.every_steps=4 \
  --set pretrain.data.eval_every=4
)sh");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const auto summary = summary_in("run");
  EXPECT_EQ(summary["status"], "succeeded") << summary;
  EXPECT_EQ(summary["world_size"], 1);
  const auto ready = events_of(dir_.file("run"), "cluster_ready");
  ASSERT_EQ(ready.size(), 1u);
  EXPECT_EQ(ready[0]["auth"], "curve");
  EXPECT_TRUE(events_of(dir_.file("run"), "auth_refused").empty());
}

// A serving job over three tasks; a later sbatch of one more worker joins it; scancel stops it
// as Ctrl-C does: the head drains, then its workers (the joined job's too) leave with it.
TEST_F(SlurmTest, ALaterSbatchJoinsAServingJobAndScancelDrainsIt) {
  const auto r = on_cluster(R"sh(
job=$(sbatch --parsable -N 3 -n 3 "$sbatch_script" "$TROUPE_SOURCE/configs/serve_tiny.yaml" --run-dir serve)
serving() { grep -qs '"event":"serving"' serve/events.jsonl; }
wait_for "serving event" serving
joiner=$(sbatch --parsable -N 1 -n 1 "$sbatch_script" --join "$job")
three_workers() { test "$(grep -c '"event":"worker_joined"' serve/events.jsonl)" = 3; }
wait_for "third worker" three_workers
url=$(grep '"event":"serving"' serve/events.jsonl | grep -o '"url":"[^"]*"' | cut -d'"' -f4)
python3 -c 'import sys, urllib.request
print(urllib.request.urlopen(sys.argv[1] + "/v1/models", timeout=30).read().decode())' "$url" > models.json
scancel "$job"
both_stopped() { test -z "$(squeue -h -j "$job,$joiner")"; }
wait_for "stop of both jobs" both_stopped
echo "job: $(job_state "$job")"
echo "joiner: $(job_state "$joiner")"
)sh");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(read_file(dir_.file("models.json")).find("troupe-tiny"), std::string::npos);
  // scancel's SIGTERM reached the head, which drained and ended the job as Ctrl-C does; the
  // job's exit code is troupe launch's. The joined worker then left, and its job completed.
  EXPECT_NE(r.out.find("job: JobState=CANCELLED ExitCode=0:0"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("joiner: JobState=COMPLETED ExitCode=0:0"), std::string::npos) << r.out;
  const auto summary = summary_in("serve");
  EXPECT_EQ(summary["status"], "succeeded") << summary;
  EXPECT_EQ(events_of(dir_.file("serve"), "draining").size(), 1u);
  EXPECT_EQ(events_of(dir_.file("serve"), "drained").size(), 1u);
}

// Autoscaling under Slurm: a serving job of two tasks (the head and one worker) whose
// cluster.scale_command submits joiner jobs. A held burst of six requests brings two joiners
// (1 -> 3 workers); released, the requests finish, and the two surplus workers are drained and
// stopped (3 -> 1), their tasks ending with exit code 0; then scancel stops the job.
TEST_F(SlurmTest, AutoscalingSubmitsJoinerJobsForABurstAndStopsThemAfterIt) {
  const auto r = on_cluster(R"sh(
: > hold  # the engines run no iteration until the hold is removed
export TROUPE_TEST_HOLD=$PWD/hold
job=$(sbatch --parsable -N 2 -n 2 "$sbatch_script" "$TROUPE_SOURCE/configs/serve_autoscale.yaml" \
  --run-dir serve --set model='{vocab: 256, ctx: 64, layers: 2, dim: 32, heads: 4}' \
  --set cluster.scale_command="$TROUPE_SOURCE/scripts/slurm/scale_workers.sh" \
  --set roles.worker.autoscale.upscale_delay_s=0 --set roles.worker.autoscale.downscale_delay_s=0.5 \
  --set roles.worker.autoscale.look_back_period_s=0.05)
count() { grep -cs "\"event\":\"$1\"" serve/events.jsonl || true; }
serving() { grep -qs '"event":"serving"' serve/events.jsonl; }
wait_for "serving event" serving
url=$(grep '"event":"serving"' serve/events.jsonl | grep -o '"url":"[^"]*"' | cut -d'"' -f4)
python3 - "$url" > answers.txt <<'PY' &
import json, sys, threading, urllib.request
def ask(i, out):
    body = json.dumps({"model": "troupe-tiny", "prompt": f"request {i}", "max_tokens": 8}).encode()
    with urllib.request.urlopen(sys.argv[1] + "/v1/completions", body, timeout=120) as r:
        out[i] = json.load(r)["usage"]["completion_tokens"]
out = {}
threads = [threading.Thread(target=ask, args=(i, out)) for i in range(6)]
for t in threads: t.start()
for t in threads: t.join()
print("answers:", sorted(out.values()))
PY
clients=$!
three() { test "$(count worker_joined)" = 3; }
wait_for "three workers" three
rm hold
wait "$clients"
one_left() { test "$(count worker_retired)" = 2; }
wait_for "two workers retired" one_left
joiners() { grep -o 'joiner job [0-9]*' serve/scale_command.log | cut -d' ' -f3 | paste -sd,; }
joined=$(joiners)
echo "joiners: $joined"
scancel "$job"
stopped() { test -z "$(squeue -h -j "$job,$joined")"; }
wait_for "stop of the job and its joiners" stopped
for j in ${joined//,/ }; do
  echo "joiner: $(job_state "$j")"
done
)sh");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(read_file(dir_.file("answers.txt")).find("answers: [8, 8, 8, 8, 8, 8]"),
            std::string::npos)
      << read_file(dir_.file("answers.txt"));
  // Up to 3 workers, then down to 1. Each autoscaler tick decides on the requests it has seen,
  // so the way up takes one decision or more as the six clients' threads start (more when this
  // machine is busy); either way two joiner jobs.
  std::vector<int> to;
  for (const auto& e : events_of(dir_.file("serve"), "autoscaled"))
    to.push_back(e["to"]);
  ASSERT_FALSE(to.empty()) << r.out;
  const auto peak = std::max_element(to.begin(), to.end());
  EXPECT_EQ(*peak, 3) << r.out;
  EXPECT_TRUE(std::is_sorted(to.begin(), peak + 1)) << r.out;
  EXPECT_TRUE(std::is_sorted(peak, to.end(), std::greater<>())) << r.out;
  EXPECT_EQ(to.back(), 1) << r.out;
  EXPECT_EQ(events_of(dir_.file("serve"), "worker_retired").size(), 2u);
  EXPECT_TRUE(events_of(dir_.file("serve"), "worker_lost").empty());
  // Two joiner jobs were submitted, and both completed with exit code 0: a retired worker's
  // process ends by itself, one still serving at the scancel leaves with the head.
  const std::string completed = "joiner: JobState=COMPLETED ExitCode=0:0 ";
  size_t joiners = 0;
  for (size_t at = 0; (at = r.out.find("joiner: ", at)) != std::string::npos; ++at) {
    ++joiners;
    EXPECT_EQ(r.out.substr(at, completed.size()), completed) << r.out;
  }
  EXPECT_EQ(joiners, 2u) << r.out;
}

// An elastic pretraining job of two tasks (the head and one trainer's worker) that a later
// sbatch --join grows: the joined worker's trainer becomes rank 1 at the next step boundary,
// after step 3, whose checkpoint the first rank saves; the job ends with both ranks, and the
// joiner's job completes with it. The test hold keeps step 3 in flight until the driver knows of
// the new trainer.
TEST_F(SlurmTest, ALaterSbatchAddsARankToAnElasticPretrainingJob) {
  const auto r = on_cluster(R"sh(
echo 2 > hold  # steps 1-2 run, step 3 waits (TROUPE_TEST_HOLD, exported to the job's tasks)
export TROUPE_TEST_HOLD=$PWD/hold
job=$(sbatch --parsable -N 2 -n 2 "$sbatch_script" "$TROUPE_SOURCE/configs/pretrain_elastic.yaml" \
  --run-dir run --set cluster.min_workers=1 --set model='{vocab: 256, ctx: 64, layers: 2, dim: 32, heads: 4}' \
  --set pretrain.train.steps=6 --set pretrain.train.warmup=2 --set pretrain.data.eval_every=0 \
  --set pretrain.checkpoint.every_steps=3)
two_steps() { test "$(grep -cs '"loss"' run/metrics.jsonl)" = 2; }
wait_for "two steps" two_steps
joiner=$(sbatch --parsable -N 1 -n 1 "$sbatch_script" --join "$job")
joining() { grep -qs '"event":"rank_joining"' run/events.jsonl; }
wait_for "the new trainer" joining
rm hold
both_ended() { test -z "$(squeue -h -j "$job,$joiner")"; }
wait_for "end of both jobs" both_ended
echo "job: $(job_state "$job")"
echo "joiner: $(job_state "$joiner")"
)sh");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("job: JobState=COMPLETED ExitCode=0:0"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("joiner: JobState=COMPLETED ExitCode=0:0"), std::string::npos) << r.out;
  const auto summary = summary_in("run");
  EXPECT_EQ(summary["status"], "succeeded") << summary;
  EXPECT_EQ(summary["world_size"], 2) << summary;
  const auto joined = events_of(dir_.file("run"), "rank_joined");
  ASSERT_EQ(joined.size(), 1u);
  EXPECT_EQ(joined[0]["rank"], 1);
  EXPECT_EQ(joined[0]["step"], 4);
  EXPECT_EQ(summary["checkpoint_step"], 6) << summary;
  EXPECT_EQ(events_of(dir_.file("run"), "checkpoint_committed").size(), 2u);
}

// scancel of a pretraining job: the head checkpoints the step in flight, as on Ctrl-C, and the
// job's exit code is troupe launch's 130. The test hold keeps step 5 in flight until then.
TEST_F(SlurmTest, ScancelCheckpointsAPretrainingJobsStepInFlight) {
  const auto r = on_cluster(R"sh(
echo 4 > hold  # steps 1-4 run, step 5 waits (TROUPE_TEST_HOLD, exported to the job's tasks)
export TROUPE_TEST_HOLD=$PWD/hold
job=$(sbatch --parsable "$sbatch_script" "$TROUPE_SOURCE/configs/quickstart.yaml" --run-dir run \
  --set pretrain.train.steps=50 --set pretrain.train.warmup=2)
four_steps() { test "$(grep -cs '"loss"' run/metrics.jsonl)" = 4; }
wait_for "four steps" four_steps
scancel "$job"
stopping() { grep -qs '"event":"training_stopping"' run/events.jsonl; }
wait_for "stop" stopping
rm hold
stopped() { test -z "$(squeue -h -j "$job")"; }
wait_for "end of the job" stopped
echo "job: $(job_state "$job")"
)sh");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("job: JobState=CANCELLED ExitCode=130:0"), std::string::npos) << r.out;
  const auto summary = summary_in("run");
  EXPECT_EQ(summary["status"], "interrupted") << summary;
  EXPECT_NE(summary.value("error", "").find("interrupted after step 5; checkpoint 5 is committed"),
            std::string::npos)
      << summary;
}

}  // namespace
}  // namespace troupe::testing

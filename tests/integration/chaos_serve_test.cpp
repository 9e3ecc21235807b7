// The shortened chaos soak of serving (scripts/chaos_serve.py, docs/reliability.md): a serve job
// with 3 workers under load from 4 clients while 3 workers are killed (SIGKILL or SIGSTOP) and
// replaced by `troupe worker --join`. The script's own checks are the verdict: every accepted
// request answered exactly once and completely, no stream with a gap or a repeat, the KV blocks
// back to 0, no process left.

#include <gtest/gtest.h>

#include "tests/integration/troupe_cli.hpp"

namespace troupe::testing {
namespace {

using namespace std::chrono_literals;

TEST(ChaosServe, KilledAndFrozenWorkersLoseNoRequest) {
  temp_dir dir;
  const auto r =
      run({"/usr/bin/python3", std::string(TROUPE_SOURCE_DIR) + "/scripts/chaos_serve.py",
           "--troupe", TROUPE_BINARY, "--run-dir", dir.file("run"), "--kills", "3", "--clients",
           "4", "--baseline-seconds", "2", "--kill-every", "2"},
          240s);
  ASSERT_FALSE(r.timed_out) << r.err;
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  const auto figures = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_TRUE(figures.is_object()) << r.out << r.err;
  EXPECT_EQ(figures["kills"], 3);
  EXPECT_EQ(figures["joins"], 3);
  EXPECT_GT(figures["requests_chaos"].get<int>(), 0);
  EXPECT_EQ(figures["errors"], 0);
  EXPECT_EQ(figures["mismatches"], 0);
  EXPECT_EQ(figures["kv_blocks_in_use_after"], 0.0);
  EXPECT_EQ(figures["processes_left"], 0);
}

}  // namespace
}  // namespace troupe::testing

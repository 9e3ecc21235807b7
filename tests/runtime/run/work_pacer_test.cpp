#include "runtime/run/work_pacer.hpp"

#include <cstdlib>
#include <filesystem>

#include <gtest/gtest.h>

#include "tests/support/temp_dir.hpp"

namespace troupe::run {
namespace {

using namespace std::chrono_literals;

TEST(WorkPacer, WithoutHooksNeverHoldsOrPauses) {
  work_pacer pacer;
  for (int i = 0; i < 3; ++i)
    EXPECT_TRUE(pacer.may_start());
  EXPECT_EQ(pacer.started(), 3);
  EXPECT_EQ(pacer.pause_after(10ms), 0ns);
}

TEST(WorkPacer, HoldsWhileTheFileExistsAfterTheUnitsItAllows) {
  testing::temp_dir dir;
  const std::string hold = dir.file("hold");
  work_pacer pacer(config::test_hooks{.hold_file = hold});
  EXPECT_TRUE(pacer.may_start()) << "no file: nothing is held";
  dir.write("hold", "2\n");  // two units in all (counted from the start): one more
  EXPECT_TRUE(pacer.may_start());
  EXPECT_FALSE(pacer.may_start());
  EXPECT_FALSE(pacer.may_start()) << "still held";
  EXPECT_EQ(pacer.started(), 2);
  dir.write("hold", "");  // empty: nothing more may start
  EXPECT_FALSE(pacer.may_start());
  dir.write("hold", "not a count");
  EXPECT_FALSE(pacer.may_start());
  std::filesystem::remove(hold);
  EXPECT_TRUE(pacer.may_start()) << "removing the file releases the loop";
  EXPECT_TRUE(pacer.may_start());
  EXPECT_EQ(pacer.started(), 4);
}

TEST(WorkPacer, ASlowdownStretchesEachUnit) {
  work_pacer pacer(config::test_hooks{.slowdown = 3});
  EXPECT_EQ(pacer.pause_after(10ms), 20ms);
  EXPECT_TRUE(pacer.may_start());
}

TEST(TestHooks, AreReadFromTheEnvironmentAndCheckedByName) {
  ::setenv("TROUPE_TEST_HOLD", "/tmp/some-hold", 1);
  ::setenv("TROUPE_TEST_SLOWDOWN", "2.5", 1);
  auto hooks = config::test_hooks_from_environment();
  ASSERT_TRUE(hooks.ok()) << hooks.status();
  EXPECT_EQ(hooks->hold_file, "/tmp/some-hold");
  EXPECT_EQ(hooks->slowdown, 2.5);
  for (const char* bad : {"fast", "0.5", "1000"}) {
    ::setenv("TROUPE_TEST_SLOWDOWN", bad, 1);
    auto refused = config::test_hooks_from_environment();
    ASSERT_FALSE(refused.ok()) << bad;
    EXPECT_NE(refused.status().message().find("TROUPE_TEST_SLOWDOWN is '" + std::string(bad)),
              std::string::npos)
        << refused.status();
  }
  ::unsetenv("TROUPE_TEST_HOLD");
  ::unsetenv("TROUPE_TEST_SLOWDOWN");
  hooks = config::test_hooks_from_environment();
  ASSERT_TRUE(hooks.ok());
  EXPECT_TRUE(hooks->hold_file.empty());
  EXPECT_EQ(hooks->slowdown, 1);
}

}  // namespace
}  // namespace troupe::run

#include "runtime/run/run_dir.hpp"

#include <fstream>

#include <gtest/gtest.h>

#include "tests/support/temp_dir.hpp"

namespace troupe::run {
namespace {

TEST(RunDir, UsesRequestedDirectory) {
  testing::temp_dir tmp;
  auto dir = run_dir::create(tmp.file("r"), "pipeline");
  ASSERT_TRUE(dir.ok()) << dir.status();
  ASSERT_TRUE(dir->write_file("config.yaml", "app: x\n").ok());
  std::ifstream in(dir->file("config.yaml"));
  std::string text((std::istreambuf_iterator<char>(in)), {});
  EXPECT_EQ(text, "app: x\n");
}

TEST(RunDir, RefusesNonEmptyDirectory) {
  testing::temp_dir tmp;
  tmp.write("r/events.jsonl", "{}\n");
  auto dir = run_dir::create(tmp.file("r"), "pipeline");
  ASSERT_FALSE(dir.ok());
  EXPECT_NE(dir.status().message().find("is not empty"), absl::string_view::npos);
}

TEST(RunDir, DefaultNamesAreUnique) {
  testing::temp_dir tmp;
  const auto cwd = std::filesystem::current_path();
  std::filesystem::current_path(tmp.path());
  auto a = run_dir::create(std::nullopt, "demo");
  auto b = run_dir::create(std::nullopt, "demo");
  std::filesystem::current_path(cwd);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE(a->path(), b->path());
  EXPECT_TRUE(a->path().string().starts_with("runs/demo-"));
}

}  // namespace
}  // namespace troupe::run

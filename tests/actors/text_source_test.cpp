#include "actors/text_source.hpp"

#include <gtest/gtest.h>

#include "tests/support/temp_dir.hpp"

namespace troupe::actors {
namespace {

TEST(SplitRecords, SplitsOnDelimiterLines) {
  std::vector<std::string> out;
  split_records("one\ntwo lines\n%\nthree\n%\n%\n", "%", out);
  EXPECT_EQ(out, (std::vector<std::string>{"one\ntwo lines", "three"}));
}

TEST(SplitRecords, EmptyDelimiterMeansLines) {
  std::vector<std::string> out;
  split_records("a\n\nb\nc", "", out);
  EXPECT_EQ(out, (std::vector<std::string>{"a", "b", "c"}));
}

TEST(TextSource, ReadsDirectoriesInNameOrderSkippingIndexFilesAndLinks) {
  testing::temp_dir dir;
  dir.write("b", "b1\n%\nb2\n");
  dir.write("a", "a1\n");
  dir.write("a.dat", "binary index");
  std::filesystem::create_symlink(dir.file("a"), dir.file("a.u8"));
  auto source = text_source::open({.path = dir.path().string()});
  ASSERT_TRUE(source.ok()) << source.status();
  auto batch = source->batch(0, 10);
  ASSERT_EQ(batch.items.size(), 3u);
  EXPECT_EQ(batch.total, 3);
  EXPECT_EQ(batch.items[0].payload, "a1");
  EXPECT_EQ(batch.items[2].payload, "b2");
  EXPECT_EQ(batch.items[2].seq, 2u);
}

TEST(TextSource, ServesByPosition) {
  testing::temp_dir dir;
  auto source = text_source::open({.path = dir.write("f", "0\n1\n2\n3\n4\n"), .delimiter = ""});
  ASSERT_TRUE(source.ok());
  auto mid = source->batch(2, 2);
  ASSERT_EQ(mid.items.size(), 2u);
  EXPECT_EQ(mid.items[0].seq, 2u);
  EXPECT_EQ(mid.items[1].payload, "3");
  EXPECT_TRUE(source->batch(5, 10).items.empty());
  EXPECT_TRUE(source->batch(1000, 10).items.empty());
}

TEST(TextSource, LimitAndErrors) {
  testing::temp_dir dir;
  auto limited =
      text_source::open({.path = dir.write("f", "0\n1\n2\n"), .delimiter = "", .limit = 2});
  ASSERT_TRUE(limited.ok());
  EXPECT_EQ(limited->size(), 2u);
  auto missing = text_source::open({.path = dir.file("nope")});
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  auto empty = text_source::open({.path = dir.write("empty", "%\n%\n")});
  EXPECT_EQ(empty.status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace troupe::actors

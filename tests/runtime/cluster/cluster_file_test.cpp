#include "runtime/cluster/cluster_file.hpp"

#include <filesystem>

#include <gtest/gtest.h>
#include <sys/stat.h>

#include "absl/strings/match.h"
#include "tests/support/temp_dir.hpp"

namespace troupe::cluster {
namespace {

using namespace std::chrono_literals;

TEST(HeadFile, WritesAPrivateFileAndReadsItBack) {
  testing::temp_dir dir;
  const std::string path = dir.file(".troupe/slurm-7.json");
  ASSERT_TRUE(write_head_file(path, {"tcp://10.0.0.1:5555", "s3cret"}).ok());
  struct stat st {};
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);  // it holds the cluster's token
  auto read = read_head_file(path, 1s);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->endpoint, "tcp://10.0.0.1:5555");
  EXPECT_EQ(read->token, "s3cret");
}

TEST(HeadFile, AMissingOrForeignFileIsAClearError) {
  testing::temp_dir dir;
  const std::string path = dir.file("slurm-8.json");
  auto late = read_head_file(path, 100ms);
  EXPECT_EQ(late.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_TRUE(absl::StrContains(late.status().message(), "no head file " + path)) << late.status();
  dir.write("slurm-8.json", "{\"endpoint\": 5}\n");
  EXPECT_EQ(read_head_file(path).status().message(),
            path + " is not a troupe head file ({\"endpoint\", \"token\"}); remove it");
}

TEST(HeadFile, AHeadsFilesGoWithIt) {
  testing::temp_dir dir;
  const std::string extra = dir.file("job/slurm-9.json");
  const std::string endpoint = "tcp://127.0.0.1:65011";
  {
    head_cluster_file files("tok", extra);
    ASSERT_TRUE(files.listening(endpoint).ok());
    EXPECT_EQ(read_head_file(extra)->token, "tok");
    EXPECT_EQ(read_cluster_token(endpoint).value(), "tok");
  }
  EXPECT_FALSE(std::filesystem::exists(extra));
  EXPECT_FALSE(read_cluster_token(endpoint).ok());
}

}  // namespace
}  // namespace troupe::cluster

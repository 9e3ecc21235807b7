// The Debian package (scripts/deb.sh, docs/plugins.md "The Debian package"): built from a CPU-only
// tree, its dependencies are Debian packages, it unpacks with `dpkg -x` into any root and runs
// there (troupe version, its plugins, the packaged quickstart over two worker processes), and
// lintian finds no error in it. One test, so that the package is built once and never by two
// tests at the same time.

#include <filesystem>

#include <gtest/gtest.h>

#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "tests/integration/troupe_cli.hpp"

namespace troupe::testing {
namespace {

namespace fs = std::filesystem;

std::string control_field(const std::string& deb, const std::string& name) {
  auto r = run({"/usr/bin/dpkg-deb", "-f", deb, name});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return std::string(absl::StripSuffix(r.out, "\n"));
}

TEST(DebTest, ThePackageUnpacksRunsAndPassesLintian) {
  temp_dir dir;
  // The packaging tree lies beside the test build's tree, at the same depth: ccache then serves
  // it the objects of the build (CMakeLists.txt, base_dir), and a rerun only relinks.
  auto built = run({TROUPE_SOURCE_DIR "/scripts/deb.sh", "--build-dir", TROUPE_BUILD_DIR "-deb"},
                   std::chrono::minutes(20));
  ASSERT_EQ(built.exit_code, 0) << built.out << built.err;
  const std::vector<std::string> lines = absl::StrSplit(absl::StripSuffix(built.out, "\n"), '\n');
  const std::string deb = lines.back();

  // Named by its version; its dependencies are Debian's library packages, none from CUDA.
  EXPECT_EQ(fs::path(deb).filename(), "troupe_" TROUPE_VERSION "_amd64.deb");
  EXPECT_EQ(control_field(deb, "Package"), "troupe");
  EXPECT_EQ(control_field(deb, "Version"), TROUPE_VERSION);
  const std::string depends = control_field(deb, "Depends");
  for (const char* package : {"libcaf-core0.17", "libzmq5", "libgloo0", "libopenblas0"})
    EXPECT_NE(depends.find(package), std::string::npos) << package << " in " << depends;
  EXPECT_EQ(depends.find("cuda"), std::string::npos) << depends;
  EXPECT_EQ(depends.find("nccl"), std::string::npos) << depends;

  // Unpacked into a root of its own, the binary finds its libraries, plugins and configs.
  const std::string root = dir.file("root"), bin = root + "/usr/bin/troupe";
  auto unpacked = run({"/usr/bin/dpkg", "-x", deb, root});
  ASSERT_EQ(unpacked.exit_code, 0) << unpacked.err;
  auto version = run({bin, "version"});
  ASSERT_EQ(version.exit_code, 0) << version.err;
  EXPECT_NE(version.out.find("troupe " TROUPE_VERSION), std::string::npos) << version.out;
  auto listed = run({bin, "plugins", "list"});
  ASSERT_EQ(listed.exit_code, 0) << listed.err;
  EXPECT_NE(
      listed.out.find(root + "/usr/lib/x86_64-linux-gnu/troupe/plugins/troupe_plugin_example.so"),
      std::string::npos)
      << listed.out;

  // The packaged quickstart, shortened: the head and two worker processes, all of the package.
  auto launched =
      run({bin, "launch", root + "/usr/share/troupe/configs/quickstart.yaml", "--run-dir",
           dir.file("run"), "--set", "pretrain.train.steps=12", "--set", "pretrain.train.warmup=2",
           "--set", "pretrain.checkpoint.every_steps=6", "--set", "pretrain.data.eval_every=6"},
          std::chrono::minutes(5));
  ASSERT_EQ(launched.exit_code, 0) << launched.err;
  const auto summary = summary_of(launched);
  EXPECT_EQ(summary["status"], "succeeded") << launched.out;
  EXPECT_EQ(summary["steps"], 12);
  EXPECT_EQ(summary["world_size"], 2);

  auto lint = run({"/usr/bin/lintian", "--fail-on", "error", deb}, std::chrono::minutes(5));
  EXPECT_EQ(lint.exit_code, 0) << lint.out << lint.err;
}

}  // namespace
}  // namespace troupe::testing

// An installed troupe, as a plugin author meets it (docs/plugins.md "Out of tree"): `cmake
// --install` into a temp prefix; the installed binary finds its own plugins and configs; the
// example plugin, copied out of the repository and renamed, builds against the installed SDK
// with find_package(troupe) and runs in a launch of the installed binary.

#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>

#include <gtest/gtest.h>

#include "runtime/plugin/plugin_abi.h"
#include "tests/integration/troupe_cli.hpp"

namespace troupe::testing {
namespace {

namespace fs = std::filesystem;

// Replaces every `from` in the file at `path` with `to`; the file must hold at least one.
void replace_in(const fs::path& path, const std::string& from, const std::string& to) {
  std::string text = read_file(path);
  size_t at = text.find(from);
  ASSERT_NE(at, std::string::npos) << from << " in " << path;
  for (; at != std::string::npos; at = text.find(from, at + to.size()))
    text.replace(at, from.size(), to);
  std::ofstream(path) << text;
}

class InstallTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new temp_dir;
    install_ = new process_result(
        run({TROUPE_CMAKE, "--install", TROUPE_BUILD_DIR, "--prefix", dir_->file("prefix")},
            std::chrono::minutes(5)));
  }
  static void TearDownTestSuite() {
    delete install_;
    delete dir_;
  }
  void SetUp() override { ASSERT_EQ(install_->exit_code, 0) << install_->out << install_->err; }

  static std::string prefix() { return dir_->file("prefix"); }
  static std::string bin() { return prefix() + "/bin/troupe"; }

  static temp_dir* dir_;
  static process_result* install_;
};
temp_dir* InstallTest::dir_ = nullptr;
process_result* InstallTest::install_ = nullptr;

TEST_F(InstallTest, ThePrefixHoldsTheBinaryThePluginsTheSdkAndShare) {
  for (const char* path :
       {"bin/troupe", "lib/troupe/libtroupe_core.so", "lib/troupe/plugins/troupe_plugin_example.so",
        "lib/troupe/plugins/troupe_plugin_reward_example.so", "lib/cmake/troupe/troupeConfig.cmake",
        "lib/cmake/troupe/troupeConfigVersion.cmake", "include/troupe/runtime/plugin/plugin_abi.h",
        "include/troupe/runtime/plugin/plugin_api.hpp", "share/troupe/configs/quickstart.yaml",
        "share/troupe/docs/plugins.md"}) {
    EXPECT_TRUE(fs::exists(prefix() + "/" + path)) << path;
  }
  // Nothing of troupe's internals beyond the SDK: no app, cluster or kernel headers.
  EXPECT_FALSE(fs::exists(prefix() + "/include/troupe/apps"));
  EXPECT_FALSE(fs::exists(prefix() + "/include/troupe/runtime/cluster"));
}

TEST_F(InstallTest, TheInstalledBinaryFindsItsPluginsAndRunsTheirConfig) {
  // No TROUPE_PLUGIN_PATH: the plugins come from the prefix, found from the binary's own path.
  auto listed = run({bin(), "plugins", "list", "--json"});
  ASSERT_EQ(listed.exit_code, 0) << listed.err;
  auto out = nlohmann::json::parse(listed.out);
  bool caesar = false;
  for (const auto& role : out["roles"]) {
    if (role["kind"] == "stage" && role["name"] == "caesar") {
      caesar = true;
      EXPECT_EQ(role["origin"],
                "plugin example (" + prefix() + "/lib/troupe/plugins/troupe_plugin_example.so)");
    }
  }
  EXPECT_TRUE(caesar) << listed.out;

  auto launched = run({bin(), "launch", prefix() + "/share/troupe/configs/plugin_example.yaml",
                       "--run-dir", dir_->file("run_installed")},
                      std::chrono::minutes(2));
  ASSERT_EQ(launched.exit_code, 0) << launched.err;
  EXPECT_EQ(nlohmann::json::parse(launched.out)["status"], "succeeded") << launched.out;
}

// The example plugin's project, copied out of the repository as plugin `name` with the role
// stage/`name`_caesar (so that it cannot be taken for the installed one), with `edit` applied to
// its plugin.cpp, in `dir`, built against the SDK installed under `prefix`. Returns the build
// directory.
std::string build_example_copy(const temp_dir& dir, const std::string& name,
                               const std::string& prefix,
                               const std::function<void(const fs::path&)>& edit = {}) {
  const fs::path project = dir.file(name + "_plugin");
  fs::copy(fs::path(TROUPE_SOURCE_DIR) / "plugins/example", project);
  replace_in(project / "CMakeLists.txt", "troupe_add_plugin(example", "troupe_add_plugin(" + name);
  replace_in(project / "plugin.cpp", "TROUPE_PLUGIN(\"example\"", "TROUPE_PLUGIN(\"" + name + "\"");
  replace_in(project / "plugin.cpp", "\"caesar\"", "\"" + name + "_caesar\"");
  if (edit) edit(project / "plugin.cpp");

  const std::string build = project.string() + "/build";
  auto configured =
      run({TROUPE_CMAKE, "-S", project.string(), "-B", build, "-DCMAKE_PREFIX_PATH=" + prefix},
          std::chrono::minutes(2));
  EXPECT_EQ(configured.exit_code, 0) << configured.out << configured.err;
  auto built = run({TROUPE_CMAKE, "--build", build}, std::chrono::minutes(5));
  EXPECT_EQ(built.exit_code, 0) << built.out << built.err;
  EXPECT_TRUE(fs::exists(build + "/troupe_plugin_" + name + ".so"));
  return build;
}

TEST_F(InstallTest, AnOutOfTreePluginBuildsAgainstTheInstalledSdkAndRuns) {
  const std::string build = build_example_copy(*dir_, "rot", prefix());
  ASSERT_FALSE(HasFailure());

  const std::string config = dir_->write(
      "rot.yaml",
      "app: pipeline\n"
      "roles:\n"
      "  lines: {kind: source, impl: text, options: {path: " +
          dir_->write("input.txt", "Hello\nWorld\n") +
          ", delimiter: ''}}\n"
          "  rotate: {kind: stage, impl: rot_caesar, plugin: rot, options: {shift: 1}}\n"
          "  digest: {kind: sink, impl: digest}\n"
          "pipeline: {flow: [lines, rotate, digest]}\n");
  auto launched =
      run({bin(), "launch", config, "--plugin-dir", build, "--run-dir", dir_->file("run_rot")},
          std::chrono::minutes(2));
  ASSERT_EQ(launched.exit_code, 0) << launched.err;
  auto summary = nlohmann::json::parse(launched.out);
  EXPECT_EQ(summary["status"], "succeeded");
  EXPECT_EQ(summary["items"], 2);

  auto listed = run({bin(), "plugins", "list", "--plugin-dir", build});
  EXPECT_NE(listed.out.find("stage/rot_caesar"), std::string::npos) << listed.out;
}

// A plugin built out of tree for another ABI number is refused by the installed troupe, which
// names both numbers.
TEST_F(InstallTest, AnOutOfTreePluginOfAnotherAbiIsRefusedNamingBothNumbers) {
  const std::string build =
      build_example_copy(*dir_, "other_abi", prefix(), [](const fs::path& source) {
        replace_in(source, "#include \"runtime/plugin/plugin_api.hpp\"\n",
                   "#include \"runtime/plugin/plugin_api.hpp\"\n#undef TROUPE_PLUGIN_ABI_VERSION\n"
                   "#define TROUPE_PLUGIN_ABI_VERSION 99u\n");
      });
  ASSERT_FALSE(HasFailure());
  auto listed = run({bin(), "plugins", "list", "--plugin-dir", build, "--json"});
  EXPECT_EQ(listed.exit_code, 1) << listed.err;
  const std::string errors = nlohmann::json::parse(listed.out)["errors"].dump();
  EXPECT_NE(errors.find("plugin ABI mismatch: the plugin was built for ABI version 99"),
            std::string::npos)
      << errors;
  EXPECT_NE(
      errors.find("this troupe uses ABI version " + std::to_string(TROUPE_PLUGIN_ABI_VERSION)),
      std::string::npos)
      << errors;
  EXPECT_EQ(listed.out.find("other_abi_caesar"), std::string::npos) << listed.out;
}

// `troupe plugins new` as a new user meets it: each kind's project builds against the installed
// SDK, passes its own test, and its plugin loads and runs (a stage and a source in a pipeline, a
// source also as pretraining's data, a reward in a GRPO run).
TEST_F(InstallTest, PluginsNewMakesAProjectOfEachKindThatBuildsPassesItsTestAndLoads) {
  for (const std::string kind : {"stage", "source", "reward"}) {
    SCOPED_TRACE(kind);
    const std::string name = "my_" + kind;
    const std::string project = dir_->file(name);
    auto made =
        run({bin(), "plugins", "new", name, "--kind", kind, "--dir", dir_->path().string()});
    ASSERT_EQ(made.exit_code, 0) << made.err;
    EXPECT_NE(made.out.find("-DCMAKE_PREFIX_PATH=" + prefix() + "\n"), std::string::npos)
        << made.out;

    const std::string build = project + "/build";
    auto configured =
        run({TROUPE_CMAKE, "-S", project, "-B", build, "-DCMAKE_PREFIX_PATH=" + prefix()},
            std::chrono::minutes(2));
    ASSERT_EQ(configured.exit_code, 0) << configured.out << configured.err;
    auto built = run({TROUPE_CMAKE, "--build", build, "-j", "2"}, std::chrono::minutes(5));
    ASSERT_EQ(built.exit_code, 0) << built.out << built.err;
    auto tested = run({TROUPE_CTEST, "--test-dir", build, "--output-on-failure"});
    ASSERT_EQ(tested.exit_code, 0) << tested.out << tested.err;

    auto listed = run({bin(), "plugins", "list", "--plugin-dir", build});
    EXPECT_NE(listed.out.find(kind + "/" + name), std::string::npos) << listed.out;
    // A stage or a source runs in its project's pipeline; a reward scores a short GRPO run of
    // the installed config.
    const std::vector<std::string> launch =
        kind == "reward"
            ? std::vector<std::string>{bin(),
                                       "launch",
                                       prefix() + "/share/troupe/configs/rlhf_grpo.yaml",
                                       "--plugin-dir",
                                       build,
                                       "--run-dir",
                                       project + "/run",
                                       "--set",
                                       "roles.reward={kind: reward, impl: my_reward, "
                                       "plugin: my_reward}",
                                       "--set",
                                       "rlhf.warmup.steps=0",
                                       "--set",
                                       "rlhf.trainer.test_freq=0",
                                       "--set",
                                       "rlhf.trainer.total_training_steps=2"}
            : std::vector<std::string>{bin(),           "launch", project + "/" + name + ".yaml",
                                       "--plugin-dir",  build,    "--run-dir",
                                       project + "/run"};
    auto launched = run(launch, std::chrono::minutes(3));
    ASSERT_EQ(launched.exit_code, 0) << launched.err;
    EXPECT_EQ(nlohmann::json::parse(launched.out)["status"], "succeeded") << launched.out;
    if (kind != "source") continue;
    // A source is also a pretraining data source: each trainer rank reads the plugin's records.
    auto pretrained = run({bin(), "launch", project + "/" + name + "_pretrain.yaml", "--plugin-dir",
                           build, "--run-dir", project + "/run_pretrain"},
                          std::chrono::minutes(3));
    ASSERT_EQ(pretrained.exit_code, 0) << pretrained.err;
    const auto summary = summary_of(pretrained);
    EXPECT_EQ(summary["status"], "succeeded") << pretrained.out;
    EXPECT_EQ(summary["steps"], 50);
    EXPECT_LT(summary["train_loss"].get<double>(), 3.0) << pretrained.out;  // ln 256 = 5.5
  }
  // A second project of the same name is refused, and so is a bad name, with exit code 2.
  auto again = run({bin(), "plugins", "new", "my_stage", "--dir", dir_->path().string()});
  EXPECT_EQ(again.exit_code, 2);
  EXPECT_NE(again.err.find("exists already"), std::string::npos) << again.err;
  auto bad = run({bin(), "plugins", "new", "My-Plugin"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("lowercase letters"), std::string::npos) << bad.err;
  // From a build tree there is no SDK to build against yet: it says how to install one.
  auto from_tree =
      run({TROUPE_BINARY, "plugins", "new", "tree_stage", "--dir", dir_->path().string()});
  EXPECT_EQ(from_tree.exit_code, 0) << from_tree.err;
  EXPECT_NE(from_tree.out.find("install it first with `cmake --install build --prefix PREFIX`"),
            std::string::npos)
      << from_tree.out;
}

}  // namespace
}  // namespace troupe::testing

#include "apps/cli/plugin_project.hpp"

#include <map>

#include <gtest/gtest.h>

namespace troupe::cli {
namespace {

std::map<std::string, std::string> files_of(const plugin_project_spec& spec) {
  auto files = plugin_project_files(spec);
  EXPECT_TRUE(files.ok()) << files.status();
  std::map<std::string, std::string> out;
  if (files.ok()) {
    for (auto& f : *files)
      out[f.path] = f.text;
  }
  return out;
}

TEST(PluginProject, AStageProjectHasTheLogicItsTestThePluginAConfigAndTheBuild) {
  auto files = files_of({.name = "twice", .kind = "stage", .dir = "/p/twice", .prefix = "/opt/t"});
  std::vector<std::string> paths;
  for (const auto& [path, text] : files) {
    paths.push_back(path);
    EXPECT_EQ(text.find("{{"), std::string::npos) << path << ": a {{...}} was not substituted";
  }
  EXPECT_EQ(paths, (std::vector<std::string>{"CMakeLists.txt", "README.md", "plugin.cpp",
                                             "twice.hpp", "twice.yaml", "twice_test.cpp"}));
  EXPECT_NE(files["CMakeLists.txt"].find("troupe_add_plugin(twice plugin.cpp)"), std::string::npos);
  EXPECT_NE(files["CMakeLists.txt"].find("-DCMAKE_PREFIX_PATH=/opt/t"), std::string::npos);
  EXPECT_NE(files["plugin.cpp"].find("r.add_role(\"stage\", \"twice\""), std::string::npos);
  EXPECT_NE(files["twice.yaml"].find("path: /p/twice/README.md"), std::string::npos);
}

TEST(PluginProject, ARewardProjectRegistersARuleAndHasNoConfig) {
  auto files = files_of({.name = "letters", .kind = "reward", .dir = "/p", .prefix = "/usr"});
  EXPECT_EQ(files.count("letters.yaml"), 0u);
  EXPECT_NE(files["plugin.cpp"].find("add_reward_rule(\"letters\""), std::string::npos);
  EXPECT_NE(files["README.md"].find("roles.reward: {kind: reward, impl: letters"),
            std::string::npos);
}

TEST(PluginProject, ASourceProjectRegistersASource) {
  auto files = files_of({.name = "numbers", .kind = "source", .dir = "/p", .prefix = "/usr"});
  EXPECT_NE(files["plugin.cpp"].find("r.add_role(\"source\", \"numbers\""), std::string::npos);
  EXPECT_NE(files["numbers.yaml"].find("flow: [records, digest]"), std::string::npos);
  // ... and a pretraining config that reads it (pretrain.data.source).
  EXPECT_NE(files["numbers_pretrain.yaml"].find("impl: numbers\n    plugin: numbers"),
            std::string::npos);
  EXPECT_NE(files["numbers_pretrain.yaml"].find("data: {source: records"), std::string::npos);
  EXPECT_NE(files["README.md"].find("troupe launch numbers_pretrain.yaml --plugin-dir build"),
            std::string::npos);
}

TEST(PluginProject, BadNamesAndKindsAreRefusedWithWhatIsAllowed) {
  for (const char* name : {"", "My", "9lives", "has-dash", "a b"}) {
    auto r = plugin_project_files({.name = name, .kind = "stage", .dir = "/p", .prefix = "/usr"});
    ASSERT_FALSE(r.ok()) << name;
    EXPECT_NE(r.status().message().find("lowercase letters, digits and '_'"), std::string::npos);
  }
  auto r = plugin_project_files({.name = "x", .kind = "sink", .dir = "/p", .prefix = "/usr"});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("one of stage, reward, source"), std::string::npos);
}

}  // namespace
}  // namespace troupe::cli

#include "runtime/plugin/plugin_loader.hpp"

#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "runtime/plugin/plugin_abi.h"
#include "runtime/plugin/plugin_api.hpp"
#include "tests/support/temp_dir.hpp"

namespace troupe::plugin {
namespace {

std::string test_plugin(const std::string& name) {
  return std::string(TROUPE_TEST_PLUGIN_DIR) + "/" + plugin_loader::file_name(name);
}

TEST(PluginLoader, LoadsTheExamplePluginByName) {
  actor::role_registry registry;
  plugin_loader loader({TROUPE_PLUGIN_DIR});
  auto p = loader.load("example", registry);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ((*p)->name, "example");
  EXPECT_EQ((*p)->abi_version, TROUPE_PLUGIN_ABI_VERSION);
  EXPECT_EQ((*p)->roles, std::vector<std::string>{"stage/caesar"});
  auto entry = registry.find("stage", "caesar");
  ASSERT_TRUE(entry.ok());
  EXPECT_EQ((*entry)->origin.plugin, "example");
  EXPECT_EQ((*entry)->origin.path, std::string(TROUPE_PLUGIN_DIR) + "/troupe_plugin_example.so");
  // Loading again is a no-op.
  auto again = loader.load("example", registry);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, *p);
}

// plugins/reward_example is C: its rule reward comes through troupe_plugin_add_reward_rule.
TEST(PluginLoader, LoadsARewardRuleWrittenInC) {
  actor::role_registry registry;
  plugin_loader loader({TROUPE_PLUGIN_DIR});
  auto p = loader.load("reward_example", registry);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ((*p)->roles, std::vector<std::string>{"reward/digits_format"});
  auto entry = registry.find("reward", "digits_format");
  ASSERT_TRUE(entry.ok());
  EXPECT_EQ((*entry)->origin.plugin, "reward_example");
  EXPECT_TRUE(absl::StrContains((*entry)->factory.description, "digits or commas"));
}

double half(void*, const char*, size_t, const char*, size_t, int) {
  return 0.5;
}

TEST(PluginLoader, TheRegistrarRefusesABadRewardRule) {
  registrar bad_name("p");
  troupe_plugin_add_reward_rule(bad_name.as_c(), "Bad-Name", "", half, nullptr);
  ASSERT_EQ(bad_name.errors().size(), 1u);
  EXPECT_TRUE(absl::StrContains(bad_name.errors()[0].message(), "'Bad-Name' is invalid"));
  EXPECT_TRUE(bad_name.roles().empty());

  registrar no_function("p");
  troupe_plugin_add_reward_rule(no_function.as_c(), "rule", "", nullptr, nullptr);
  ASSERT_EQ(no_function.errors().size(), 1u);
  EXPECT_TRUE(absl::StrContains(no_function.errors()[0].message(), "no score function"));

  registrar good("p");
  troupe_plugin_add_reward_rule(good.as_c(), "rule", "one half", half, nullptr);
  EXPECT_TRUE(good.errors().empty());
  ASSERT_EQ(good.roles().size(), 1u);
  EXPECT_EQ(good.roles()[0].kind, "reward");
  EXPECT_EQ(good.roles()[0].factory.description, "one half");
}

TEST(PluginLoader, RefusesAbiVersionMismatchNamingBothNumbers) {
  actor::role_registry registry;
  plugin_loader loader;
  auto p = loader.load_file(test_plugin("abi_mismatch"), registry);
  ASSERT_FALSE(p.ok());
  const std::string msg(p.status().message());
  EXPECT_NE(msg.find("ABI version " + std::to_string(TROUPE_PLUGIN_ABI_VERSION + 1)),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("this troupe uses ABI version " + std::to_string(TROUPE_PLUGIN_ABI_VERSION)),
            std::string::npos)
      << msg;
  EXPECT_TRUE(registry.entries().empty());
  EXPECT_TRUE(loader.loaded().empty());
}

TEST(PluginLoader, RefusesStructSizeMismatchNamingBothSizes) {
  actor::role_registry registry;
  plugin_loader loader;
  auto p = loader.load_file(test_plugin("size_mismatch"), registry);
  ASSERT_FALSE(p.ok());
  const std::string msg(p.status().message());
  EXPECT_NE(msg.find("struct size " + std::to_string(sizeof(troupe_plugin) + 8)), std::string::npos)
      << msg;
  EXPECT_NE(msg.find("struct size " + std::to_string(sizeof(troupe_plugin)) + "."),
            std::string::npos)
      << msg;
}

TEST(PluginLoader, UnknownPluginListsAvailableOnes) {
  actor::role_registry registry;
  plugin_loader loader({TROUPE_PLUGIN_DIR, TROUPE_TEST_PLUGIN_DIR});
  auto p = loader.load("exmaple", registry);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), absl::StatusCode::kNotFound);
  const std::string msg(p.status().message());
  EXPECT_NE(msg.find("Did you mean 'example'?"), std::string::npos) << msg;
  EXPECT_NE(
      msg.find("Valid plugins: abi_mismatch, example, faulty, reward_example, size_mismatch."),
      std::string::npos)
      << msg;
}

TEST(PluginLoader, RefusesFilesThatAreNotPlugins) {
  testing::temp_dir dir;
  actor::role_registry registry;
  plugin_loader loader;
  auto garbage = loader.load_file(dir.write("troupe_plugin_junk.so", "not an ELF file"), registry);
  ASSERT_FALSE(garbage.ok());
  EXPECT_NE(garbage.status().message().find("cannot load the plugin"), absl::string_view::npos);
  // A real shared library without the entry point.
  auto no_entry = loader.load_file("libcaf_core.so", registry);
  ASSERT_FALSE(no_entry.ok());
}

TEST(PluginLoader, RefusesAPluginWhoseFileNameDiffersFromItsName) {
  testing::temp_dir dir;
  const auto renamed = dir.path() / "troupe_plugin_other.so";
  std::filesystem::copy_file(std::string(TROUPE_PLUGIN_DIR) + "/troupe_plugin_example.so", renamed);
  actor::role_registry registry;
  plugin_loader loader;
  auto p = loader.load_file(renamed.string(), registry);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("its file must be named troupe_plugin_example.so"),
            absl::string_view::npos)
      << p.status();
}

}  // namespace
}  // namespace troupe::plugin

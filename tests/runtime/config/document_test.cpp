#include "runtime/config/document.hpp"

#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "tests/support/temp_dir.hpp"

namespace troupe::config {
namespace {

TEST(Document, ReportsSyntaxErrorsWithLocation) {
  auto doc = document::load_string("app: x\nroles: [a, b\n", "bad.yaml");
  ASSERT_FALSE(doc.ok());
  EXPECT_TRUE(absl::StartsWith(doc.status().message(), "bad.yaml:")) << doc.status();
  EXPECT_NE(doc.status().message().find("invalid YAML"), absl::string_view::npos);
}

TEST(Document, RejectsNonMapTopLevel) {
  auto doc = document::load_string("- a\n- b\n", "list.yaml");
  ASSERT_FALSE(doc.ok());
  EXPECT_NE(doc.status().message().find("list.yaml:1:1"), absl::string_view::npos) << doc.status();
}

TEST(Document, MissingFileIsNotFound) {
  auto doc = document::load_file("/nonexistent/troupe.yaml");
  ASSERT_FALSE(doc.ok());
  EXPECT_EQ(doc.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(doc.status().message().find("/nonexistent/troupe.yaml"), absl::string_view::npos);
}

TEST(Document, DirectoryIsNotAConfig) {
  testing::temp_dir dir;
  auto doc = document::load_file(dir.path().string());
  ASSERT_FALSE(doc.ok());
  EXPECT_NE(doc.status().message().find("is a directory"), absl::string_view::npos);
}

TEST(Document, LoadsFiles) {
  testing::temp_dir dir;
  auto doc = document::load_file(dir.write("a.yaml", "app: demo\n"));
  ASSERT_TRUE(doc.ok()) << doc.status();
  EXPECT_EQ(doc->root()["app"].Scalar(), "demo");
}

TEST(Document, OverridesKeepTypesAndCreateMaps) {
  auto doc = document::load_string("roles:\n  a: {count: 1}\n", "c.yaml");
  ASSERT_TRUE(doc.ok());
  ASSERT_TRUE(doc->apply_override("roles.a.count=3").ok());
  ASSERT_TRUE(doc->apply_override("roles.b.options.shift=7").ok());
  ASSERT_TRUE(doc->apply_override("pipeline.flow=[x, y]").ok());
  EXPECT_EQ(doc->root()["roles"]["a"]["count"].as<int>(), 3);
  EXPECT_EQ(doc->root()["roles"]["b"]["options"]["shift"].as<int>(), 7);
  EXPECT_EQ(doc->root()["pipeline"]["flow"].size(), 2u);
}

TEST(Document, OverrideLocationsNameTheOverride) {
  auto doc = document::load_string("roles:\n  a: {count: 1}\n", "c.yaml");
  ASSERT_TRUE(doc->apply_override("roles.a.count=x").ok());
  const YAML::Node& root = doc->root();
  EXPECT_EQ(doc->where("roles.a.count", root["roles"]["a"]["count"]), "--set roles.a.count=x");
  EXPECT_EQ(doc->where("roles.a", root["roles"]["a"]), "c.yaml:2:6");
}

TEST(Document, RejectsMalformedOverrides) {
  auto doc = document::load_string("runtime: 3\n", "c.yaml");
  EXPECT_FALSE(doc->apply_override("no_equals_sign").ok());
  EXPECT_FALSE(doc->apply_override("bad..path=1").ok());
  auto into_scalar = doc->apply_override("runtime.threads=2");
  ASSERT_FALSE(into_scalar.ok());
  EXPECT_NE(into_scalar.message().find("'runtime' is not a map"), absl::string_view::npos);
}

}  // namespace
}  // namespace troupe::config

#include "runtime/config/schema.hpp"

#include <gtest/gtest.h>

#include "runtime/config/document.hpp"

namespace troupe::config {
namespace {

struct inner {
  int depth = 2;
};

struct sample {
  std::string name;
  int count = 1;
  double ratio = 0.5;
  bool enabled = false;
  std::string mode = "fast";
  std::vector<std::string> tags;
  inner nested;
};

object_schema<sample> sample_schema() {
  object_schema<inner> in;
  in.add("depth", &inner::depth).range(0, 10);
  object_schema<sample> s;
  s.add("name", &sample::name).required();
  s.add("count", &sample::count).range(1, 64);
  s.add("ratio", &sample::ratio).range(0.0, 1.0);
  s.add("enabled", &sample::enabled);
  s.add("mode", &sample::mode).one_of({"fast", "slow"});
  s.add("tags", &sample::tags);
  s.add("nested", &sample::nested, in);
  return s;
}

// Parses `yaml` and returns the errors, one per line (empty when valid).
std::string errors_of(const std::string& yaml, sample* out = nullptr) {
  auto doc = document::load_string(yaml, "t.yaml");
  EXPECT_TRUE(doc.ok()) << doc.status();
  diagnostics diag;
  sample value;
  sample_schema().parse(doc->root(), parse_context(*doc, diag), value);
  if (out != nullptr) *out = value;
  return std::string(diag.status().message());
}

TEST(Schema, ParsesValidInputAndKeepsDefaults) {
  sample v;
  EXPECT_EQ(errors_of("name: a\ncount: 3\ntags: [x, y]\nnested: {depth: 4}\nenabled: yes\n", &v),
            "");
  EXPECT_EQ(v.name, "a");
  EXPECT_EQ(v.count, 3);
  EXPECT_EQ(v.ratio, 0.5);
  EXPECT_TRUE(v.enabled);
  EXPECT_EQ(v.tags, (std::vector<std::string>{"x", "y"}));
  EXPECT_EQ(v.nested.depth, 4);
}

TEST(Schema, UnknownKeySuggestsNearest) {
  EXPECT_EQ(errors_of("name: a\ncuont: 3\n"),
            "t.yaml:2:1: cuont: unknown key 'cuont'. Did you mean 'count'? Valid keys here: name, "
            "count, ratio, enabled, mode, tags, nested.");
}

TEST(Schema, UnknownNestedKeyNamesThePath) {
  EXPECT_EQ(errors_of("name: a\nnested:\n  dpeth: 1\n"),
            "t.yaml:3:3: nested.dpeth: unknown key 'dpeth'. Did you mean 'depth'? Valid keys here: "
            "depth.");
}

TEST(Schema, WrongTypes) {
  EXPECT_EQ(errors_of("name: a\ncount: many\n"),
            "t.yaml:2:8: count: expected an integer, got 'many'");
  EXPECT_EQ(errors_of("name: a\nratio: [1]\n"), "t.yaml:2:8: ratio: expected a number, got a list");
  EXPECT_EQ(errors_of("name: a\nenabled: 2\n"),
            "t.yaml:2:10: enabled: expected true or false, got '2'");
  EXPECT_EQ(errors_of("name: {x: 1}\n"), "t.yaml:1:7: name: expected a string, got a map");
  EXPECT_EQ(errors_of("name: a\ntags: x\n"),
            "t.yaml:2:7: tags: expected a list, got 'x' (each item a string)");
  EXPECT_EQ(errors_of("name: a\nnested: 3\n"), "t.yaml:2:9: nested: expected a map, got '3'");
}

TEST(Schema, MissingRequiredKey) {
  EXPECT_EQ(errors_of("count: 2\n"), "t.yaml:1:1: missing required key 'name'");
}

TEST(Schema, OutOfRange) {
  EXPECT_EQ(errors_of("name: a\ncount: 0\n"), "t.yaml:2:8: count: must be between 1 and 64, got 0");
  EXPECT_EQ(errors_of("name: a\nnested: {depth: 11}\n"),
            "t.yaml:2:17: nested.depth: must be between 0 and 10, got 11");
  EXPECT_EQ(
      errors_of("name: a\ncount: 99999999999\n"),
      "t.yaml:2:8: count: value 99999999999 does not fit (allowed -2147483648 to 2147483647)");
}

TEST(Schema, ChoicesSuggestNearest) {
  EXPECT_EQ(
      errors_of("name: a\nmode: fsat\n"),
      "t.yaml:2:7: mode: 'fsat' is not allowed. Did you mean 'fast'? Valid values: fast, slow.");
}

TEST(Schema, DuplicateKeys) {
  EXPECT_EQ(errors_of("name: a\nname: b\n"),
            "t.yaml:2:1: name: duplicate key; each key may appear once in a map");
}

TEST(Schema, ReportsEveryErrorAtOnce) {
  const std::string errors = errors_of("count: 0\nratio: x\nbogus: 1\n");
  EXPECT_EQ(std::count(errors.begin(), errors.end(), '\n'), 3) << errors;
}

TEST(Schema, RoundTripsThroughYaml) {
  sample v;
  ASSERT_EQ(errors_of("name: a\ncount: 3\n", &v), "");
  YAML::Emitter out;
  out << sample_schema().to_node(v);
  sample again;
  ASSERT_EQ(errors_of(out.c_str(), &again), "");
  EXPECT_EQ(again.count, 3);
  EXPECT_EQ(again.mode, "fast");
}

TEST(Schema, DescribesFields) {
  auto info = sample_schema().describe();
  ASSERT_EQ(info.size(), 7u);
  EXPECT_TRUE(info[0].required);
  EXPECT_EQ(info[1].key, "count");
  EXPECT_EQ(info[1].default_value, "1");
  EXPECT_EQ(info[1].type, "an integer");
}

}  // namespace
}  // namespace troupe::config

#include "actors/json_grammar.hpp"

#include <random>

#include <gtest/gtest.h>

#include "actors/guided_decoding.hpp"

namespace troupe::actors {
namespace {

using ojson = nlohmann::ordered_json;

std::shared_ptr<const json_grammar> grammar(const std::string& schema) {
  auto g = json_grammar::compile(schema);
  EXPECT_TRUE(g.ok()) << g.status();
  return g.ok() ? *g : nullptr;
}

// Whether the grammar takes `text` whole, as a complete value.
bool takes(const std::string& schema, const std::string& text) {
  const auto g = grammar(schema);
  json_matcher m(*g);
  return m.accept(text) && m.complete();
}

const char* person = R"({"type": "object", "properties": {
    "name": {"type": "string", "maxLength": 8},
    "age": {"type": "integer"},
    "tags": {"type": "array", "items": {"enum": ["a", "b", 3]}, "maxItems": 3},
    "ok": {"type": ["boolean", "null"]},
    "score": {"type": "number"}},
  "required": ["name", "ok"]})";

TEST(JsonGrammar, TakesTheSchemasValuesInCompactJson) {
  EXPECT_TRUE(takes(person, R"({"name": "Ann", "ok": true})"));
  EXPECT_TRUE(
      takes(person, R"({"name":"Ann","age":-41,"tags":["a", 3],"ok":null,"score":2.5e-3})"));
  EXPECT_TRUE(takes(person, R"({"name": "\u00e9\n", "tags": [], "ok": false})"));
  EXPECT_TRUE(takes(person, "{\"name\": \"caf\xc3\xa9\", \"ok\": true}"));
  EXPECT_FALSE(takes(person, R"({"ok": true})")) << "name is required";
  EXPECT_FALSE(takes(person, R"({"ok": true, "name": "x"})")) << "the written order";
  EXPECT_FALSE(takes(person, R"({"name": "123456789", "ok": true})")) << "maxLength";
  EXPECT_FALSE(takes(person, R"({"name": "x", "age": 1.5, "ok": true})")) << "an integer";
  EXPECT_FALSE(takes(person, R"({"name": "x", "tags": ["c"], "ok": true})")) << "the enum";
  EXPECT_FALSE(takes(person, R"({"name": "x", "tags": ["a","a","a","a"], "ok": true})"));
  EXPECT_FALSE(takes(person, R"({"name": "x", "ok": true, "extra": 1})"));
  EXPECT_FALSE(takes(person, R"({"name": "x",  "ok": true})")) << "one space at most";
  EXPECT_FALSE(takes(person, "{\"name\": \"\xc3\x28\", \"ok\": true}")) << "bad UTF-8";
  EXPECT_FALSE(takes(person, "{\"name\": \"\xed\xa0\x80\", \"ok\": true}")) << "a surrogate";
  EXPECT_FALSE(takes(person, R"({"name": "a\qb", "ok": true})")) << "a bad escape";
  EXPECT_FALSE(takes(person, R"({"name": "x", "age": 012, "ok": true})"));
  EXPECT_FALSE(takes(person, R"({"name": "x", "ok": true}})"));
  EXPECT_FALSE(takes(person, R"({"name": "x", "ok": tru})"));
}

TEST(JsonGrammar, AnyJsonWithinTheDepthAndDigitLimits) {
  const std::string object = R"({"type": "object"})";
  EXPECT_TRUE(takes(object, R"({"a": [1, {"b": null}], "c": "d", "e": -0.5E+10})"));
  EXPECT_TRUE(takes(object, "{}"));
  EXPECT_FALSE(takes(object, "[1]")) << "json_object is an object";
  EXPECT_FALSE(takes(object, R"({"a": 1,})"));
  EXPECT_TRUE(takes("{}", "[[[[[[[1]]]]]]]"));
  EXPECT_FALSE(takes("{}", "[[[[[[[[[[1]]]]]]]]]]")) << "more than 8 deep";
  EXPECT_TRUE(takes("{}", "1234567890123456"));
  EXPECT_FALSE(takes("{}", "12345678901234567")) << "17 digits";
  // A number at the top may go on; a closed value may not.
  const auto integer = grammar(R"({"type": "integer"})");
  json_matcher number(*integer);
  ASSERT_TRUE(number.accept("12"));
  EXPECT_TRUE(number.complete());
  EXPECT_TRUE(number.can_continue());
  const auto any_object = grammar(object);
  json_matcher closed(*any_object);
  ASSERT_TRUE(closed.accept("{}"));
  EXPECT_TRUE(closed.complete());
  EXPECT_FALSE(closed.can_continue());
  const auto words = grammar(R"({"enum": ["ab", "abc"]})");
  json_matcher word(*words);
  ASSERT_TRUE(word.accept("\"ab"));
  EXPECT_FALSE(word.complete());
}

TEST(JsonGrammar, RefusesWhatItCannotGuaranteeByName) {
  const auto refusal = [](const std::string& schema) {
    auto g = json_grammar::compile(schema);
    return g.ok() ? std::string() : std::string(g.status().message());
  };
  EXPECT_EQ(refusal(R"({"type": "string", "pattern": "a+"})"),
            "the schema at #: the keyword 'pattern' is not supported; troupe's structured output "
            "reads anyOf, const, enum, items, maxItems, maxLength, minItems, minLength, "
            "properties, required, type");
  EXPECT_NE(refusal(R"({"type": "object", "properties": {"x": {"anyOf": []}}})")
                .find("the schema at #/properties/x: 'anyOf' is supported for objects told apart "
                      "by their first property"),
            std::string::npos);
  EXPECT_EQ(refusal(R"({"type": "date"})"),
            "the schema at #: the type 'date' is not one of object, array, string, number, "
            "integer, boolean, null");
  EXPECT_EQ(refusal(R"({"type": "object", "properties": {}, "required": ["x"]})"),
            "the schema at #: 'required' names \"x\", which is not one of the properties");
  EXPECT_EQ(refusal(R"({"type": ["string", "object"], "enum": 3})"),
            "the schema at #: 'enum' must be a list");
  EXPECT_EQ(refusal(R"({"type": ["string", {"type": "x"}]})"),
            "the schema at #: 'type' must list names");
  EXPECT_EQ(refusal("not json"), "the schema is not valid JSON");
  EXPECT_EQ(refusal(R"({"const": )" + std::string(40, '[') + std::string(40, ']') + "}"),
            "the schema nests deeper than 32 levels");
  EXPECT_EQ(refusal(R"({"type": "string", "minLength": 3, "maxLength": 2})"),
            "the schema at #: 'minLength' is above 'maxLength'");
}

// A tagged union (anyOf of objects told apart by a first-property const), as tool_choice
// "required" asks for a list of calls: the tag picks the other properties' schemas.
const char* calls = R"({"type": "array", "minItems": 1, "items": {"anyOf": [
    {"type": "object", "properties": {"name": {"const": "set"},
       "parameters": {"type": "object", "properties": {"x": {"type": "integer"}},
                      "required": ["x"]}}, "required": ["name", "parameters"]},
    {"type": "object", "properties": {"name": {"const": "sea"},
       "parameters": {"type": "object", "properties": {"on": {"type": "boolean"}},
                      "required": ["on"]}}, "required": ["name", "parameters"]}]}})";

TEST(JsonGrammar, ATaggedUnionReadsTheOtherPropertiesOfItsTag) {
  EXPECT_TRUE(takes(calls, R"([{"name": "set", "parameters": {"x": 3}}])"));
  EXPECT_TRUE(takes(calls, R"([{"name": "sea", "parameters": {"on": true}},)"
                           R"({"name": "set", "parameters": {"x": -1}}])"));
  EXPECT_FALSE(takes(calls, R"([{"name": "set", "parameters": {"on": true}}])"));
  EXPECT_FALSE(takes(calls, R"([{"name": "sea", "parameters": {"x": 3}}])"));
  EXPECT_FALSE(takes(calls, R"([{"name": "see", "parameters": {"x": 3}}])"));
  EXPECT_FALSE(takes(calls, R"([{"parameters": {"x": 3}}])"));
  EXPECT_FALSE(takes(calls, "[]"));
  const auto refusal = [](const std::string& schema) {
    auto g = json_grammar::compile(schema);
    return g.ok() ? std::string() : std::string(g.status().message());
  };
  const std::string a = R"({"type": "object", "properties": {"name": {"const": "a"}, "p": {}},
                            "required": ["name"]})";
  EXPECT_NE(refusal(R"({"anyOf": [)" + a + ", " + a + "]}").find("\"a\" is twice"),
            std::string::npos);
  EXPECT_NE(refusal(R"({"anyOf": [)" + a + R"(, {"type": "string"}]})").find("#/anyOf/1"),
            std::string::npos);
  EXPECT_NE(refusal(R"({"anyOf": [{"type": "object", "properties": {"name": {"const": "a"}}}]})")
                .find("that is required"),
            std::string::npos);
}

// The guarantee: whatever bytes are drawn among those allowed, the value ends, parses, and
// holds what the schema asks for.
TEST(JsonGrammar, EveryRandomWalkEndsInAValidValue) {
  const auto g = grammar(person);
  for (uint32_t seed = 0; seed < 300; ++seed) {
    std::mt19937 rng(seed);
    json_matcher m(*g);
    std::string text;
    for (int step = 0; step < 4000 && m.can_continue(); ++step) {
      if (m.complete() && rng() % 4 == 0) break;  // a whole top-level value may stop here
      std::vector<uint8_t> next;
      for (int b = 0; b < 256; ++b) {
        json_matcher copy = m;
        if (copy.accept(static_cast<uint8_t>(b))) next.push_back(static_cast<uint8_t>(b));
      }
      ASSERT_FALSE(next.empty()) << text;
      // Mostly printable bytes, so that strings end now and then.
      const uint8_t b = next[rng() % next.size()];
      ASSERT_TRUE(m.accept(b));
      text.push_back(static_cast<char>(b));
    }
    ASSERT_TRUE(m.complete()) << "seed " << seed << ": " << text;
    const auto value = nlohmann::json::parse(text, nullptr, false);
    ASSERT_FALSE(value.is_discarded()) << text;
    ASSERT_TRUE(value.is_object());
    ASSERT_TRUE(value.contains("name") && value["name"].is_string()) << text;
    EXPECT_LE(value["name"].get<std::string>().size(), 8u * 4) << text;
    ASSERT_TRUE(value.contains("ok"));
    EXPECT_TRUE(value["ok"].is_boolean() || value["ok"].is_null());
    if (value.contains("age")) EXPECT_TRUE(value["age"].is_number_integer()) << text;
    if (value.contains("tags")) {
      EXPECT_LE(value["tags"].size(), 3u);
      for (const auto& t : value["tags"])
        EXPECT_TRUE(t == "a" || t == "b" || t == 3) << text;
    }
    if (value.contains("score")) EXPECT_TRUE(value["score"].is_number()) << text;
  }
}

// The mask: exactly the tokens whose bytes the grammar takes, and the stop token only once the
// value is whole.
TEST(GuidedDecoding, MasksTheTokensThatLeaveTheGrammar) {
  auto texts = std::make_shared<const std::vector<std::string>>(std::vector<std::string>{
      "{", "}", "\"", "\"a\"", ": ", ":", "1", "12", "x", "", "\"a\": 1}", " "});
  const int32_t stop = 9;  // a special token: no text
  guided_decoding guided(texts, 12);
  guided.add(7, grammar(R"({"type": "object", "properties": {"a": {"type": "integer"}},
                          "required": ["a"]})"));
  const auto allowed = [&] {
    std::vector<float> logits(12, 0.0f);
    EXPECT_TRUE(guided.mask(7, logits.data(), std::vector<int32_t>{stop}));
    std::vector<int32_t> out;
    for (int t = 0; t < 12; ++t) {
      if (logits[t] == 0.0f) out.push_back(t);
    }
    return out;
  };
  EXPECT_EQ(allowed(), (std::vector<int32_t>{0}));
  ASSERT_TRUE(guided.advance(7, 0));
  EXPECT_EQ(allowed(), (std::vector<int32_t>{2, 3, 10}));
  ASSERT_TRUE(guided.advance(7, 3));
  EXPECT_EQ(allowed(), (std::vector<int32_t>{4, 5}));
  ASSERT_TRUE(guided.advance(7, 4));
  EXPECT_EQ(allowed(), (std::vector<int32_t>{6, 7}));
  ASSERT_TRUE(guided.advance(7, 7));
  EXPECT_EQ(allowed(), (std::vector<int32_t>{1, 6, 7}));
  EXPECT_FALSE(guided.advance(7, 1)) << "the object is closed: the output ends";
  EXPECT_FALSE(guided.guides(8));
}

// Against the naive mask (each token's bytes through the grammar on its own), along random
// replies: strings' plain tokens by their room, the rest by the trie.
TEST(GuidedDecoding, TheMaskIsEveryTokenTheGrammarTakes) {
  auto texts = std::make_shared<const std::vector<std::string>>(std::vector<std::string>{
      "{",    "}",        "\"",   "\"a\"", ": ",          "abc",          "ab\"", "\\",
      "\\n",  "\xc3\xa9", "\xc3", "\xa9x", "\xc3\xa9\"}", "\"name\": \"", "1",    "\", \"",
      "true", "\"}",      "x",    ""});
  const int vocab = static_cast<int>(texts->size());
  const std::string schema = R"({"type": "object", "properties": {"name": {"type": "string",
      "maxLength": 4}, "a": {"type": "boolean"}}, "required": ["name"]})";
  const auto g = grammar(schema);
  for (uint32_t seed = 0; seed < 40; ++seed) {
    std::mt19937 rng(seed);
    guided_decoding guided(texts, vocab);
    guided.add(1, g);
    json_matcher naive_at(*g);
    for (int step = 0; step < 30; ++step) {
      std::vector<float> logits(vocab, 0.0f);
      if (!guided.mask(1, logits.data(), std::vector<int32_t>{})) break;
      std::vector<int32_t> allowed, naive;
      for (int t = 0; t < vocab; ++t) {
        if (logits[t] == 0.0f) allowed.push_back(t);
        json_matcher m = naive_at;
        if (!(*texts)[t].empty() && m.accept((*texts)[t])) naive.push_back(t);
      }
      ASSERT_EQ(allowed, naive) << "seed " << seed << " step " << step;
      const int32_t pick = allowed[rng() % allowed.size()];
      ASSERT_TRUE(naive_at.accept((*texts)[pick]));
      if (!guided.advance(1, pick)) break;
    }
  }
}

}  // namespace
}  // namespace troupe::actors

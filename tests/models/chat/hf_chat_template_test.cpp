#include "models/chat/hf_chat_template.hpp"

#include <gtest/gtest.h>

#include "tests/support/temp_dir.hpp"

namespace troupe::jinja {
namespace {

using nlohmann::json;

TEST(ChatTemplate, ARaisedExceptionNamesTheFileTheLineAndTheMessage) {
  auto t = chat::hf_chat_template::from_source(
      "{% for m in messages %}\n{% if m.role == 'bot' %}\n{{ raise_exception('no bots here') }}\n"
      "{% endif %}{{ m.content }}{% endfor %}",
      json::object(), "model/tokenizer_config.json");
  ASSERT_TRUE(t.ok()) << t.status();
  const auto text = t->render(json::array({{{"role", "bot"}, {"content", "x"}}}), {});
  ASSERT_FALSE(text.ok());
  EXPECT_EQ(text.status().message(),
            "model/tokenizer_config.json: chat template: line 3: the chat template raised: no "
            "bots here");
}

TEST(ChatTemplate, ASyntaxErrorIsRefusedWhenTheTemplateIsRead) {
  const auto t =
      chat::hf_chat_template::from_source("{% if x %}never closed", json::object(), "t.json");
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().message(),
            "t.json: the chat template does not parse: line 1: the template ends before 'elif' "
            "or 'else' or 'endif'");
  const auto u = chat::hf_chat_template::from_source("{% include 'x' %}", json::object(), "t.json");
  ASSERT_FALSE(u.ok());
  EXPECT_NE(u.status().message().find("unknown statement 'include'"), std::string::npos);
}

TEST(ChatTemplate, AModelWithoutATemplateIsNotFound) {
  troupe::testing::temp_dir dir;
  dir.write("tokenizer_config.json", R"({"bos_token": "<s>"})");
  EXPECT_EQ(chat::hf_chat_template::load(dir.path().string()).status().code(),
            absl::StatusCode::kNotFound);
  dir.write("chat_template.jinja",
            "{{ bos_token }}{% for m in messages %}{{ m.content }}{% endfor %}");
  const auto t = chat::hf_chat_template::load(dir.path().string());
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(*t->render(json::array({{{"role", "user"}, {"content", "hi"}}}), {}), "<s>hi");
}

TEST(ChatTemplate, ARunawayTemplateIsStopped) {
  auto t = jinja_template::compile("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}");
  ASSERT_TRUE(t.ok());
  const auto text = t->render({});
  ASSERT_FALSE(text.ok());
  EXPECT_NE(text.status().message().find("nests more than 64 calls deep"), std::string::npos);
  auto big = jinja_template::compile(
      "{% for a in range(100000) %}{% for b in range(100000) %}xxxxxxxxxx{% endfor %}{% endfor %}");
  ASSERT_TRUE(big.ok());
  const auto stopped = big->render({}, 1 << 20);
  EXPECT_EQ(stopped.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(stopped.status().message().find("rendered more than 1048576 bytes"), std::string::npos);
}

// Integers are 64-bit: a result beyond that is an error, never a wrapped number.
TEST(ChatTemplate, AnIntegerOverflowIsAnError) {
  for (const char* source :
       {"{{ 2 ** 200 }}", "{{ 9223372036854775807 + 1 }}", "{{ -9223372036854775807 * 2 }}"}) {
    auto t = jinja_template::compile(source);
    ASSERT_TRUE(t.ok());
    const auto text = t->render({});
    ASSERT_FALSE(text.ok()) << source;
    EXPECT_NE(text.status().message().find("is too large"), std::string::npos) << text.status();
  }
}

}  // namespace
}  // namespace troupe::jinja

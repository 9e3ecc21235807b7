#include "models/chat/hf_chat_template.hpp"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "runtime/base/status.hpp"

namespace troupe::chat {

namespace {

absl::StatusOr<std::string> read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open '", path, "'"));
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// The special tokens as transformers' special_tokens_map gives them: strings (an AddedToken
// object's content), absent ones left out.
nlohmann::json special_tokens_of(const nlohmann::json& config) {
  nlohmann::json out = nlohmann::json::object();
  if (!config.is_object()) return out;
  for (const char* key : {"bos_token", "eos_token", "unk_token", "sep_token", "pad_token",
                          "cls_token", "mask_token"}) {
    const auto it = config.find(key);
    if (it == config.end()) continue;
    if (it->is_string()) {
      out[key] = *it;
    } else if (it->is_object() && it->contains("content") && (*it)["content"].is_string()) {
      out[key] = (*it)["content"];
    }
  }
  if (config.contains("additional_special_tokens") &&
      config["additional_special_tokens"].is_array()) {
    out["additional_special_tokens"] = config["additional_special_tokens"];
  }
  return out;
}

absl::StatusOr<jinja::jinja_template> compile(const std::string& source, const std::string& where) {
  auto t = jinja::jinja_template::compile(source);
  if (!t.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": the chat template does not parse: ", t.status().message()));
  }
  return t;
}

}  // namespace

absl::StatusOr<hf_chat_template> hf_chat_template::from_source(const std::string& source,
                                                               const nlohmann::json& config,
                                                               const std::string& where) {
  hf_chat_template t;
  t.where_ = where;
  TROUPE_ASSIGN_OR_RETURN(t.default_, compile(source, where));
  t.special_tokens_ = special_tokens_of(config);
  return t;
}

absl::StatusOr<hf_chat_template> hf_chat_template::from_config(const nlohmann::json& config,
                                                               const std::string& where) {
  const auto it = config.is_object() ? config.find("chat_template") : config.end();
  if (!config.is_object() || it == config.end() || it->is_null()) {
    return absl::NotFoundError(absl::StrCat(where, " has no chat_template"));
  }
  if (it->is_string()) return from_source(it->get<std::string>(), config, where);
  if (!it->is_array()) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": chat_template must be a text or a list of {name, template}"));
  }
  std::optional<std::string> fallback, tool_use;
  for (const auto& entry : *it) {
    if (!entry.is_object() || !entry.contains("name") || !entry.contains("template") ||
        !entry["name"].is_string() || !entry["template"].is_string()) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": each chat_template entry needs a name and a template"));
    }
    if (entry["name"] == "default") fallback = entry["template"].get<std::string>();
    if (entry["name"] == "tool_use") tool_use = entry["template"].get<std::string>();
  }
  if (!fallback) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": chat_template has no 'default' entry"));
  }
  TROUPE_ASSIGN_OR_RETURN(hf_chat_template t, from_source(*fallback, config, where));
  if (tool_use) {
    TROUPE_ASSIGN_OR_RETURN(t.tool_use_, compile(*tool_use, where + " (tool_use)"));
  }
  return t;
}

absl::StatusOr<hf_chat_template> hf_chat_template::load(const std::string& model_dir) {
  const std::string config_path = model_dir + "/tokenizer_config.json";
  nlohmann::json config = nlohmann::json::object();
  if (std::filesystem::exists(config_path)) {
    TROUPE_ASSIGN_OR_RETURN(const std::string text, read_text(config_path));
    config = nlohmann::json::parse(text, nullptr, false);
    if (config.is_discarded()) {
      return absl::InvalidArgumentError(absl::StrCat(config_path, " is not valid JSON"));
    }
  }
  // Newer transformers save the template in a file of its own.
  const std::string jinja_path = model_dir + "/chat_template.jinja";
  if (std::filesystem::exists(jinja_path)) {
    TROUPE_ASSIGN_OR_RETURN(const std::string source, read_text(jinja_path));
    return from_source(source, config, jinja_path);
  }
  return from_config(config, config_path);
}

absl::StatusOr<std::string> hf_chat_template::render(const nlohmann::json& messages,
                                                     const chat_render_options& options) const {
  if (!messages.is_array()) {
    return absl::InvalidArgumentError("messages must be a list of {\"role\", \"content\"}");
  }
  jinja::value_dict context;
  for (const auto& [k, v] : special_tokens_.items())
    context.set(k, jinja::from_json(v));
  context.set("messages", jinja::from_json(messages));
  context.set("tools", jinja::from_json(options.tools));
  context.set("documents", jinja::value(jinja::none{}));
  context.set("add_generation_prompt", jinja::value(options.add_generation_prompt));
  if (options.extra.is_object()) {
    for (const auto& [k, v] : options.extra.items())
      context.set(k, jinja::from_json(v));
  }
  const bool with_tools = !options.tools.is_null() && tool_use_.has_value();
  auto text = (with_tools ? *tool_use_ : default_).render(context);
  if (!text.ok()) {
    return absl::Status(text.status().code(),
                        absl::StrCat(where_, ": chat template: ", text.status().message()));
  }
  return text;
}

}  // namespace troupe::chat

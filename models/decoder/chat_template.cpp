#include "models/decoder/chat_template.hpp"

#include "absl/strings/str_cat.h"

namespace troupe::models {

absl::StatusOr<rendered_chat> render_chat(const nlohmann::json& messages,
                                          bool add_generation_prompt) {
  if (!messages.is_array() || messages.empty()) {
    return absl::InvalidArgumentError("'messages' must be a non-empty list of {role, content}");
  }
  rendered_chat out;
  const auto append = [&](const std::string& part, uint8_t trained) {
    out.text += part;
    out.assistant.insert(out.assistant.end(), part.size(), trained);
  };
  for (size_t i = 0; i < messages.size(); ++i) {
    const nlohmann::json& m = messages[i];
    const std::string where = absl::StrCat("messages[", i, "]");
    if (!m.is_object() || !m.contains("role") || !m.contains("content") || !m["role"].is_string() ||
        !m["content"].is_string()) {
      return absl::InvalidArgumentError(where + " must be {\"role\": string, \"content\": string}");
    }
    const std::string role = m["role"];
    if (role != "system" && role != "user" && role != "assistant") {
      return absl::InvalidArgumentError(where + ".role must be system, user or assistant, not '" +
                                        role + "'");
    }
    append(absl::StrCat("<|", role, "|>\n"), 0);
    append(m["content"].get<std::string>() + "\n", role == "assistant" ? 1 : 0);
  }
  if (add_generation_prompt) append("<|assistant|>\n", 0);
  return out;
}

}  // namespace troupe::models

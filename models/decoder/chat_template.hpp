#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace troupe::models {

/// troupe's chat template, shared by the serving API's chat completions and supervised
/// fine-tuning on conversations: each message as "<|role|>\ncontent\n" (role system, user or
/// assistant), then, for generation, the assistant's turn "<|assistant|>\n".
struct rendered_chat {
  std::string text;
  /// Per byte of `text`: 1 where it is an assistant message's content and the newline that
  /// ends it (what SFT trains on), 0 elsewhere (headers, system and user messages).
  std::vector<uint8_t> assistant;
};

/// Renders `messages` (a JSON list of {"role": string, "content": string}), with the
/// generation prompt after them when `add_generation_prompt`. INVALID_ARGUMENT naming the
/// message ("messages[2].role must be system, user or assistant, not 'bot'") otherwise.
[[nodiscard]] absl::StatusOr<rendered_chat> render_chat(const nlohmann::json& messages,
                                                        bool add_generation_prompt);

}  // namespace troupe::models

#pragma once

// What the OpenAI API's request parsing and response rendering share: JSON text and the 400.

#include <string>

#include "apps/serve/openai_api.hpp"
#include "nlohmann/json.hpp"

namespace troupe::apps::openai_json {

using json = nlohmann::json;

/// Compact JSON text; stray bytes (a byte-level model's half character) become U+FFFD.
inline std::string dump(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

/// A 400 invalid_request_error.
inline api_error invalid(std::string message, std::string code = "") {
  return {400, "invalid_request_error", std::move(code), std::move(message)};
}

}  // namespace troupe::apps::openai_json

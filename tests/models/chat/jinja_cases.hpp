#pragma once

// Templates and contexts that troupe's Jinja interpreter and Jinja2 render side by side
// (jinja_reference_test.cpp): each Jinja feature chat templates use, then real models' chat
// templates over a set of conversations.

#include <string>
#include <vector>

#include "nlohmann/json.hpp"

namespace troupe::jinja::testing {

struct render_case {
  std::string name;
  std::string source;
  nlohmann::json context;
};

/// Small templates, one feature each (whitespace control, expressions, filters, tests, loops,
/// scoping, macros, namespaces, errors).
std::vector<render_case> feature_cases();

/// Conversations to render real chat templates with: system prompt or not, multi-turn,
/// tools and tool calls, reasoning, the generation prompt or not, enable_thinking.
std::vector<std::pair<std::string, nlohmann::json>> conversations();

}  // namespace troupe::jinja::testing

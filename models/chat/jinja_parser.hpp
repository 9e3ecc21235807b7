#pragma once

// Jinja's grammar, as Jinja2's parser reads it: the precedence of its operators, filters and
// tests after a unary operand, conditional expressions, and the statements chat templates use
// (if, for with else and loop controls, set and block set, macro, raw, generation).

#include <vector>

#include "absl/status/statusor.h"
#include "models/chat/jinja_ast.hpp"
#include "models/chat/jinja_lexer.hpp"

namespace troupe::jinja {

/// The statements of a template; INVALID_ARGUMENT with the line of the first syntax error.
[[nodiscard]] absl::StatusOr<body> parse(const std::vector<token>& tokens);

}  // namespace troupe::jinja

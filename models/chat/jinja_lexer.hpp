#pragma once

// Jinja's lexer with the whitespace rules transformers renders chat templates with
// (trim_blocks and lstrip_blocks on, '-' and '+' modifiers on tags).

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace troupe::jinja {

struct token {
  enum class kind {
    text,
    var_begin,
    var_end,
    block_begin,
    block_end,
    name,
    string,
    integer,
    floating,
    op,
  } k;
  std::string text;  // text, a name, a string's value, a number's digits, an operator
  int line = 1;
};

/// The tokens of `source`; INVALID_ARGUMENT with the line for an unterminated tag, string or
/// comment, or a character no token starts with.
[[nodiscard]] absl::StatusOr<std::vector<token>> lex(const std::string& source);

}  // namespace troupe::jinja

#pragma once

// A Jinja template, compiled once and rendered any number of times: troupe's interpreter of
// the Jinja subset that chat templates use (statements, expressions, filters, tests, loops
// with loop controls, macros, namespaces), rendering as Jinja2 does with transformers'
// settings (trim_blocks, lstrip_blocks, an immutable sandbox, its tojson). No C++ Jinja is
// packaged by Debian; tests check this one against python3-jinja2.

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "models/chat/jinja_ast.hpp"
#include "models/chat/jinja_value.hpp"

namespace troupe::jinja {

/// What a render may produce before it is stopped with an error (a runaway template).
inline constexpr size_t max_rendered_bytes = 64u << 20;

class jinja_template {
 public:
  /// INVALID_ARGUMENT "line N: ..." for a syntax error or a statement troupe does not read.
  [[nodiscard]] static absl::StatusOr<jinja_template> compile(const std::string& source);

  /// Renders with the variables of `context` (and the built-in globals). A template that
  /// calls raise_exception(message) fails with "line N: the chat template raised: message";
  /// using an undefined value, a type error or a missing filter is INVALID_ARGUMENT naming it;
  /// rendering more than `max_bytes` is RESOURCE_EXHAUSTED.
  [[nodiscard]] absl::StatusOr<std::string> render(const value_dict& context,
                                                   size_t max_bytes = max_rendered_bytes) const;

 private:
  std::shared_ptr<const body> body_;
};

}  // namespace troupe::jinja

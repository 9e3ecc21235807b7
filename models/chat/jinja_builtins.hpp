#pragma once

// Jinja's built-in filters and tests, the Python methods of strings, dicts and lists that a
// sandboxed Jinja2 lets templates call, attribute and item lookup, and the operators, with
// Python's semantics.

#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "models/chat/jinja_value.hpp"

namespace troupe::jinja {

/// Calls a value (a function, a macro, a bound method) with arguments; filters such as map()
/// and select() go through it.
using invoke_fn = std::function<absl::StatusOr<value>(const value& f, const call_args& args)>;

/// `obj.name`: a method of obj's type first, then obj[name]; undefined where neither exists.
[[nodiscard]] absl::StatusOr<value> get_attribute(const value& obj, const std::string& name);
/// `obj[key]`: the item first, then a method called `key`; undefined where neither exists.
[[nodiscard]] absl::StatusOr<value> get_item(const value& obj, const value& key);
/// `obj[start:stop:step]` on a list or a string (by characters), any bound absent (undefined).
[[nodiscard]] absl::StatusOr<value> get_slice(const value& obj, const value& start,
                                              const value& stop, const value& step);

/// `v | name(args)`.
[[nodiscard]] absl::StatusOr<value> apply_filter(const std::string& name, const value& v,
                                                 const call_args& args, const invoke_fn& invoke);
/// `v is name(args)`.
[[nodiscard]] absl::StatusOr<bool> apply_test(const std::string& name, const value& v,
                                              const call_args& args);

/// A binary operator: + - * / // % ** ~ == != < > <= >= in, "not in".
[[nodiscard]] absl::StatusOr<value> apply_binary(const std::string& op, const value& a,
                                                 const value& b);

/// The values of `v` as a for loop or a filter sees them (a dict's keys, a string's
/// characters, nothing for undefined); an error for a value that is not iterable.
[[nodiscard]] absl::StatusOr<value_list> iterate(const value& v);

/// The globals transformers renders chat templates with: raise_exception, strftime_now,
/// range, namespace, dict.
[[nodiscard]] value_dict builtin_globals();

/// An error a template raised with raise_exception(): the message, as transformers passes it.
inline constexpr const char* template_error_prefix = "the chat template raised: ";

}  // namespace troupe::jinja

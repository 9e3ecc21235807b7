#pragma once

// The values of troupe's Jinja interpreter, with Python's semantics where chat templates rely on
// them: truthiness, equality, str() and repr() of lists and dicts, and reference semantics for
// lists, dicts and namespaces (a namespace's attributes are set through any copy of it).

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace troupe::jinja {

struct value;
using value_list = std::vector<value>;

/// A dict with string keys in insertion order (Python 3.7+), or a namespace().
struct value_dict {
  std::vector<std::pair<std::string, value>> items;
  bool is_namespace = false;

  [[nodiscard]] const value* find(const std::string& key) const;
  void set(const std::string& key, value v);
};

/// Positional and keyword arguments of a call.
struct call_args {
  std::vector<value> positional;
  std::vector<std::pair<std::string, value>> keyword;

  /// The argument at `index` or called `name`, or nullptr.
  [[nodiscard]] const value* get(size_t index, const std::string& name) const;
};

/// A function callable from a template (a global such as raise_exception, a bound method, a
/// macro).
struct callable {
  std::string name;
  std::function<absl::StatusOr<value>(const call_args&)> call;
};

/// A variable that is not there: falsy, prints as nothing, and an error when used further.
struct undefined {
  std::string name;
};
struct none {};

struct value {
  std::variant<undefined, none, bool, int64_t, double, std::string, std::shared_ptr<value_list>,
               std::shared_ptr<value_dict>, std::shared_ptr<callable>>
      v;

  value() : v(undefined{}) {}
  value(none) : v(none{}) {}
  value(bool b) : v(b) {}
  value(int i) : v(int64_t{i}) {}
  value(int64_t i) : v(i) {}
  value(double d) : v(d) {}
  value(std::string s) : v(std::move(s)) {}
  value(const char* s) : v(std::string(s)) {}
  value(value_list l) : v(std::make_shared<value_list>(std::move(l))) {}
  value(value_dict d) : v(std::make_shared<value_dict>(std::move(d))) {}
  value(callable c) : v(std::make_shared<callable>(std::move(c))) {}
  static value undefined_named(std::string name) {
    value x;
    x.v = undefined{std::move(name)};
    return x;
  }

  [[nodiscard]] bool is_undefined() const { return std::holds_alternative<undefined>(v); }
  [[nodiscard]] bool is_none() const { return std::holds_alternative<none>(v); }
  [[nodiscard]] bool is_bool() const { return std::holds_alternative<bool>(v); }
  [[nodiscard]] bool is_int() const { return std::holds_alternative<int64_t>(v); }
  [[nodiscard]] bool is_float() const { return std::holds_alternative<double>(v); }
  [[nodiscard]] bool is_number() const { return is_int() || is_float() || is_bool(); }
  [[nodiscard]] bool is_string() const { return std::holds_alternative<std::string>(v); }
  [[nodiscard]] bool is_list() const {
    return std::holds_alternative<std::shared_ptr<value_list>>(v);
  }
  [[nodiscard]] bool is_dict() const {
    return std::holds_alternative<std::shared_ptr<value_dict>>(v);
  }
  [[nodiscard]] bool is_callable() const {
    return std::holds_alternative<std::shared_ptr<callable>>(v);
  }

  [[nodiscard]] const std::string& str() const { return std::get<std::string>(v); }
  [[nodiscard]] value_list& list() const { return *std::get<std::shared_ptr<value_list>>(v); }
  [[nodiscard]] value_dict& dict() const { return *std::get<std::shared_ptr<value_dict>>(v); }
  [[nodiscard]] const callable& function() const { return *std::get<std::shared_ptr<callable>>(v); }
  [[nodiscard]] int64_t integer() const {
    return is_bool() ? std::get<bool>(v) : std::get<int64_t>(v);
  }
  [[nodiscard]] double number() const {
    return is_float() ? std::get<double>(v) : static_cast<double>(integer());
  }
  /// The name of an undefined value ("" for one without).
  [[nodiscard]] const std::string& undefined_name() const { return std::get<undefined>(v).name; }

  /// Python's truth value.
  [[nodiscard]] bool truthy() const;
  /// Python's type name, for messages: 'str', 'int', 'list', 'dict', 'NoneType', ...
  [[nodiscard]] std::string type_name() const;
};

/// Python's ==.
[[nodiscard]] bool equal(const value& a, const value& b);
/// Python's str(): what {{ }} prints (nothing for undefined).
[[nodiscard]] std::string to_str(const value& v);
/// Python's repr() (strings quoted as Python quotes them).
[[nodiscard]] std::string to_repr(const value& v);
/// Python's repr of a float: the shortest text that reads back as the same double.
[[nodiscard]] std::string float_repr(double d);

/// A JSON document as template values (objects as dicts in key order, numbers as int or float).
[[nodiscard]] value from_json(const nlohmann::json& j);
/// json.dumps(v, ensure_ascii=False, indent=indent, separators=(item, key), sort_keys=sort),
/// which transformers installs as the `tojson` filter. Fails on an undefined or a function.
[[nodiscard]] absl::StatusOr<std::string> to_json_text(const value& v, int indent,
                                                       const std::string& item_separator,
                                                       const std::string& key_separator,
                                                       bool sort_keys);

}  // namespace troupe::jinja

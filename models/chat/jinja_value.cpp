#include "models/chat/jinja_value.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include <utf8proc.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "runtime/base/overloaded.hpp"
#include "runtime/base/status.hpp"

namespace troupe::jinja {

const value* value_dict::find(const std::string& key) const {
  for (const auto& [k, v] : items)
    if (k == key) return &v;
  return nullptr;
}

void value_dict::set(const std::string& key, value v) {
  for (auto& [k, old] : items) {
    if (k == key) {
      old = std::move(v);
      return;
    }
  }
  items.emplace_back(key, std::move(v));
}

const value* call_args::get(size_t index, const std::string& name) const {
  if (index < positional.size()) return &positional[index];
  for (const auto& [k, v] : keyword)
    if (k == name) return &v;
  return nullptr;
}

bool value::truthy() const {
  return std::visit(
      overloaded{
          [](const undefined&) { return false; },
          [](const none&) { return false; },
          [](bool b) { return b; },
          [](int64_t i) { return i != 0; },
          [](double d) { return d != 0.0; },
          [](const std::string& s) { return !s.empty(); },
          [](const std::shared_ptr<value_list>& l) { return !l->empty(); },
          [](const std::shared_ptr<value_dict>& d) { return d->is_namespace || !d->items.empty(); },
          [](const std::shared_ptr<callable>&) { return true; },
      },
      v);
}

std::string value::type_name() const {
  return std::visit(overloaded{
                        [](const undefined&) { return std::string("Undefined"); },
                        [](const none&) { return std::string("NoneType"); },
                        [](bool) { return std::string("bool"); },
                        [](int64_t) { return std::string("int"); },
                        [](double) { return std::string("float"); },
                        [](const std::string&) { return std::string("str"); },
                        [](const std::shared_ptr<value_list>&) { return std::string("list"); },
                        [](const std::shared_ptr<value_dict>& d) {
                          return std::string(d->is_namespace ? "Namespace" : "dict");
                        },
                        [](const std::shared_ptr<callable>&) { return std::string("function"); },
                    },
                    v);
}

bool equal(const value& a, const value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.number() == b.number();
    return a.integer() == b.integer();
  }
  if (a.v.index() != b.v.index()) return false;
  if (a.is_undefined() || a.is_none()) return true;
  if (a.is_string()) return a.str() == b.str();
  if (a.is_list()) {
    const auto &x = a.list(), &y = b.list();
    if (x.size() != y.size()) return false;
    for (size_t i = 0; i < x.size(); ++i)
      if (!equal(x[i], y[i])) return false;
    return true;
  }
  if (a.is_dict()) {
    const auto &x = a.dict(), &y = b.dict();
    if (x.is_namespace || y.is_namespace) return &x == &y;
    if (x.items.size() != y.items.size()) return false;
    for (const auto& [k, v] : x.items) {
      const value* other = y.find(k);
      if (other == nullptr || !equal(v, *other)) return false;
    }
    return true;
  }
  return &a.function() == &b.function();
}

std::string float_repr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  // The shortest round-trip digits, then Python's layout: positional for exponents from -4 to
  // 15, else d.ddde+XX; a whole number keeps ".0".
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  std::string sci(buf, r.ptr);
  const size_t e = sci.find('e');
  std::string mantissa = sci.substr(0, e);
  const int exponent = std::stoi(sci.substr(e + 1));
  const bool negative = mantissa[0] == '-';
  if (negative) mantissa.erase(0, 1);
  std::string digits;
  for (char c : mantissa)
    if (c != '.') digits.push_back(c);
  std::string out;
  if (exponent >= -4 && exponent < 16) {
    if (exponent < 0) {
      out = "0." + std::string(static_cast<size_t>(-exponent - 1), '0') + digits;
    } else if (static_cast<size_t>(exponent) + 1 >= digits.size()) {
      out = digits + std::string(exponent + 1 - digits.size(), '0') + ".0";
    } else {
      out = digits.substr(0, exponent + 1) + "." + digits.substr(exponent + 1);
    }
  } else {
    out = digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    out += absl::StrFormat("e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
  }
  return negative ? "-" + out : out;
}

namespace {

// Python's str.isprintable() for one code point: not Other (Cc, Cf, Cs, Co, Cn) nor a
// separator other than the ASCII space.
bool printable(char32_t cp) {
  if (cp == ' ') return true;
  switch (utf8proc_category(static_cast<utf8proc_int32_t>(cp))) {
    case UTF8PROC_CATEGORY_CC:
    case UTF8PROC_CATEGORY_CF:
    case UTF8PROC_CATEGORY_CS:
    case UTF8PROC_CATEGORY_CO:
    case UTF8PROC_CATEGORY_CN:
    case UTF8PROC_CATEGORY_ZS:
    case UTF8PROC_CATEGORY_ZL:
    case UTF8PROC_CATEGORY_ZP:
      return false;
    default:
      return true;
  }
}

std::string string_repr(const std::string& s) {
  const bool has_single = s.find('\'') != std::string::npos;
  const bool has_double = s.find('"') != std::string::npos;
  const char quote = has_single && !has_double ? '"' : '\'';
  std::string out(1, quote);
  for (size_t i = 0; i < s.size();) {
    utf8proc_int32_t cp = 0;
    const auto n = utf8proc_iterate(reinterpret_cast<const utf8proc_uint8_t*>(s.data() + i),
                                    static_cast<utf8proc_ssize_t>(s.size() - i), &cp);
    if (n <= 0) {  // not UTF-8 (templates only see valid text): as a byte escape
      out += absl::StrFormat("\\x%02x", static_cast<unsigned char>(s[i]));
      ++i;
      continue;
    }
    if (cp == quote || cp == '\\') {
      out.push_back('\\');
      out.push_back(static_cast<char>(cp));
    } else if (cp == '\n') {
      out += "\\n";
    } else if (cp == '\r') {
      out += "\\r";
    } else if (cp == '\t') {
      out += "\\t";
    } else if (!printable(static_cast<char32_t>(cp))) {
      out += cp < 0x100     ? absl::StrFormat("\\x%02x", cp)
             : cp < 0x10000 ? absl::StrFormat("\\u%04x", cp)
                            : absl::StrFormat("\\U%08x", cp);
    } else {
      out.append(s, i, static_cast<size_t>(n));
    }
    i += static_cast<size_t>(n);
  }
  out.push_back(quote);
  return out;
}

}  // namespace

std::string to_repr(const value& v) {
  if (v.is_string()) return string_repr(v.str());
  if (v.is_list()) {
    std::string out = "[";
    for (size_t i = 0; i < v.list().size(); ++i)
      absl::StrAppend(&out, i ? ", " : "", to_repr(v.list()[i]));
    return out + "]";
  }
  if (v.is_dict() && !v.dict().is_namespace) {
    std::string out = "{";
    bool first = true;
    for (const auto& [k, x] : v.dict().items) {
      absl::StrAppend(&out, first ? "" : ", ", string_repr(k), ": ", to_repr(x));
      first = false;
    }
    return out + "}";
  }
  return to_str(v);
}

std::string to_str(const value& v) {
  return std::visit(
      overloaded{
          [](const undefined&) { return std::string(); },
          [](const none&) { return std::string("None"); },
          [](bool b) { return std::string(b ? "True" : "False"); },
          [](int64_t i) { return std::to_string(i); },
          [](double d) { return float_repr(d); },
          [](const std::string& s) { return s; },
          [&](const std::shared_ptr<value_list>&) { return to_repr(v); },
          [&](const std::shared_ptr<value_dict>& d) {
            return d->is_namespace ? std::string("<Namespace>") : to_repr(v);
          },
          [](const std::shared_ptr<callable>& c) { return "<function " + c->name + ">"; },
      },
      v.v);
}

value from_json(const nlohmann::json& j) {
  switch (j.type()) {
    case nlohmann::json::value_t::null:
      return value(none{});
    case nlohmann::json::value_t::boolean:
      return value(j.get<bool>());
    case nlohmann::json::value_t::number_integer:
      return value(j.get<int64_t>());
    case nlohmann::json::value_t::number_unsigned:
      return value(static_cast<int64_t>(j.get<uint64_t>()));
    case nlohmann::json::value_t::number_float:
      return value(j.get<double>());
    case nlohmann::json::value_t::string:
      return value(j.get<std::string>());
    case nlohmann::json::value_t::array: {
      value_list l;
      for (const auto& x : j)
        l.push_back(from_json(x));
      return value(std::move(l));
    }
    case nlohmann::json::value_t::object: {
      value_dict d;
      for (const auto& [k, x] : j.items())
        d.items.emplace_back(k, from_json(x));
      return value(std::move(d));
    }
    default:
      return value(none{});
  }
}

namespace {

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      default:
        if (c < 0x20) {  // (Python leaves DEL and every non-ASCII character as they are)
          out += absl::StrFormat("\\u%04x", c);
        } else {
          out.push_back(static_cast<char>(c));
        }
    }
  }
  return out + "\"";
}

absl::Status append_json(std::string& out, const value& v, int indent, int depth,
                         const std::string& item_sep, const std::string& key_sep, bool sort) {
  const std::string newline =
      indent >= 0 ? "\n" + std::string(static_cast<size_t>(indent * (depth + 1)), ' ') : "";
  const std::string closing =
      indent >= 0 ? "\n" + std::string(static_cast<size_t>(indent * depth), ' ') : "";
  if (v.is_none()) {
    out += "null";
  } else if (v.is_bool()) {
    out += std::get<bool>(v.v) ? "true" : "false";
  } else if (v.is_int()) {
    out += std::to_string(v.integer());
  } else if (v.is_float()) {
    const double d = v.number();
    out += std::isnan(d)   ? "NaN"
           : std::isinf(d) ? (d > 0 ? "Infinity" : "-Infinity")
                           : float_repr(d);
  } else if (v.is_string()) {
    out += json_string(v.str());
  } else if (v.is_list()) {
    if (v.list().empty()) {
      out += "[]";
      return absl::OkStatus();
    }
    out += "[" + newline;
    for (size_t i = 0; i < v.list().size(); ++i) {
      if (i) out += item_sep + newline;
      TROUPE_RETURN_IF_ERROR(
          append_json(out, v.list()[i], indent, depth + 1, item_sep, key_sep, sort));
    }
    out += closing + "]";
  } else if (v.is_dict() && !v.dict().is_namespace) {
    if (v.dict().items.empty()) {
      out += "{}";
      return absl::OkStatus();
    }
    std::vector<const std::pair<std::string, value>*> items;
    for (const auto& item : v.dict().items)
      items.push_back(&item);
    if (sort) {
      std::stable_sort(items.begin(), items.end(),
                       [](const auto* a, const auto* b) { return a->first < b->first; });
    }
    out += "{" + newline;
    for (size_t i = 0; i < items.size(); ++i) {
      if (i) out += item_sep + newline;
      out += json_string(items[i]->first) + key_sep;
      TROUPE_RETURN_IF_ERROR(
          append_json(out, items[i]->second, indent, depth + 1, item_sep, key_sep, sort));
    }
    out += closing + "}";
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("Object of type ", v.type_name(), " is not JSON serializable"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::string> to_json_text(const value& v, int indent,
                                         const std::string& item_separator,
                                         const std::string& key_separator, bool sort_keys) {
  std::string out;
  const absl::Status s = append_json(out, v, indent, 0, item_separator, key_separator, sort_keys);
  if (!s.ok()) return s;
  return out;
}

}  // namespace troupe::jinja

// Jinja's built-in filters and tests, and the globals transformers adds, as Jinja2 3.1 and
// transformers' chat-template environment define them.

#include <algorithm>
#include <cmath>
#include <ctime>

#include "absl/strings/str_cat.h"
#include "models/chat/jinja_builtins.hpp"
#include "runtime/base/status.hpp"

namespace troupe::jinja {

namespace {

absl::Status filter_error(absl::string_view what) {
  return absl::InvalidArgumentError(what);
}

size_t length_of(const value& v) {
  if (v.is_string()) {
    size_t n = 0;
    for (unsigned char c : v.str())
      n += (c & 0xC0) != 0x80;
    return n;
  }
  if (v.is_list()) return v.list().size();
  if (v.is_dict()) return v.dict().items.size();
  return 0;
}

std::string html_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&#34;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out.push_back(c);
    }
  }
  return out;
}

// Python's sort order for the values sort/min/max compare.
absl::StatusOr<bool> less(const value& a, const value& b) {
  TROUPE_ASSIGN_OR_RETURN(value r, apply_binary("<", a, b));
  return r.truthy();
}

// The arguments after the first `skip` positional ones, for a test or filter called by name.
call_args rest(const call_args& a, size_t skip) {
  call_args out;
  for (size_t i = skip; i < a.positional.size(); ++i)
    out.positional.push_back(a.positional[i]);
  out.keyword = a.keyword;
  return out;
}

absl::StatusOr<value> attribute_path(const value& v, const std::string& path) {
  value cur = v;
  size_t start = 0;
  while (true) {
    const size_t dot = path.find('.', start);
    const std::string part =
        path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    TROUPE_ASSIGN_OR_RETURN(cur, get_item(cur, value(part)));
    if (dot == std::string::npos) return cur;
    start = dot + 1;
  }
}

}  // namespace

absl::StatusOr<value> apply_filter(const std::string& name, const value& v, const call_args& a,
                                   const invoke_fn& invoke) {
  if (name == "trim") {
    TROUPE_ASSIGN_OR_RETURN(value strip, get_attribute(value(to_str(v)), "strip"));
    call_args args;
    if (const value* chars = a.get(0, "chars")) args.positional.push_back(*chars);
    return invoke(strip, args);
  }
  if (name == "tojson") {
    // transformers' tojson: json.dumps(x, ensure_ascii=False, indent, separators, sort_keys).
    const value* indent = a.get(0, "indent");
    const value* separators = a.get(1, "separators");
    const value* sort = a.get(2, "sort_keys");
    const int width = indent != nullptr && (indent->is_int() || indent->is_bool())
                          ? static_cast<int>(indent->integer())
                          : -1;
    std::string item = width >= 0 ? "," : ", ", key = ": ";
    if (separators != nullptr && separators->is_list() && separators->list().size() == 2 &&
        separators->list()[0].is_string() && separators->list()[1].is_string()) {
      item = separators->list()[0].str();
      key = separators->list()[1].str();
    }
    TROUPE_ASSIGN_OR_RETURN(std::string text,
                            to_json_text(v, width, item, key, sort && sort->truthy()));
    return value(text);
  }
  if (name == "length" || name == "count") return value(static_cast<int64_t>(length_of(v)));
  if (name == "string") return value(to_str(v));
  if (name == "safe") return v;
  if (name == "e" || name == "escape") return value(html_escape(to_str(v)));
  if (name == "upper" || name == "lower" || name == "title" || name == "capitalize") {
    TROUPE_ASSIGN_OR_RETURN(value m, get_attribute(value(to_str(v)), name));
    return invoke(m, {});
  }
  if (name == "replace") {
    TROUPE_ASSIGN_OR_RETURN(value m, get_attribute(value(to_str(v)), "replace"));
    return invoke(m, a);
  }
  if (name == "default" || name == "d") {
    const value* fallback = a.get(0, "default_value");
    const value* boolean = a.get(1, "boolean");
    const bool use = v.is_undefined() || (boolean != nullptr && boolean->truthy() && !v.truthy());
    return use ? (fallback ? *fallback : value(std::string())) : v;
  }
  if (name == "first" || name == "last") {
    TROUPE_ASSIGN_OR_RETURN(value_list items, iterate(v));
    if (items.empty())
      return value::undefined_named(absl::StrCat("the ", name, " of an empty sequence"));
    return name == "first" ? items.front() : items.back();
  }
  if (name == "list") {
    TROUPE_ASSIGN_OR_RETURN(value_list items, iterate(v));
    return value(std::move(items));
  }
  if (name == "reverse") {
    if (v.is_string()) return get_slice(v, value(), value(), value(int64_t{-1}));
    TROUPE_ASSIGN_OR_RETURN(value_list items, iterate(v));
    std::reverse(items.begin(), items.end());
    return value(std::move(items));
  }
  if (name == "items") {
    if (v.is_undefined()) return value(value_list{});
    if (!v.is_dict())
      return filter_error(absl::StrCat("items: a ", v.type_name(), " is not a mapping"));
    TROUPE_ASSIGN_OR_RETURN(value m, get_attribute(v, "items"));
    return invoke(m, {});
  }
  if (name == "join") {
    TROUPE_ASSIGN_OR_RETURN(value_list items, iterate(v));
    const value* sep = a.get(0, "d");
    const value* attribute = a.get(1, "attribute");
    std::string out;
    for (size_t i = 0; i < items.size(); ++i) {
      value x = items[i];
      if (attribute != nullptr) {
        TROUPE_ASSIGN_OR_RETURN(x, attribute_path(x, to_str(*attribute)));
      }
      absl::StrAppend(&out, i && sep ? to_str(*sep) : "", to_str(x));
    }
    return value(out);
  }
  if (name == "int") {
    if (v.is_int() || v.is_bool()) return value(v.integer());
    if (v.is_float()) return value(static_cast<int64_t>(v.number()));
    if (v.is_string()) {
      try {
        size_t used = 0;
        const int64_t i = std::stoll(v.str(), &used);
        if (used == v.str().size()) return value(i);
      } catch (...) {
      }
    }
    const value* fallback = a.get(0, "default");
    return fallback ? *fallback : value(int64_t{0});
  }
  if (name == "float") {
    if (v.is_number()) return value(v.number());
    if (v.is_string()) {
      try {
        size_t used = 0;
        const double d = std::stod(v.str(), &used);
        if (used == v.str().size()) return value(d);
      } catch (...) {
      }
    }
    const value* fallback = a.get(0, "default");
    return fallback ? *fallback : value(0.0);
  }
  if (name == "abs") {
    if ((v.is_int() || v.is_bool()) && v.integer() != INT64_MIN)
      return value(std::abs(v.integer()));
    if (v.is_float()) return value(std::abs(v.number()));
    return filter_error(absl::StrCat("bad operand type for abs(): '", v.type_name(), "'"));
  }
  if (name == "indent") {
    const int64_t width = a.get(0, "width") ? a.get(0, "width")->integer() : 4;
    const bool first = a.get(1, "first") && a.get(1, "first")->truthy();
    const bool blank = a.get(2, "blank") && a.get(2, "blank")->truthy();
    const std::string pad(static_cast<size_t>(std::max<int64_t>(width, 0)), ' ');
    const std::string s = to_str(v);
    std::string out;
    size_t start = 0;
    bool first_line = true;
    while (start <= s.size()) {
      const size_t nl = s.find('\n', start);
      const std::string line =
          s.substr(start, nl == std::string::npos ? std::string::npos : nl - start);
      const bool indent_it = first_line ? first : (blank || !line.empty());
      out += (indent_it ? pad : "") + line;
      if (nl == std::string::npos) break;
      out += "\n";
      start = nl + 1;
      first_line = false;
    }
    return value(out);
  }
  if (name == "map" || name == "select" || name == "reject" || name == "selectattr" ||
      name == "rejectattr") {
    TROUPE_ASSIGN_OR_RETURN(value_list items, iterate(v));
    value_list out;
    for (const auto& x : items) {
      if (name == "map") {
        if (const value* attribute = a.get(99, "attribute")) {
          TROUPE_ASSIGN_OR_RETURN(value y, attribute_path(x, to_str(*attribute)));
          if (y.is_undefined() && a.get(99, "default")) y = *a.get(99, "default");
          out.push_back(y);
        } else {
          if (a.positional.empty()) return filter_error("map() needs a filter name or attribute=");
          TROUPE_ASSIGN_OR_RETURN(value y,
                                  apply_filter(to_str(a.positional[0]), x, rest(a, 1), invoke));
          out.push_back(y);
        }
        continue;
      }
      const bool by_attribute = name == "selectattr" || name == "rejectattr";
      value subject = x;
      size_t test_at = 0;
      if (by_attribute) {
        if (a.positional.empty()) return filter_error(name + "() needs an attribute");
        TROUPE_ASSIGN_OR_RETURN(subject, attribute_path(x, to_str(a.positional[0])));
        test_at = 1;
      }
      bool pass = subject.truthy();
      if (a.positional.size() > test_at) {
        TROUPE_ASSIGN_OR_RETURN(
            pass, apply_test(to_str(a.positional[test_at]), subject, rest(a, test_at + 1)));
      }
      if (pass == (name == "select" || name == "selectattr")) out.push_back(x);
    }
    return value(std::move(out));
  }
  if (name == "sum" || name == "min" || name == "max" || name == "unique" || name == "sort") {
    TROUPE_ASSIGN_OR_RETURN(value_list items, iterate(v));
    const value* attribute = a.get(name == "sum" ? 0 : name == "sort" ? 2 : 1, "attribute");
    auto key = [&](const value& x) -> absl::StatusOr<value> {
      return attribute ? attribute_path(x, to_str(*attribute)) : absl::StatusOr<value>(x);
    };
    if (name == "sum") {
      value total = a.get(1, "start") ? *a.get(1, "start") : value(int64_t{0});
      for (const auto& x : items) {
        TROUPE_ASSIGN_OR_RETURN(value k, key(x));
        TROUPE_ASSIGN_OR_RETURN(total, apply_binary("+", total, k));
      }
      return total;
    }
    if (name == "unique") {
      value_list out;
      for (const auto& x : items) {
        bool seen = false;
        for (const auto& y : out)
          seen = seen || equal(x, y);
        if (!seen) out.push_back(x);
      }
      return value(std::move(out));
    }
    absl::Status failed;
    auto by_key = [&](const value& x, const value& y) {
      auto kx = key(x), ky = key(y);
      if (!kx.ok() || !ky.ok()) {
        failed = kx.ok() ? ky.status() : kx.status();
        return false;
      }
      auto r = less(*kx, *ky);
      if (!r.ok()) failed = r.status();
      return r.ok() && *r;
    };
    if (name == "sort") {
      std::stable_sort(items.begin(), items.end(), by_key);
      if (a.get(0, "reverse") && a.get(0, "reverse")->truthy())
        std::reverse(items.begin(), items.end());
      TROUPE_RETURN_IF_ERROR(failed);
      return value(std::move(items));
    }
    if (items.empty()) return value::undefined_named(name + "() of an empty sequence");
    const auto it = name == "min" ? std::min_element(items.begin(), items.end(), by_key)
                                  : std::max_element(items.begin(), items.end(), by_key);
    TROUPE_RETURN_IF_ERROR(failed);
    return *it;
  }
  return filter_error(absl::StrCat("no filter named '", name, "'"));
}

absl::StatusOr<bool> apply_test(const std::string& name, const value& v, const call_args& a) {
  const value* other = a.get(0, "value");
  if (name == "defined") return !v.is_undefined();
  if (name == "undefined") return v.is_undefined();
  if (name == "none") return v.is_none();
  if (name == "boolean") return v.is_bool();
  if (name == "true") return v.is_bool() && std::get<bool>(v.v);
  if (name == "false") return v.is_bool() && !std::get<bool>(v.v);
  if (name == "integer") return v.is_int();
  if (name == "float") return v.is_float();
  if (name == "number") return v.is_number();
  if (name == "string") return v.is_string();
  if (name == "mapping") return v.is_dict() && !v.dict().is_namespace;
  if (name == "iterable")
    return v.is_list() || v.is_string() || (v.is_dict() && !v.dict().is_namespace) ||
           v.is_undefined();
  if (name == "sequence")
    return v.is_list() || v.is_string() || (v.is_dict() && !v.dict().is_namespace);
  if (name == "callable") return v.is_callable();
  if (name == "even" || name == "odd") {
    if (!v.is_int() && !v.is_bool()) return filter_error(name + " needs an integer");
    return (v.integer() % 2 == 0) == (name == "even");
  }
  if (name == "divisibleby") {
    if (other == nullptr || !(other->is_int() || other->is_bool()) || other->integer() == 0 ||
        !(v.is_int() || v.is_bool())) {
      return filter_error("divisibleby needs two integers, the second not 0");
    }
    return v.integer() % other->integer() == 0;
  }
  if (name == "lower" || name == "upper") {
    if (!v.is_string()) return false;
    TROUPE_ASSIGN_OR_RETURN(value m, get_attribute(v, name == "lower" ? "islower" : "isupper"));
    TROUPE_ASSIGN_OR_RETURN(value r, m.function().call({}));
    return r.truthy();
  }
  static const std::pair<const char*, const char*> comparisons[] = {
      {"eq", "=="}, {"equalto", "=="}, {"==", "=="},      {"ne", "!="},
      {"!=", "!="}, {"lt", "<"},       {"lessthan", "<"}, {"<", "<"},
      {"le", "<="}, {"<=", "<="},      {"gt", ">"},       {"greaterthan", ">"},
      {">", ">"},   {"ge", ">="},      {">=", ">="},      {"in", "in"}};
  for (const auto& [test, op] : comparisons) {
    if (name == test) {
      if (other == nullptr)
        return filter_error(absl::StrCat("the test '", name, "' needs a value"));
      TROUPE_ASSIGN_OR_RETURN(value r, apply_binary(op, v, *other));
      return r.truthy();
    }
  }
  if (name == "sameas") {
    if (other == nullptr) return filter_error("sameas needs a value");
    if (v.is_none() || v.is_bool() || other->is_none() || other->is_bool()) {
      return v.v.index() == other->v.index() && equal(v, *other);
    }
    return v.v.index() == other->v.index() && (v.is_list() || v.is_dict()) && equal(v, *other) &&
           ((v.is_list() && &v.list() == &other->list()) ||
            (v.is_dict() && &v.dict() == &other->dict()));
  }
  return filter_error(absl::StrCat("no test named '", name, "'"));
}

value_dict builtin_globals() {
  value_dict g;
  g.set("raise_exception",
        value(callable{"raise_exception", [](const call_args& a) -> absl::StatusOr<value> {
                         const value* m = a.get(0, "message");
                         return absl::InvalidArgumentError(
                             absl::StrCat(template_error_prefix, m ? to_str(*m) : ""));
                       }}));
  g.set("strftime_now",
        value(callable{"strftime_now", [](const call_args& a) -> absl::StatusOr<value> {
                         const value* f = a.get(0, "format");
                         if (f == nullptr || !f->is_string())
                           return filter_error("strftime_now() takes a format string");
                         const std::time_t now = std::time(nullptr);
                         std::tm local{};
                         localtime_r(&now, &local);
                         char buf[256];
                         const size_t n = std::strftime(buf, sizeof buf, f->str().c_str(), &local);
                         return value(std::string(buf, n));
                       }}));
  g.set("range", value(callable{"range", [](const call_args& a) -> absl::StatusOr<value> {
                                  std::vector<int64_t> n;
                                  for (const auto& x : a.positional) {
                                    if (!x.is_int() && !x.is_bool())
                                      return filter_error("range() takes integers");
                                    n.push_back(x.integer());
                                  }
                                  if (n.empty() || n.size() > 3)
                                    return filter_error("range() takes 1 to 3 integers");
                                  const int64_t start = n.size() > 1 ? n[0] : 0,
                                                stop = n.size() > 1 ? n[1] : n[0];
                                  const int64_t step = n.size() > 2 ? n[2] : 1;
                                  if (step == 0)
                                    return filter_error("range() arg 3 must not be zero");
                                  value_list out;
                                  for (int64_t i = start; step > 0 ? i < stop : i > stop;
                                       i += step) {
                                    if (out.size() >= 100000)
                                      return filter_error("range() is limited to 100000 items");
                                    out.emplace_back(i);
                                  }
                                  return value(std::move(out));
                                }}));
  for (const char* kind : {"namespace", "dict"}) {
    const bool ns = std::string(kind) == "namespace";
    g.set(kind, value(callable{kind, [ns](const call_args& a) -> absl::StatusOr<value> {
                                 value_dict d;
                                 d.is_namespace = ns;
                                 for (const auto& x : a.positional) {  // namespace(some_dict)
                                   if (x.is_dict()) {
                                     for (const auto& [k, y] : x.dict().items)
                                       d.set(k, y);
                                   }
                                 }
                                 for (const auto& [k, x] : a.keyword)
                                   d.set(k, x);
                                 return value(std::move(d));
                               }}));
  }
  return g;
}

}  // namespace troupe::jinja

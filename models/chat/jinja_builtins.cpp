#include "models/chat/jinja_builtins.hpp"

#include <algorithm>
#include <cmath>
#include <ctime>

#include <utf8proc.h>

#include "absl/strings/str_cat.h"
#include "models/tokenizer/utf8.hpp"
#include "runtime/base/status.hpp"

namespace troupe::jinja {

namespace {

absl::Status type_error(absl::string_view what) {
  return absl::InvalidArgumentError(what);
}

// --- strings as Python sees them: sequences of code points --------------------------------

std::vector<char32_t> code_points(const std::string& s) {
  std::vector<char32_t> out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    size_t n = 0;
    if (tokenizers::valid_sequence_length(absl::string_view(s).substr(i)) == 0) {
      out.push_back(0xFFFD);
      ++i;
      continue;
    }
    out.push_back(tokenizers::decode_utf8(absl::string_view(s).substr(i), n));
    i += n;
  }
  return out;
}

std::string from_code_points(const std::vector<char32_t>& cps, size_t begin, size_t end) {
  std::string out;
  for (size_t i = begin; i < end; ++i)
    tokenizers::append_utf8(out, cps[i]);
  return out;
}

// Python's str.isspace() for one code point (White_Space, plus the separators 0x1C-0x1F).
bool py_space(char32_t c) {
  if (c == ' ' || (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x1F) || c == 0x85) return true;
  const auto cat = utf8proc_category(static_cast<utf8proc_int32_t>(c));
  return cat == UTF8PROC_CATEGORY_ZS || cat == UTF8PROC_CATEGORY_ZL || cat == UTF8PROC_CATEGORY_ZP;
}

// str.strip / lstrip / rstrip: whitespace, or the characters of `chars`.
std::string strip(const std::string& s, const value* chars, bool left, bool right) {
  const auto cps = code_points(s);
  std::vector<char32_t> set;
  const bool by_chars = chars != nullptr && chars->is_string();
  if (by_chars) set = code_points(chars->str());
  auto strippable = [&](char32_t c) {
    return by_chars ? std::find(set.begin(), set.end(), c) != set.end() : py_space(c);
  };
  size_t b = 0, e = cps.size();
  if (left)
    while (b < e && strippable(cps[b]))
      ++b;
  if (right)
    while (e > b && strippable(cps[e - 1]))
      --e;
  return from_code_points(cps, b, e);
}

value split(const std::string& s, const value* sep, int64_t maxsplit) {
  value_list out;
  if (sep == nullptr || sep->is_none() || sep->is_undefined()) {  // runs of whitespace
    const auto cps = code_points(s);
    size_t i = 0;
    while (i < cps.size()) {
      while (i < cps.size() && py_space(cps[i]))
        ++i;
      if (i == cps.size()) break;
      size_t j = i;
      if (maxsplit >= 0 && static_cast<int64_t>(out.size()) == maxsplit) {
        size_t e = cps.size();
        while (e > i && py_space(cps[e - 1]))
          --e;
        out.emplace_back(from_code_points(cps, i, e));
        break;
      }
      while (j < cps.size() && !py_space(cps[j]))
        ++j;
      out.emplace_back(from_code_points(cps, i, j));
      i = j;
    }
    return value(std::move(out));
  }
  const std::string& d = sep->str();
  size_t start = 0;
  while (maxsplit < 0 || static_cast<int64_t>(out.size()) < maxsplit) {
    const size_t at = s.find(d, start);
    if (at == std::string::npos) break;
    out.emplace_back(s.substr(start, at - start));
    start = at + d.size();
  }
  out.emplace_back(s.substr(start));
  return value(std::move(out));
}

std::string map_case(const std::string& s, int mode /*0 lower, 1 upper*/) {
  std::string out;
  for (char32_t c : code_points(s)) {
    const auto m = mode == 0 ? utf8proc_tolower(static_cast<utf8proc_int32_t>(c))
                             : utf8proc_toupper(static_cast<utf8proc_int32_t>(c));
    tokenizers::append_utf8(out, static_cast<char32_t>(m));
  }
  return out;
}

std::string title_case(const std::string& s, bool only_first) {
  std::string out;
  bool previous_cased = false;
  bool first = true;
  for (char32_t c : code_points(s)) {
    const auto cat = utf8proc_category(static_cast<utf8proc_int32_t>(c));
    const bool cased =
        cat == UTF8PROC_CATEGORY_LU || cat == UTF8PROC_CATEGORY_LL || cat == UTF8PROC_CATEGORY_LT;
    char32_t m;
    if (only_first) {  // str.capitalize: the first character upper, the rest lower
      m = static_cast<char32_t>(first ? utf8proc_toupper(static_cast<utf8proc_int32_t>(c))
                                      : utf8proc_tolower(static_cast<utf8proc_int32_t>(c)));
    } else {  // str.title: upper after an uncased character
      m = static_cast<char32_t>(previous_cased
                                    ? utf8proc_tolower(static_cast<utf8proc_int32_t>(c))
                                    : utf8proc_toupper(static_cast<utf8proc_int32_t>(c)));
    }
    tokenizers::append_utf8(out, m);
    previous_cased = cased;
    first = false;
  }
  return out;
}

bool affix_matches(const std::string& s, const value& affix, bool prefix) {
  auto one = [&](const std::string& a) {
    return prefix ? s.compare(0, a.size(), a) == 0 && s.size() >= a.size()
                  : s.size() >= a.size() && s.compare(s.size() - a.size(), a.size(), a) == 0;
  };
  if (affix.is_string()) return one(affix.str());
  if (affix.is_list()) {
    for (const auto& a : affix.list())
      if (a.is_string() && one(a.str())) return true;
  }
  return false;
}

std::string replace_all(const std::string& s, const std::string& old, const std::string& with,
                        int64_t count) {
  std::string out;
  size_t start = 0;
  int64_t done = 0;
  if (old.empty()) {  // Python inserts between every character
    const auto cps = code_points(s);
    for (size_t i = 0; i < cps.size(); ++i) {
      if (count < 0 || done < count) {
        out += with;
        ++done;
      }
      tokenizers::append_utf8(out, cps[i]);
    }
    if (count < 0 || done < count) out += with;
    return out;
  }
  while (count < 0 || done < count) {
    const size_t at = s.find(old, start);
    if (at == std::string::npos) break;
    out.append(s, start, at - start);
    out += with;
    start = at + old.size();
    ++done;
  }
  out.append(s, start);
  return out;
}

const value* arg(const call_args& a, size_t i, const std::string& name) {
  return a.get(i, name);
}

int64_t int_arg(const call_args& a, size_t i, const std::string& name, int64_t fallback) {
  const value* v = a.get(i, name);
  return v != nullptr && (v->is_int() || v->is_bool()) ? v->integer() : fallback;
}

value bound(const std::string& name, std::function<absl::StatusOr<value>(const call_args&)> f) {
  return value(callable{name, std::move(f)});
}

// The method `name` of a string, dict or list; undefined where there is none.
value method_of(const value& obj, const std::string& name) {
  if (obj.is_string()) {
    const std::string s = obj.str();
    if (name == "strip" || name == "lstrip" || name == "rstrip") {
      return bound(name, [s, name](const call_args& a) -> absl::StatusOr<value> {
        return value(strip(s, arg(a, 0, "chars"), name != "rstrip", name != "lstrip"));
      });
    }
    if (name == "split") {
      return bound(name, [s](const call_args& a) -> absl::StatusOr<value> {
        return split(s, arg(a, 0, "sep"), int_arg(a, 1, "maxsplit", -1));
      });
    }
    if (name == "startswith" || name == "endswith") {
      return bound(name, [s, name](const call_args& a) -> absl::StatusOr<value> {
        const value* affix = arg(a, 0, "prefix");
        if (affix == nullptr) return type_error(name + "() takes at least 1 argument");
        return value(affix_matches(s, *affix, name == "startswith"));
      });
    }
    if (name == "upper" || name == "lower") {
      return bound(name, [s, name](const call_args&) -> absl::StatusOr<value> {
        return value(map_case(s, name == "upper"));
      });
    }
    if (name == "title" || name == "capitalize") {
      return bound(name, [s, name](const call_args&) -> absl::StatusOr<value> {
        return value(title_case(s, name == "capitalize"));
      });
    }
    if (name == "replace") {
      return bound(name, [s](const call_args& a) -> absl::StatusOr<value> {
        const value *old = arg(a, 0, "old"), *with = arg(a, 1, "new");
        if (old == nullptr || with == nullptr || !old->is_string() || !with->is_string()) {
          return type_error("replace() takes two strings");
        }
        return value(replace_all(s, old->str(), with->str(), int_arg(a, 2, "count", -1)));
      });
    }
    if (name == "find" || name == "count") {
      return bound(name, [s, name](const call_args& a) -> absl::StatusOr<value> {
        const value* sub = arg(a, 0, "sub");
        if (sub == nullptr || !sub->is_string()) return type_error(name + "() takes a string");
        if (name == "find") {
          const size_t at = s.find(sub->str());
          return value(at == std::string::npos
                           ? int64_t{-1}
                           : static_cast<int64_t>(code_points(s.substr(0, at)).size()));
        }
        int64_t n = 0;
        for (size_t at = s.find(sub->str()); at != std::string::npos && !sub->str().empty();
             at = s.find(sub->str(), at + sub->str().size()))
          ++n;
        return value(n);
      });
    }
    if (name == "join") {
      return bound(name, [s](const call_args& a) -> absl::StatusOr<value> {
        const value* items = arg(a, 0, "iterable");
        if (items == nullptr) return type_error("join() takes an iterable");
        TROUPE_ASSIGN_OR_RETURN(value_list l, iterate(*items));
        std::string out;
        for (size_t i = 0; i < l.size(); ++i) {
          if (!l[i].is_string()) return type_error("join() takes strings");
          absl::StrAppend(&out, i ? s : "", l[i].str());
        }
        return value(out);
      });
    }
    if (name == "isdigit" || name == "isspace" || name == "isalpha" || name == "isupper" ||
        name == "islower") {
      return bound(name, [s, name](const call_args&) -> absl::StatusOr<value> {
        const auto cps = code_points(s);
        if (cps.empty()) return value(false);
        for (char32_t c : cps) {
          const auto cat = utf8proc_category(static_cast<utf8proc_int32_t>(c));
          const bool ok = name == "isdigit"   ? cat == UTF8PROC_CATEGORY_ND
                          : name == "isspace" ? py_space(c)
                          : name == "isalpha"
                              ? (cat >= UTF8PROC_CATEGORY_LU && cat <= UTF8PROC_CATEGORY_LO)
                          : name == "isupper" ? cat != UTF8PROC_CATEGORY_LL
                                              : cat != UTF8PROC_CATEGORY_LU;
          if (!ok) return value(false);
        }
        return value(true);
      });
    }
  } else if (obj.is_dict() && !obj.dict().is_namespace) {
    const value self = obj;
    if (name == "items" || name == "keys" || name == "values") {
      return bound(name, [self, name](const call_args&) -> absl::StatusOr<value> {
        value_list out;
        for (const auto& [k, v] : self.dict().items) {
          if (name == "items") {
            out.emplace_back(value_list{value(k), v});
          } else {
            out.push_back(name == "keys" ? value(k) : v);
          }
        }
        return value(std::move(out));
      });
    }
    if (name == "get") {
      return bound(name, [self](const call_args& a) -> absl::StatusOr<value> {
        const value* key = arg(a, 0, "key");
        const value* fallback = arg(a, 1, "default");
        if (key != nullptr && key->is_string()) {
          if (const value* v = self.dict().find(key->str())) return *v;
        }
        return fallback ? *fallback : value(none{});
      });
    }
  }
  return value::undefined_named(
      absl::StrCat("'", obj.type_name(), " object' has no attribute '", name, "'"));
}

}  // namespace

absl::StatusOr<value> get_attribute(const value& obj, const std::string& name) {
  if (obj.is_undefined()) {
    return type_error(
        absl::StrCat(obj.undefined_name().empty() ? std::string("a value") : obj.undefined_name(),
                     " is undefined, so it has no attribute '", name, "'"));
  }
  value m = method_of(obj, name);
  if (!m.is_undefined()) return m;
  if (obj.is_dict()) {
    if (const value* v = obj.dict().find(name)) return *v;
  }
  return m;
}

absl::StatusOr<value> get_item(const value& obj, const value& key) {
  if (obj.is_undefined()) {
    return type_error(
        absl::StrCat(obj.undefined_name().empty() ? std::string("a value") : obj.undefined_name(),
                     " is undefined, so it cannot be indexed"));
  }
  if (obj.is_dict() && key.is_string()) {
    if (const value* v = obj.dict().find(key.str())) return *v;
    return value::undefined_named(absl::StrCat("'dict object' has no attribute '", key.str(), "'"));
  }
  if ((obj.is_list() || obj.is_string()) && (key.is_int() || key.is_bool())) {
    const int64_t n = obj.is_list() ? static_cast<int64_t>(obj.list().size())
                                    : static_cast<int64_t>(code_points(obj.str()).size());
    int64_t i = key.integer();
    if (i < 0) i += n;
    if (i < 0 || i >= n) return value::undefined_named("an index out of range");
    if (obj.is_list()) return obj.list()[static_cast<size_t>(i)];
    const auto cps = code_points(obj.str());
    return value(from_code_points(cps, static_cast<size_t>(i), static_cast<size_t>(i) + 1));
  }
  if (key.is_string()) return get_attribute(obj, key.str());
  return value::undefined_named(
      absl::StrCat("'", obj.type_name(), " object' has no item ", to_repr(key)));
}

absl::StatusOr<value> get_slice(const value& obj, const value& start, const value& stop,
                                const value& step) {
  auto bound_of = [](const value& v, int64_t fallback) -> absl::StatusOr<int64_t> {
    if (v.is_undefined() || v.is_none()) return fallback;
    if (!v.is_int() && !v.is_bool()) return type_error("slice indices must be integers");
    return v.integer();
  };
  const bool is_list = obj.is_list();
  if (!is_list && !obj.is_string()) {
    return type_error(absl::StrCat("'", obj.type_name(), "' object is not subscriptable"));
  }
  const std::vector<char32_t> cps = is_list ? std::vector<char32_t>{} : code_points(obj.str());
  const int64_t n =
      is_list ? static_cast<int64_t>(obj.list().size()) : static_cast<int64_t>(cps.size());
  TROUPE_ASSIGN_OR_RETURN(const int64_t st, bound_of(step, 1));
  if (st == 0) return type_error("slice step cannot be zero");
  // Python's slice.indices().
  auto clamp = [&](int64_t i) {
    if (i < 0) i += n;
    return st > 0 ? std::clamp<int64_t>(i, 0, n) : std::clamp<int64_t>(i, -1, n - 1);
  };
  TROUPE_ASSIGN_OR_RETURN(int64_t b, bound_of(start, st > 0 ? 0 : n - 1));
  TROUPE_ASSIGN_OR_RETURN(int64_t e, bound_of(stop, st > 0 ? n : -n - 1));
  b = (start.is_undefined() || start.is_none()) ? b : clamp(b);
  e = (stop.is_undefined() || stop.is_none()) ? (st > 0 ? n : -1) : clamp(e);
  value_list items;
  std::string text;
  for (int64_t i = b; st > 0 ? i < e : i > e; i += st) {
    if (is_list) {
      items.push_back(obj.list()[static_cast<size_t>(i)]);
    } else {
      tokenizers::append_utf8(text, cps[static_cast<size_t>(i)]);
    }
  }
  return is_list ? value(std::move(items)) : value(std::move(text));
}

absl::StatusOr<value_list> iterate(const value& v) {
  if (v.is_undefined()) return value_list{};
  if (v.is_list()) return v.list();
  if (v.is_dict() && !v.dict().is_namespace) {
    value_list keys;
    for (const auto& [k, x] : v.dict().items)
      keys.emplace_back(k);
    return keys;
  }
  if (v.is_string()) {
    value_list chars;
    const auto cps = code_points(v.str());
    for (size_t i = 0; i < cps.size(); ++i)
      chars.emplace_back(from_code_points(cps, i, i + 1));
    return chars;
  }
  return type_error(absl::StrCat("'", v.type_name(), "' object is not iterable"));
}

absl::StatusOr<value> apply_binary(const std::string& op, const value& a, const value& b) {
  if (op == "==") return value(equal(a, b));
  if (op == "!=") return value(!equal(a, b));
  if (op == "~") return value(to_str(a) + to_str(b));
  if (op == "in" || op == "not in") {
    bool found = false;
    if (b.is_string()) {
      if (!a.is_string()) {
        return type_error(
            absl::StrCat("'in <string>' requires a string as left operand, not ", a.type_name()));
      }
      found = b.str().find(a.str()) != std::string::npos;
    } else if (b.is_dict()) {
      found = a.is_string() && b.dict().find(a.str()) != nullptr;
    } else {
      TROUPE_ASSIGN_OR_RETURN(value_list items, iterate(b));
      for (const auto& x : items)
        found = found || equal(a, x);
    }
    return value(op == "in" ? found : !found);
  }
  const std::string types = absl::StrCat("'", a.type_name(), "' and '", b.type_name(), "'");
  if (a.is_undefined() || b.is_undefined()) {
    const value& u = a.is_undefined() ? a : b;
    return type_error(absl::StrCat(u.undefined_name().empty() ? "a value" : u.undefined_name(),
                                   " is undefined (in '", op, "')"));
  }
  if (op == "<" || op == ">" || op == "<=" || op == ">=") {
    int c = 0;
    if (a.is_number() && b.is_number()) {
      c = a.number() < b.number() ? -1 : a.number() > b.number() ? 1 : 0;
    } else if (a.is_string() && b.is_string()) {
      c = a.str().compare(b.str());
    } else {
      return type_error(absl::StrCat("'", op, "' not supported between instances of ", types));
    }
    return value(op == "<" ? c < 0 : op == ">" ? c > 0 : op == "<=" ? c <= 0 : c >= 0);
  }
  if (a.is_number() && b.is_number()) {
    const bool ints = !a.is_float() && !b.is_float();
    const int64_t x = ints ? a.integer() : 0, y = ints ? b.integer() : 0;
    const double p = a.number(), q = b.number();
    if (ints && (op == "+" || op == "-" || op == "*")) {
      int64_t r = 0;
      const bool overflow = op == "+"   ? __builtin_add_overflow(x, y, &r)
                            : op == "-" ? __builtin_sub_overflow(x, y, &r)
                                        : __builtin_mul_overflow(x, y, &r);
      if (overflow)
        return type_error(
            absl::StrCat("the integer result of ", x, " ", op, " ", y, " is too large"));
      return value(r);
    }
    if (op == "+") return value(p + q);
    if (op == "-") return value(p - q);
    if (op == "*") return value(p * q);
    if (op == "/") {
      if (q == 0) return type_error("division by zero");
      return value(p / q);
    }
    if (op == "//" || op == "%") {
      if (q == 0) return type_error("integer division or modulo by zero");
      if (ints) {
        int64_t d = x / y, m = x % y;
        if (m != 0 && ((m < 0) != (y < 0))) {  // Python floors
          --d;
          m += y;
        }
        return op == "//" ? value(d) : value(m);
      }
      const double d = std::floor(p / q);
      return op == "//" ? value(d) : value(p - d * q);
    }
    if (op == "**") {
      if (ints && y >= 0) {
        if (x == 0 || x == 1 || x == -1) return value(y == 0 ? 1 : x == -1 && y % 2 == 0 ? 1 : x);
        int64_t r = 1;  // |x| >= 2 overflows within 63 steps
        for (int64_t i = 0; i < y; ++i) {
          if (__builtin_mul_overflow(r, x, &r)) {
            return type_error(
                absl::StrCat("the integer result of ", x, " ** ", y, " is too large"));
          }
        }
        return value(r);
      }
      return value(std::pow(p, q));
    }
  }
  if (op == "+" && a.is_string() && b.is_string()) return value(a.str() + b.str());
  if (op == "+" && a.is_list() && b.is_list()) {
    value_list l = a.list();
    l.insert(l.end(), b.list().begin(), b.list().end());
    return value(std::move(l));
  }
  if (op == "*" && (a.is_string() || a.is_list()) && (b.is_int() || b.is_bool())) {
    if (a.is_string()) {
      std::string s;
      for (int64_t i = 0; i < b.integer(); ++i)
        s += a.str();
      return value(s);
    }
    value_list l;
    for (int64_t i = 0; i < b.integer(); ++i)
      l.insert(l.end(), a.list().begin(), a.list().end());
    return value(std::move(l));
  }
  return type_error(absl::StrCat("unsupported operand type(s) for ", op, ": ", types));
}

}  // namespace troupe::jinja

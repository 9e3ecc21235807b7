#include "actors/json_grammar.hpp"

#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace troupe::actors {

using ojson = nlohmann::ordered_json;
using node = json_grammar::node;
using kind = json_grammar::kind;

namespace {

constexpr int max_depth = 8;     // nesting of "any" values
constexpr int max_digits = 16;   // a number's integer and fraction digits
constexpr int max_exponent = 2;  // its exponent's digits: within a double
constexpr size_t max_literals = 64;

bool is_digit(uint8_t b) {
  return b >= '0' && b <= '9';
}

constexpr int max_schema_depth = 32;  // the schema's own nesting, checked before any recursion

// Whether `value` nests deeper than `limit`, found without recursion.
bool nests_deeper(const ojson& value, int limit) {
  std::vector<std::pair<const ojson*, int>> unvisited = {{&value, 0}};
  while (!unvisited.empty()) {
    auto [v, depth] = unvisited.back();
    unvisited.pop_back();
    if (depth > limit) return true;
    if (v->is_structured()) {
      for (const auto& child : *v)
        unvisited.emplace_back(&child, depth + 1);
    }
  }
  return false;
}

}  // namespace

class schema_compiler {
 public:
  explicit schema_compiler(json_grammar& g) : g_(g) {}

  int add(node n) {
    g_.nodes_.push_back(std::move(n));
    return static_cast<int>(g_.nodes_.size()) - 1;
  }

  // The nodes of any JSON value, which reference each other.
  void add_any() {
    g_.any_value = add({.type = kind::any});
    g_.any_string = add({.type = kind::string});
    g_.any_number = add({.type = kind::number});
    g_.any_bool = add({.type = kind::literal, .literals = {"true", "false"}});
    g_.any_null = add({.type = kind::literal, .literals = {"null"}});
    g_.any_object = add({.type = kind::object, .open = true});
    g_.any_array = add({.type = kind::array, .items = g_.any_value});
  }

  absl::StatusOr<int> compile(const ojson& s, const std::string& at) {
    if (s.is_boolean() && s.get<bool>()) return g_.any_value;
    if (!s.is_object()) return error(at, "a schema must be an object");
    static const std::set<std::string> annotations = {
        "title", "description",          "default", "examples", "$schema",
        "$id",   "additionalProperties", "strict"};
    static const std::set<std::string> known = {"type",      "enum",      "const",    "properties",
                                                "required",  "items",     "minItems", "maxItems",
                                                "minLength", "maxLength", "anyOf"};
    for (const auto& [key, value] : s.items()) {
      if (known.count(key) == 0 && annotations.count(key) == 0) {
        return error(at, absl::StrCat("the keyword '", key,
                                      "' is not supported; troupe's structured output reads ",
                                      absl::StrJoin(known, ", ")));
      }
    }
    if (s.contains("anyOf")) return tagged_union(s, at);
    if (s.contains("const")) return literal({s["const"]}, at);
    if (s.contains("enum")) {
      if (!s["enum"].is_array() || s["enum"].empty()) return error(at, "'enum' must be a list");
      return literal(std::vector<ojson>(s["enum"].begin(), s["enum"].end()), at);
    }
    if (!s.contains("type")) return g_.any_value;
    const ojson& type = s["type"];
    if (type.is_string()) return typed(s, type.get<std::string>(), at);
    if (!type.is_array() || type.empty()) return error(at, "'type' must be a name or a list");
    node choice{.type = kind::choice};
    std::set<std::string> names;
    for (const auto& t : type) {
      if (!t.is_string()) return error(at, "'type' must list names");
      names.insert(t.get<std::string>());
    }
    if (names.count("integer") && names.count("number")) names.erase("integer");
    for (const auto& name : names) {
      auto option = typed(s, name, at);
      if (!option.ok()) return option.status();
      choice.options.push_back(*option);
    }
    if (choice.options.size() == 1) return choice.options[0];
    return add(std::move(choice));
  }

 private:
  // anyOf, of objects told apart by their first property: each alternative an object of the same
  // keys (and the same required ones) whose first property is a string const of its own, as a
  // function call's {"name": const, "parameters": ...}. One object node: the first property's
  // value is the literal of every tag, and the i-th tag's other values are tagged[i].
  absl::StatusOr<int> tagged_union(const ojson& s, const std::string& at) {
    const std::string shape =
        "'anyOf' is supported for objects told apart by their first property, a string const";
    if (s.size() != 1 && !(s.size() == 2 && s.contains("type") && s["type"] == "object")) {
      return error(at, shape + ", alone beside it");
    }
    const ojson& alternatives = s["anyOf"];
    if (!alternatives.is_array() || alternatives.empty() || alternatives.size() > max_literals) {
      return error(at, shape + ": a list of 1 to 64 schemas");
    }
    node n{.type = kind::object};
    std::vector<ojson> tags;
    for (size_t i = 0; i < alternatives.size(); ++i) {
      const std::string where = absl::StrCat(at, "/anyOf/", i);
      const ojson& a = alternatives[i];
      const bool object = a.is_object() && a.value("type", ojson()) == "object" &&
                          a.contains("properties") && a["properties"].is_object() &&
                          !a["properties"].empty();
      if (!object) return error(where, shape);
      const auto first = a["properties"].begin();
      if (!first->is_object() || !first->contains("const") || !(*first)["const"].is_string()) {
        return error(where, shape);
      }
      auto compiled = typed(a, "object", where);
      if (!compiled.ok()) return compiled.status();
      const node alternative = g_.nodes_[*compiled];
      if (!alternative.required[0]) return error(where, shape + " that is required");
      if (i == 0) {
        n.keys = alternative.keys;
        n.required = alternative.required;
      } else if (alternative.keys != n.keys || alternative.required != n.required) {
        return error(where, shape + ", each with the same properties and required ones");
      }
      if (std::find(tags.begin(), tags.end(), (*first)["const"]) != tags.end()) {
        return error(where, absl::StrCat(shape, ": ", (*first)["const"].dump(), " is twice"));
      }
      tags.push_back((*first)["const"]);
      n.tagged.push_back(alternative.values);
    }
    auto tag = literal(tags, at);
    if (!tag.ok()) return tag.status();
    n.values = n.tagged[0];
    n.values[0] = *tag;
    return add(std::move(n));
  }

  absl::Status error(const std::string& at, const std::string& what) {
    return absl::InvalidArgumentError(absl::StrCat("the schema at ", at, ": ", what));
  }

  absl::StatusOr<int> literal(const std::vector<ojson>& values, const std::string& at) {
    if (values.size() > max_literals) {
      return error(at, absl::StrCat("'enum' has ", values.size(), " values; at most ", max_literals,
                                    " are supported"));
    }
    node n{.type = kind::literal};
    for (const auto& v : values)
      n.literals.push_back(v.dump());
    return add(std::move(n));
  }

  absl::StatusOr<int> count(const ojson& s, const char* key, int fallback, const std::string& at,
                            int* out) {
    *out = fallback;
    if (!s.contains(key)) return 0;
    if (!s[key].is_number_unsigned()) {
      return error(at, absl::StrCat("'", key, "' must be a count"));
    }
    *out = static_cast<int>(std::min<uint64_t>(s[key].get<uint64_t>(), INT32_MAX));
    return 0;
  }

  absl::StatusOr<int> typed(const ojson& s, const std::string& type, const std::string& at) {
    if (type == "null") return g_.any_null;
    if (type == "boolean") return g_.any_bool;
    if (type == "number" || type == "integer") {
      return add({.type = kind::number, .integer = type == "integer"});
    }
    if (type == "string") {
      node n{.type = kind::string};
      for (auto [key, out, fallback] :
           {std::tuple{"minLength", &n.min_length, 0}, {"maxLength", &n.max_length, INT32_MAX}}) {
        if (auto c = count(s, key, fallback, at, out); !c.ok()) return c.status();
      }
      if (n.min_length > n.max_length) return error(at, "'minLength' is above 'maxLength'");
      return add(std::move(n));
    }
    if (type == "array") {
      node n{.type = kind::array, .items = g_.any_value};
      for (auto [key, out, fallback] :
           {std::tuple{"minItems", &n.min_items, 0}, {"maxItems", &n.max_items, INT32_MAX}}) {
        if (auto c = count(s, key, fallback, at, out); !c.ok()) return c.status();
      }
      if (n.min_items > n.max_items) return error(at, "'minItems' is above 'maxItems'");
      if (s.contains("items")) {
        auto items = compile(s["items"], at + "/items");
        if (!items.ok()) return items.status();
        n.items = *items;
      }
      return add(std::move(n));
    }
    if (type == "object") {
      if (!s.contains("properties")) return g_.any_object;
      const ojson& properties = s["properties"];
      if (!properties.is_object()) return error(at, "'properties' must be an object");
      if (properties.size() > max_literals) {
        return error(at, absl::StrCat("an object of ", properties.size(),
                                      " properties; at most 64 are supported"));
      }
      std::set<std::string> required;
      if (s.contains("required")) {
        if (!s["required"].is_array()) return error(at, "'required' must list property names");
        for (const auto& r : s["required"]) {
          if (!r.is_string() || !properties.contains(r.get<std::string>())) {
            return error(at, absl::StrCat("'required' names ", r.dump(),
                                          ", which is not one of the properties"));
          }
          required.insert(r.get<std::string>());
        }
      }
      node n{.type = kind::object};
      for (const auto& [name, schema] : properties.items()) {
        auto value = compile(schema, absl::StrCat(at, "/properties/", name));
        if (!value.ok()) return value.status();
        n.keys.push_back(ojson(name).dump());
        n.values.push_back(*value);
        n.required.push_back(required.count(name) > 0);
      }
      return add(std::move(n));
    }
    return error(at, absl::StrCat("the type '", type,
                                  "' is not one of object, array, string, number, integer, "
                                  "boolean, null"));
  }

  json_grammar& g_;
};

absl::StatusOr<std::shared_ptr<const json_grammar>> json_grammar::compile(const ojson& schema) {
  if (nests_deeper(schema, max_schema_depth)) {
    return absl::InvalidArgumentError(
        absl::StrCat("the schema nests deeper than ", max_schema_depth, " levels"));
  }
  auto g = std::make_shared<json_grammar>();
  schema_compiler c(*g);
  c.add_any();
  auto root = c.compile(schema, "#");
  if (!root.ok()) return root.status();
  g->root_ = *root;
  // A choice's options must begin differently, so that the first byte picks one.
  for (const node& n : g->nodes_) {
    if (n.type != kind::choice) continue;
    for (int b = 0; b < 256; ++b) {
      int starts = 0;
      for (int o : n.options)
        starts += g->may_begin(o, static_cast<uint8_t>(b));
      if (starts > 1) {
        return absl::InvalidArgumentError(
            "the schema's 'type' list holds types whose values begin alike");
      }
    }
  }
  return std::shared_ptr<const json_grammar>(std::move(g));
}

absl::StatusOr<std::shared_ptr<const json_grammar>> json_grammar::compile(
    const std::string& schema_text) {
  const ojson schema = ojson::parse(schema_text, nullptr, false);
  if (schema.is_discarded()) return absl::InvalidArgumentError("the schema is not valid JSON");
  return compile(schema);
}

bool json_grammar::may_begin(int id, uint8_t b) const {
  const node& n = nodes_[id];
  switch (n.type) {
    case kind::any:
      return b == '{' || b == '[' || b == '"' || b == '-' || is_digit(b) || b == 't' || b == 'f' ||
             b == 'n';
    case kind::object:
      return b == '{';
    case kind::array:
      return b == '[';
    case kind::string:
      return b == '"';
    case kind::number:
      return b == '-' || is_digit(b);
    case kind::literal:
      for (const auto& l : n.literals) {
        if (static_cast<uint8_t>(l[0]) == b) return true;
      }
      return false;
    case kind::choice:
      for (int o : n.options) {
        if (may_begin(o, b)) return true;
      }
      return false;
  }
  return false;
}

json_matcher::json_matcher(const json_grammar& grammar) : grammar_(&grammar) {
  push(grammar_->root());
}

void json_matcher::push(int id) {
  frame f;
  f.node = id;
  const node& n = grammar_->at(id);
  if (n.type == kind::literal)
    f.mask = n.literals.size() == 64 ? ~0ull : (1ull << n.literals.size()) - 1;
  stack_.push_back(f);
}

uint64_t json_matcher::key_candidates(const node& n, int from) const {
  uint64_t mask = 0;
  for (int i = from; i < static_cast<int>(n.keys.size()); ++i) {
    mask |= 1ull << i;
    if (n.required[i]) break;  // a required property cannot be skipped
  }
  return mask;
}

bool json_matcher::accepting(const frame& f) const {
  const node& n = grammar_->at(f.node);
  if (n.type == kind::number) return f.phase == 2 || f.phase == 3 || f.phase == 5 || f.phase == 8;
  if (n.type == kind::literal) {
    for (size_t i = 0; i < n.literals.size(); ++i) {
      if ((f.mask >> i & 1) && static_cast<int>(n.literals[i].size()) == f.pos) return true;
    }
  }
  return false;
}

bool json_matcher::complete() const {
  return stack_.empty() || (stack_.size() == 1 && accepting(stack_[0]));
}

bool json_matcher::can_continue() const {
  for (int b = 0; b < 256; ++b) {
    json_matcher copy = *this;
    if (copy.accept(static_cast<uint8_t>(b))) return true;
  }
  return false;
}

int json_matcher::string_room() const {
  if (stack_.empty()) return -1;
  const frame& f = stack_.back();
  const node& n = grammar_->at(f.node);
  if (n.type != kind::string || f.phase != 1) return -1;
  return n.max_length - f.count;
}

bool json_matcher::accept(std::string_view bytes) {
  for (char c : bytes) {
    if (!accept(static_cast<uint8_t>(c))) return false;
  }
  return true;
}

bool json_matcher::accept(uint8_t b) {
  for (;;) {
    if (stack_.empty()) return false;  // the value has ended
    switch (step(stack_.back(), b)) {
      case result::take:
        return true;
      case result::refuse:
        return false;
      case result::retry:  // a child was pushed for b
        continue;
      case result::pop_and_retry:  // the value ended before b, which belongs to its parent
        child_done();
        continue;
    }
  }
}

// The top frame's value has ended: it leaves the stack, and its parent goes on.
void json_matcher::child_done() {
  const frame child = stack_.back();
  stack_.pop_back();
  if (stack_.empty()) return;
  frame& parent = stack_.back();
  const node& n = grammar_->at(parent.node);
  if (n.type == kind::object) {
    if (parent.phase == 2) {  // an open object's key
      parent.phase = 3;
    } else {                                          // a value
      if (!n.tagged.empty() && parent.chosen == 0) {  // a tagged union's tag: which one it was
        const node& tag = grammar_->at(child.node);
        for (size_t i = 0; i < tag.literals.size(); ++i) {
          if ((child.mask >> i & 1) && static_cast<int>(tag.literals[i].size()) == child.pos)
            parent.tag = static_cast<int>(i);
        }
      }
      if (!n.open) parent.count = parent.chosen + 1;
      parent.phase = 6;
    }
  } else if (n.type == kind::array) {
    ++parent.count;
    parent.phase = 3;
  }
}

json_matcher::result json_matcher::step(frame& f, uint8_t b) {
  const node& n = grammar_->at(f.node);
  switch (n.type) {
    case kind::any:
    case kind::choice: {
      // The first byte picks the value's kind: this frame becomes it.
      int pick = -1;
      if (n.type == kind::choice) {
        for (int o : n.options) {
          if (grammar_->may_begin(o, b)) pick = o;
        }
      } else if (b == '{' || b == '[') {
        if (static_cast<int>(stack_.size()) > max_depth) return result::refuse;
        pick = b == '{' ? grammar_->any_object : grammar_->any_array;
      } else if (b == '"') {
        pick = grammar_->any_string;
      } else if (b == '-' || is_digit(b)) {
        pick = grammar_->any_number;
      } else if (b == 't' || b == 'f') {
        pick = grammar_->any_bool;
      } else if (b == 'n') {
        pick = grammar_->any_null;
      }
      if (pick < 0) return result::refuse;
      stack_.pop_back();
      push(pick);
      return result::retry;
    }
    case kind::object:
      return step_object(f, b);
    case kind::array:
      return step_array(f, b);
    case kind::string:
      return step_string(f, b);
    case kind::number:
      return step_number(f, b);
    case kind::literal:
      return step_literal(f, b);
  }
  return result::refuse;
}

// '{' ["key": value {, "key": value}] '}', one optional space after ':' and ','.
json_matcher::result json_matcher::step_object(frame& f, uint8_t b) {
  const node& n = grammar_->at(f.node);
  const auto may_close = [&] {
    if (n.open) return true;
    for (int i = f.count; i < static_cast<int>(n.keys.size()); ++i) {
      if (n.required[i]) return false;
    }
    return true;
  };
  const auto begin_key = [&]() -> result {
    if (b != '"') return result::refuse;
    if (n.open) {
      f.phase = 2;
      push(grammar_->any_string);
      return result::retry;
    }
    f.mask = key_candidates(n, f.count);
    if (f.mask == 0) return result::refuse;
    f.pos = 0;
    f.phase = 2;
    return step_object(f, b);
  };
  switch (f.phase) {
    case 0:  // '{'
      if (b != '{') return result::refuse;
      f.phase = 1;
      return result::take;
    case 1:  // after '{': a key or '}'
      if (b == '}' && may_close()) {
        child_done();
        return result::take;
      }
      return begin_key();
    case 2: {  // a declared key, matched among the candidates
      uint64_t left = 0;
      for (int i = 0; i < static_cast<int>(n.keys.size()); ++i) {
        if ((f.mask >> i & 1) && static_cast<int>(n.keys[i].size()) > f.pos &&
            static_cast<uint8_t>(n.keys[i][f.pos]) == b) {
          left |= 1ull << i;
        }
      }
      if (left == 0) return result::refuse;
      f.mask = left;
      ++f.pos;
      for (int i = 0; i < static_cast<int>(n.keys.size()); ++i) {
        if ((left >> i & 1) && static_cast<int>(n.keys[i].size()) == f.pos) {
          f.chosen = i;  // quoted keys end at their quote: one matches whole
          f.phase = 3;
        }
      }
      return result::take;
    }
    case 3:  // ':'
      if (b != ':') return result::refuse;
      f.phase = 4;
      return result::take;
    case 4:  // an optional space, then the value
      f.phase = 5;
      if (b == ' ') return result::take;
      [[fallthrough]];
    case 5:
      f.phase = 7;  // the value is read (child_done moves on)
      push(n.open                       ? grammar_->any_value
           : f.tag >= 0 && f.chosen > 0 ? n.tagged[f.tag][f.chosen]
                                        : n.values[f.chosen]);
      return result::retry;
    case 6:  // after a value: ',' or '}'
      if (b == '}' && may_close()) {
        child_done();
        return result::take;
      }
      if (b != ',' || (!n.open && key_candidates(n, f.count) == 0)) return result::refuse;
      f.phase = 8;
      return result::take;
    case 8:  // after ',': an optional space, then a key
      f.phase = 9;
      if (b == ' ') return result::take;
      [[fallthrough]];
    case 9:
      return begin_key();
    default:
      return result::refuse;
  }
}

// '[' [value {, value}] ']', within minItems and maxItems.
json_matcher::result json_matcher::step_array(frame& f, uint8_t b) {
  const node& n = grammar_->at(f.node);
  switch (f.phase) {
    case 0:
      if (b != '[') return result::refuse;
      f.phase = 1;
      return result::take;
    case 1:  // after '[': ']' or the first item
      if (b == ']' && n.min_items == 0) {
        child_done();
        return result::take;
      }
      if (n.max_items == 0) return result::refuse;
      f.phase = 2;
      push(n.items);
      return result::retry;
    case 3:  // after an item: ',' or ']'
      if (b == ']' && f.count >= n.min_items) {
        child_done();
        return result::take;
      }
      if (b != ',' || f.count >= n.max_items) return result::refuse;
      f.phase = 4;
      return result::take;
    case 4:  // an optional space, then the item
      f.phase = 5;
      if (b == ' ') return result::take;
      [[fallthrough]];
    case 5:
      f.phase = 2;
      push(n.items);
      return result::retry;
    default:
      return result::refuse;
  }
}

// '"' characters '"': valid UTF-8, no control bytes, escapes \" \\ \/ \b \f \n \r \t \uXXXX;
// between minLength and maxLength characters.
json_matcher::result json_matcher::step_string(frame& f, uint8_t b) {
  const node& n = grammar_->at(f.node);
  const bool room = f.count < n.max_length;
  switch (f.phase) {
    case 0:
      if (b != '"') return result::refuse;
      f.phase = 1;
      return result::take;
    case 1:
      if (b == '"') {
        if (f.count < n.min_length) return result::refuse;
        child_done();
        return result::take;
      }
      if (!room || b < 0x20 || b == 0x7f) return result::refuse;
      if (b == '\\') {
        f.phase = 2;
        return result::take;
      }
      if (b < 0x80) {
        ++f.count;
        return result::take;
      }
      // A UTF-8 lead byte, and the range of the byte after it (no overlong forms, surrogates
      // or code points above U+10FFFF).
      f.lo = 0x80;
      f.hi = 0xbf;
      if (b >= 0xc2 && b <= 0xdf) {
        f.pending = 1;
      } else if (b >= 0xe0 && b <= 0xef) {
        f.pending = 2;
        if (b == 0xe0) f.lo = 0xa0;
        if (b == 0xed) f.hi = 0x9f;
      } else if (b >= 0xf0 && b <= 0xf4) {
        f.pending = 3;
        if (b == 0xf0) f.lo = 0x90;
        if (b == 0xf4) f.hi = 0x8f;
      } else {
        return result::refuse;
      }
      ++f.count;
      f.phase = 3;
      return result::take;
    case 3:  // UTF-8 continuation bytes
      if (b < f.lo || b > f.hi) return result::refuse;
      f.lo = 0x80;
      f.hi = 0xbf;
      if (--f.pending == 0) f.phase = 1;
      return result::take;
    case 2:  // after '\'
      if (b == 'u') {
        f.phase = 4;
        f.pos = 0;
        return result::take;
      }
      if (std::string_view("\"\\/bfnrt").find(static_cast<char>(b)) == std::string_view::npos) {
        return result::refuse;
      }
      ++f.count;
      f.phase = 1;
      return result::take;
    case 4:  // \uXXXX
      if (!is_digit(b) && !(b >= 'a' && b <= 'f') && !(b >= 'A' && b <= 'F')) {
        return result::refuse;
      }
      if (++f.pos == 4) {
        ++f.count;
        f.phase = 1;
      }
      return result::take;
    default:
      return result::refuse;
  }
}

// -? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?, integers without the last two parts. A
// byte that cannot go on a whole number belongs to the parent.
json_matcher::result json_matcher::step_number(frame& f, uint8_t b) {
  const node& n = grammar_->at(f.node);
  const auto end_or_refuse = [&] { return accepting(f) ? result::pop_and_retry : result::refuse; };
  const auto digit = [&](int next, int limit) {
    if (f.pos >= limit) return end_or_refuse();
    ++f.pos;
    f.phase = next;
    return result::take;
  };
  switch (f.phase) {
    case 0:
    case 1:
      if (b == '-' && f.phase == 0) {
        f.phase = 1;
        return result::take;
      }
      if (b == '0') return digit(3, max_digits);
      if (is_digit(b)) return digit(2, max_digits);
      return result::refuse;
    case 2:
    case 3:
      if (is_digit(b) && f.phase == 2) return digit(2, max_digits);
      if (!n.integer && b == '.' && f.pos < max_digits) {
        f.phase = 4;
        return result::take;
      }
      if (!n.integer && (b == 'e' || b == 'E')) {
        f.phase = 6;
        f.pos = 0;
        return result::take;
      }
      return end_or_refuse();
    case 4:
    case 5:
      if (is_digit(b)) return digit(5, max_digits);
      if (f.phase == 5 && (b == 'e' || b == 'E')) {
        f.phase = 6;
        f.pos = 0;
        return result::take;
      }
      return end_or_refuse();
    case 6:
      if (b == '+' || b == '-') {
        f.phase = 7;
        return result::take;
      }
      [[fallthrough]];
    case 7:
    case 8:
      if (is_digit(b)) return digit(8, max_exponent);
      return end_or_refuse();
    default:
      return result::refuse;
  }
}

// One of the literal texts, byte by byte; a byte that cannot go on a whole one belongs to the
// parent.
json_matcher::result json_matcher::step_literal(frame& f, uint8_t b) {
  const node& n = grammar_->at(f.node);
  uint64_t left = 0;
  bool longer = false;
  for (size_t i = 0; i < n.literals.size(); ++i) {
    if ((f.mask >> i & 1) && static_cast<int>(n.literals[i].size()) > f.pos &&
        static_cast<uint8_t>(n.literals[i][f.pos]) == b) {
      left |= 1ull << i;
      longer = longer || static_cast<int>(n.literals[i].size()) > f.pos + 1;
    }
  }
  if (left == 0) return accepting(f) ? result::pop_and_retry : result::refuse;
  f.mask = left;
  ++f.pos;
  if (!longer) child_done();  // whole, and nothing goes on
  return result::take;
}

}  // namespace troupe::actors

#include "models/chat/jinja_template.hpp"

#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "models/chat/jinja_builtins.hpp"
#include "models/chat/jinja_lexer.hpp"
#include "models/chat/jinja_parser.hpp"
#include "runtime/base/status.hpp"

namespace troupe::jinja {

namespace {

// Macro calls nest at most this deep (a template that recurses without end).
constexpr int max_macro_depth = 64;

absl::Status at_line(int line, const absl::Status& s) {
  if (s.ok() || absl::StartsWith(s.message(), "line ")) return s;
  return absl::Status(s.code(), absl::StrCat("line ", line, ": ", s.message()));
}

class renderer {
 public:
  renderer(const value_dict& context, const value_dict& globals, size_t max_bytes)
      : context_(context), globals_(globals), max_bytes_(max_bytes) {
    scopes_.emplace_back();
  }

  enum class flow { normal, break_loop, continue_loop };

  absl::Status run(const body& b, std::string& out, flow& f) {
    for (const stmt_ptr& s : b) {
      TROUPE_RETURN_IF_ERROR(at_line(s->line, statement(*s, out, f)));
      if (out.size() > max_bytes_) {
        return absl::ResourceExhaustedError(absl::StrCat("line ", s->line,
                                                         ": the template rendered more than ",
                                                         max_bytes_, " bytes; it is stopped"));
      }
      if (f != flow::normal) return absl::OkStatus();
    }
    return absl::OkStatus();
  }

 private:
  using scope = absl::flat_hash_map<std::string, value>;

  absl::Status statement(const stmt& s, std::string& out, flow& f) {
    switch (s.k) {
      case stmt::kind::text:
        out += s.text;
        return absl::OkStatus();
      case stmt::kind::output: {
        TROUPE_ASSIGN_OR_RETURN(value v, eval(*s.value));
        out += to_str(v);
        return absl::OkStatus();
      }
      case stmt::kind::if_:
        for (size_t i = 0; i < s.conditions.size(); ++i) {
          TROUPE_ASSIGN_OR_RETURN(value c, eval(*s.conditions[i]));
          if (c.truthy()) return run(s.bodies[i], out, f);
        }
        if (s.bodies.size() > s.conditions.size()) return run(s.bodies.back(), out, f);
        return absl::OkStatus();
      case stmt::kind::for_:
        return for_loop(s, out, f);
      case stmt::kind::set: {
        value v;
        if (s.value) {
          TROUPE_ASSIGN_OR_RETURN(v, eval(*s.value));
        } else {  // a block set: what its body renders
          std::string text;
          flow inner = flow::normal;
          TROUPE_RETURN_IF_ERROR(run(s.bodies[0], text, inner));
          v = value(std::move(text));
        }
        if (s.attribute.empty()) {
          scopes_.back()[s.targets[0]] = std::move(v);
          return absl::OkStatus();
        }
        const value target = lookup(s.targets[0]);
        if (!target.is_dict() || !target.dict().is_namespace) {
          return absl::InvalidArgumentError(absl::StrCat("cannot set '", s.attribute, "' on '",
                                                         s.targets[0], "', a ", target.type_name(),
                                                         ", not a namespace()"));
        }
        target.dict().set(s.attribute, std::move(v));
        return absl::OkStatus();
      }
      case stmt::kind::macro:
        scopes_.back()[s.targets[0]] = macro(s);
        return absl::OkStatus();
      case stmt::kind::break_:
        f = flow::break_loop;
        return absl::OkStatus();
      case stmt::kind::continue_:
        f = flow::continue_loop;
        return absl::OkStatus();
      case stmt::kind::passthrough:
        return run(s.bodies[0], out, f);
    }
    return absl::OkStatus();
  }

  absl::Status for_loop(const stmt& s, std::string& out, flow& f) {
    TROUPE_ASSIGN_OR_RETURN(value iterable, eval(*s.value));
    TROUPE_ASSIGN_OR_RETURN(value_list all, iterate(iterable));
    value_list items;
    for (auto& x : all) {  // {% for x in xs if cond %}: the loop sees only what passes
      if (!s.conditions.empty()) {
        scopes_.emplace_back();
        TROUPE_RETURN_IF_ERROR(bind_targets(s, x));
        auto keep = eval(*s.conditions[0]);
        scopes_.pop_back();
        if (!keep.ok()) return keep.status();
        if (!keep->truthy()) continue;
      }
      items.push_back(std::move(x));
    }
    const auto n = static_cast<int64_t>(items.size());
    for (int64_t i = 0; i < n; ++i) {
      // Each iteration starts from the scope outside the loop (Jinja2's rule: a set inside a
      // loop is gone at the next iteration and after the loop).
      scopes_.emplace_back();
      TROUPE_RETURN_IF_ERROR(bind_targets(s, items[static_cast<size_t>(i)]));
      value_dict loop;
      loop.set("index", value(i + 1));
      loop.set("index0", value(i));
      loop.set("revindex", value(n - i));
      loop.set("revindex0", value(n - i - 1));
      loop.set("first", value(i == 0));
      loop.set("last", value(i == n - 1));
      loop.set("length", value(n));
      loop.set("depth", value(int64_t{1}));
      loop.set("depth0", value(int64_t{0}));
      loop.set("previtem",
               i > 0 ? items[static_cast<size_t>(i - 1)] : value::undefined_named("loop.previtem"));
      loop.set("nextitem", i + 1 < n ? items[static_cast<size_t>(i + 1)]
                                     : value::undefined_named("loop.nextitem"));
      loop.set("cycle",
               value(callable{"loop.cycle", [i](const call_args& a) -> absl::StatusOr<value> {
                                if (a.positional.empty())
                                  return absl::InvalidArgumentError("loop.cycle() needs values");
                                return a.positional[static_cast<size_t>(i) % a.positional.size()];
                              }}));
      scopes_.back()["loop"] = value(std::move(loop));
      flow inner = flow::normal;
      const absl::Status st = run(s.bodies[0], out, inner);
      scopes_.pop_back();
      TROUPE_RETURN_IF_ERROR(st);
      if (inner == flow::break_loop) break;
    }
    if (n == 0 && s.bodies.size() > 1) return run(s.bodies[1], out, f);
    return absl::OkStatus();
  }

  absl::Status bind_targets(const stmt& s, const value& item) {
    if (s.targets.size() == 1) {
      scopes_.back()[s.targets[0]] = item;
      return absl::OkStatus();
    }
    TROUPE_ASSIGN_OR_RETURN(value_list parts, iterate(item));
    if (parts.size() != s.targets.size()) {
      return absl::InvalidArgumentError(absl::StrCat("cannot unpack ", parts.size(),
                                                     " values into ", s.targets.size(), " names"));
    }
    for (size_t k = 0; k < parts.size(); ++k)
      scopes_.back()[s.targets[k]] = parts[k];
    return absl::OkStatus();
  }

  value macro(const stmt& s) {
    return value(callable{
        s.targets[0], [this, &s](const call_args& a) -> absl::StatusOr<value> {
          if (depth_ >= max_macro_depth) {
            return absl::InvalidArgumentError(absl::StrCat(
                "macro '", s.targets[0], "' nests more than ", max_macro_depth, " calls deep"));
          }
          scope args;
          for (size_t i = 0; i < s.params.size(); ++i) {
            const auto& [name, fallback] = s.params[i];
            if (const value* v = a.get(i, name)) {
              args[name] = *v;
            } else if (fallback) {
              TROUPE_ASSIGN_OR_RETURN(args[name], eval(*fallback));
            } else {
              args[name] = value::undefined_named(absl::StrCat("'", name, "' is undefined"));
            }
          }
          // The macro sees the template's top level and its arguments.
          std::vector<scope> saved = std::move(scopes_);
          scopes_ = {saved.front(), std::move(args)};
          ++depth_;
          std::string text;
          flow inner = flow::normal;
          const absl::Status st = run(s.bodies[0], text, inner);
          --depth_;
          scopes_ = std::move(saved);
          TROUPE_RETURN_IF_ERROR(st);
          return value(std::move(text));
        }});
  }

  value lookup(const std::string& name) const {
    for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it) {
      const auto found = it->find(name);
      if (found != it->end()) return found->second;
    }
    if (const value* v = context_.find(name)) return *v;
    if (const value* v = globals_.find(name)) return *v;
    return value::undefined_named(absl::StrCat("'", name, "' is undefined"));
  }

  absl::StatusOr<call_args> arguments(const expr& e, size_t first) {
    call_args a;
    for (size_t i = first; i < e.items.size(); ++i) {
      TROUPE_ASSIGN_OR_RETURN(value v, eval(*e.items[i]));
      a.positional.push_back(std::move(v));
    }
    for (const auto& [name, x] : e.keywords) {
      TROUPE_ASSIGN_OR_RETURN(value v, eval(*x));
      a.keyword.emplace_back(name, std::move(v));
    }
    return a;
  }

  absl::StatusOr<value> invoke(const value& f, const call_args& a) {
    if (f.is_undefined()) {
      return absl::InvalidArgumentError(absl::StrCat(
          f.undefined_name().empty() ? std::string("a value is undefined") : f.undefined_name(),
          ", so it cannot be called"));
    }
    if (!f.is_callable()) {
      return absl::InvalidArgumentError(
          absl::StrCat("'", f.type_name(), "' object is not callable"));
    }
    return f.function().call(a);
  }

  absl::StatusOr<value> eval(const expr& e) {
    auto s = eval_unlined(e);
    if (!s.ok()) return at_line(e.line, s.status());
    return s;
  }

  absl::StatusOr<value> eval_unlined(const expr& e) {
    switch (e.k) {
      case expr::kind::literal:
        return e.literal;
      case expr::kind::name:
        return lookup(e.text);
      case expr::kind::list: {
        value_list l;
        for (const auto& x : e.items) {
          TROUPE_ASSIGN_OR_RETURN(value v, eval(*x));
          l.push_back(std::move(v));
        }
        return value(std::move(l));
      }
      case expr::kind::dict: {
        value_dict d;
        for (size_t i = 0; i + 1 < e.items.size(); i += 2) {
          TROUPE_ASSIGN_OR_RETURN(value k, eval(*e.items[i]));
          TROUPE_ASSIGN_OR_RETURN(value v, eval(*e.items[i + 1]));
          if (!k.is_string()) {
            return absl::InvalidArgumentError(
                absl::StrCat("a dict key must be a string, not ", k.type_name()));
          }
          d.set(k.str(), std::move(v));
        }
        return value(std::move(d));
      }
      case expr::kind::attribute: {
        TROUPE_ASSIGN_OR_RETURN(value obj, eval(*e.items[0]));
        return get_attribute(obj, e.text);
      }
      case expr::kind::subscript: {
        TROUPE_ASSIGN_OR_RETURN(value obj, eval(*e.items[0]));
        TROUPE_ASSIGN_OR_RETURN(value key, eval(*e.items[1]));
        return get_item(obj, key);
      }
      case expr::kind::slice: {
        TROUPE_ASSIGN_OR_RETURN(value obj, eval(*e.items[0]));
        value parts[3];
        for (int i = 0; i < 3; ++i) {
          if (e.items[i + 1]) {
            TROUPE_ASSIGN_OR_RETURN(parts[i], eval(*e.items[i + 1]));
          }
        }
        return get_slice(obj, parts[0], parts[1], parts[2]);
      }
      case expr::kind::call: {
        TROUPE_ASSIGN_OR_RETURN(value f, eval(*e.items[0]));
        TROUPE_ASSIGN_OR_RETURN(call_args a, arguments(e, 1));
        return invoke(f, a);
      }
      case expr::kind::filter: {
        TROUPE_ASSIGN_OR_RETURN(value v, eval(*e.items[0]));
        TROUPE_ASSIGN_OR_RETURN(call_args a, arguments(e, 1));
        return apply_filter(e.text, v, a,
                            [this](const value& f, const call_args& x) { return invoke(f, x); });
      }
      case expr::kind::test: {
        TROUPE_ASSIGN_OR_RETURN(value v, eval(*e.items[0]));
        TROUPE_ASSIGN_OR_RETURN(call_args a, arguments(e, 1));
        TROUPE_ASSIGN_OR_RETURN(bool r, apply_test(e.text, v, a));
        return value(r != e.negated);
      }
      case expr::kind::unary: {
        TROUPE_ASSIGN_OR_RETURN(value v, eval(*e.items[0]));
        if (e.text == "not") return value(!v.truthy());
        if (!v.is_number()) {
          return absl::InvalidArgumentError(
              absl::StrCat("bad operand type for unary ", e.text, ": '", v.type_name(), "'"));
        }
        if (e.text == "+") return v.is_float() ? value(v.number()) : value(v.integer());
        if (v.is_float()) return value(-v.number());
        if (v.integer() == INT64_MIN)
          return absl::InvalidArgumentError("the integer is too large to negate");
        return value(-v.integer());
      }
      case expr::kind::binary: {
        TROUPE_ASSIGN_OR_RETURN(value a, eval(*e.items[0]));
        if (e.text == "and") return a.truthy() ? eval(*e.items[1]) : absl::StatusOr<value>(a);
        if (e.text == "or") return a.truthy() ? absl::StatusOr<value>(a) : eval(*e.items[1]);
        TROUPE_ASSIGN_OR_RETURN(value b, eval(*e.items[1]));
        return apply_binary(e.text, a, b);
      }
      case expr::kind::conditional: {
        TROUPE_ASSIGN_OR_RETURN(value c, eval(*e.items[0]));
        if (c.truthy()) return eval(*e.items[1]);
        if (e.items.size() > 2) return eval(*e.items[2]);
        return value::undefined_named("the else of a conditional expression");
      }
    }
    return absl::InternalError("an expression of an unknown kind");
  }

  const value_dict& context_;
  const value_dict& globals_;
  size_t max_bytes_;
  std::vector<scope> scopes_;
  int depth_ = 0;
};

// Jinja2 reads a template with every \r\n and \r as \n, and without one last \n
// (keep_trailing_newline off).
std::string normalize_newlines(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\r') {
      out.push_back('\n');
      if (i + 1 < s.size() && s[i + 1] == '\n') ++i;
    } else {
      out.push_back(s[i]);
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

}  // namespace

absl::StatusOr<jinja_template> jinja_template::compile(const std::string& source) {
  TROUPE_ASSIGN_OR_RETURN(std::vector<token> tokens, lex(normalize_newlines(source)));
  TROUPE_ASSIGN_OR_RETURN(body b, parse(tokens));
  jinja_template t;
  t.body_ = std::make_shared<const body>(std::move(b));
  return t;
}

absl::StatusOr<std::string> jinja_template::render(const value_dict& context,
                                                   size_t max_bytes) const {
  static const value_dict globals = builtin_globals();
  renderer r(context, globals, max_bytes);
  std::string out;
  renderer::flow f = renderer::flow::normal;
  TROUPE_RETURN_IF_ERROR(r.run(*body_, out, f));
  return out;
}

}  // namespace troupe::jinja

#include "models/chat/jinja_parser.hpp"

#include <charconv>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/base/status.hpp"

namespace troupe::jinja {

namespace {

class parser {
 public:
  explicit parser(const std::vector<token>& t) : t_(t) {}

  // Statements until one of `ends` (a block tag's name) or the end of the template.
  absl::StatusOr<body> statements(std::vector<std::string> ends, std::string* ended_by) {
    body out;
    while (at_ < t_.size()) {
      const token& tok = t_[at_];
      if (tok.k == token::kind::text) {
        auto s = std::make_unique<stmt>();
        s->k = stmt::kind::text;
        s->line = tok.line;
        s->text = tok.text;
        out.push_back(std::move(s));
        ++at_;
      } else if (tok.k == token::kind::var_begin) {
        ++at_;
        auto s = std::make_unique<stmt>();
        s->k = stmt::kind::output;
        s->line = tok.line;
        TROUPE_ASSIGN_OR_RETURN(s->value, expression());
        TROUPE_RETURN_IF_ERROR(expect(token::kind::var_end, "'}}'"));
        out.push_back(std::move(s));
      } else if (tok.k == token::kind::block_begin) {
        if (at_ + 1 >= t_.size() || t_[at_ + 1].k != token::kind::name) {
          return error(tok.line, "a tag '{%' must start with a statement's name");
        }
        const std::string& keyword = t_[at_ + 1].text;
        for (const auto& e : ends) {
          if (keyword == e) {
            at_ += 2;
            if (ended_by) *ended_by = keyword;
            return out;
          }
        }
        at_ += 2;
        TROUPE_ASSIGN_OR_RETURN(stmt_ptr s, statement(keyword, tok.line));
        out.push_back(std::move(s));
      } else {
        return error(tok.line, "unexpected token");
      }
    }
    if (!ends.empty()) {
      return error(t_.empty() ? 1 : t_.back().line,
                   absl::StrCat("the template ends before '", absl::StrJoin(ends, "' or '"), "'"));
    }
    return out;
  }

 private:
  absl::Status error(int line, absl::string_view what) const {
    return absl::InvalidArgumentError(absl::StrCat("line ", line, ": ", what));
  }
  int line() const { return at_ < t_.size() ? t_[at_].line : (t_.empty() ? 1 : t_.back().line); }
  bool is_op(const char* op) const {
    return at_ < t_.size() && t_[at_].k == token::kind::op && t_[at_].text == op;
  }
  bool is_name(const char* name) const {
    return at_ < t_.size() && t_[at_].k == token::kind::name && t_[at_].text == name;
  }
  bool accept_op(const char* op) {
    if (!is_op(op)) return false;
    ++at_;
    return true;
  }
  bool accept_name(const char* name) {
    if (!is_name(name)) return false;
    ++at_;
    return true;
  }
  absl::Status expect(token::kind k, const char* what) {
    if (at_ >= t_.size() || t_[at_].k != k) {
      return error(line(), absl::StrCat("expected ", what, here()));
    }
    ++at_;
    return absl::OkStatus();
  }
  absl::Status expect_op(const char* op) {
    if (!accept_op(op)) return error(line(), absl::StrCat("expected '", op, "'", here()));
    return absl::OkStatus();
  }
  absl::StatusOr<std::string> expect_name() {
    if (at_ >= t_.size() || t_[at_].k != token::kind::name) {
      return error(line(), absl::StrCat("expected a name", here()));
    }
    return t_[at_++].text;
  }
  std::string here() const {
    if (at_ >= t_.size()) return " at the end";
    const token& t = t_[at_];
    switch (t.k) {
      case token::kind::block_end:
        return ", not '%}'";
      case token::kind::var_end:
        return ", not '}}'";
      case token::kind::text:
        return ", not template text";
      default:
        return absl::StrCat(", not '", t.text, "'");
    }
  }
  absl::Status end_of_tag() { return expect(token::kind::block_end, "'%}'"); }

  static expr_ptr make(expr::kind k, int line) {
    auto e = std::make_unique<expr>();
    e->k = k;
    e->line = line;
    return e;
  }

  // --- statements ---

  absl::StatusOr<stmt_ptr> statement(const std::string& keyword, int at_line) {
    auto s = std::make_unique<stmt>();
    s->line = at_line;
    if (keyword == "if") {
      s->k = stmt::kind::if_;
      std::string ended;
      TROUPE_ASSIGN_OR_RETURN(expr_ptr cond, expression());
      TROUPE_RETURN_IF_ERROR(end_of_tag());
      s->conditions.push_back(std::move(cond));
      while (true) {
        TROUPE_ASSIGN_OR_RETURN(body b, statements({"elif", "else", "endif"}, &ended));
        s->bodies.push_back(std::move(b));
        if (ended == "elif") {
          TROUPE_ASSIGN_OR_RETURN(expr_ptr c, expression());
          TROUPE_RETURN_IF_ERROR(end_of_tag());
          s->conditions.push_back(std::move(c));
        } else if (ended == "else") {
          TROUPE_RETURN_IF_ERROR(end_of_tag());
          TROUPE_ASSIGN_OR_RETURN(body e, statements({"endif"}, &ended));
          s->bodies.push_back(std::move(e));
          break;
        } else {
          break;
        }
      }
      TROUPE_RETURN_IF_ERROR(end_of_tag());
    } else if (keyword == "for") {
      s->k = stmt::kind::for_;
      do {
        TROUPE_ASSIGN_OR_RETURN(std::string target, expect_name());
        s->targets.push_back(std::move(target));
      } while (accept_op(","));
      if (!accept_name("in")) return error(line(), absl::StrCat("expected 'in'", here()));
      TROUPE_ASSIGN_OR_RETURN(s->value, or_expression(/*with_conditional=*/false));
      if (accept_name("if")) {
        TROUPE_ASSIGN_OR_RETURN(expr_ptr filter, or_expression(false));
        s->conditions.push_back(std::move(filter));
      }
      if (is_name("recursive")) return error(line(), "recursive loops are not supported");
      TROUPE_RETURN_IF_ERROR(end_of_tag());
      std::string ended;
      TROUPE_ASSIGN_OR_RETURN(body b, statements({"else", "endfor"}, &ended));
      s->bodies.push_back(std::move(b));
      if (ended == "else") {
        TROUPE_RETURN_IF_ERROR(end_of_tag());
        TROUPE_ASSIGN_OR_RETURN(body e, statements({"endfor"}, &ended));
        s->bodies.push_back(std::move(e));
      }
      TROUPE_RETURN_IF_ERROR(end_of_tag());
    } else if (keyword == "set") {
      s->k = stmt::kind::set;
      TROUPE_ASSIGN_OR_RETURN(std::string target, expect_name());
      s->targets.push_back(std::move(target));
      if (accept_op(".")) {
        TROUPE_ASSIGN_OR_RETURN(s->attribute, expect_name());
      }
      if (accept_op("=")) {
        TROUPE_ASSIGN_OR_RETURN(s->value, expression());
        TROUPE_RETURN_IF_ERROR(end_of_tag());
      } else {  // {% set x %}...{% endset %}
        if (!s->attribute.empty()) return error(line(), "a block set takes a plain name");
        TROUPE_RETURN_IF_ERROR(end_of_tag());
        std::string ended;
        TROUPE_ASSIGN_OR_RETURN(body b, statements({"endset"}, &ended));
        s->bodies.push_back(std::move(b));
        TROUPE_RETURN_IF_ERROR(end_of_tag());
      }
    } else if (keyword == "macro") {
      s->k = stmt::kind::macro;
      TROUPE_ASSIGN_OR_RETURN(std::string name, expect_name());
      s->targets.push_back(std::move(name));
      TROUPE_RETURN_IF_ERROR(expect_op("("));
      while (!accept_op(")")) {
        if (!s->params.empty()) TROUPE_RETURN_IF_ERROR(expect_op(","));
        if (accept_op(")")) break;
        TROUPE_ASSIGN_OR_RETURN(std::string param, expect_name());
        expr_ptr fallback;
        if (accept_op("=")) {
          TROUPE_ASSIGN_OR_RETURN(fallback, expression());
        }
        s->params.emplace_back(std::move(param), std::move(fallback));
      }
      TROUPE_RETURN_IF_ERROR(end_of_tag());
      std::string ended;
      TROUPE_ASSIGN_OR_RETURN(body b, statements({"endmacro"}, &ended));
      s->bodies.push_back(std::move(b));
      if (at_ < t_.size() && t_[at_].k == token::kind::name) ++at_;  // {% endmacro name %}
      TROUPE_RETURN_IF_ERROR(end_of_tag());
    } else if (keyword == "break" || keyword == "continue") {
      s->k = keyword == "break" ? stmt::kind::break_ : stmt::kind::continue_;
      TROUPE_RETURN_IF_ERROR(end_of_tag());
    } else if (keyword == "generation") {  // transformers' assistant-mask tag
      s->k = stmt::kind::passthrough;
      TROUPE_RETURN_IF_ERROR(end_of_tag());
      std::string ended;
      TROUPE_ASSIGN_OR_RETURN(body b, statements({"endgeneration"}, &ended));
      s->bodies.push_back(std::move(b));
      TROUPE_RETURN_IF_ERROR(end_of_tag());
    } else {
      return error(at_line, absl::StrCat("unknown statement '", keyword,
                                         "' (troupe reads if, for, set, macro, break, continue, "
                                         "raw and generation)"));
    }
    return s;
  }

  // --- expressions, lowest precedence first ---

  absl::StatusOr<expr_ptr> expression() { return or_expression(true); }

  absl::StatusOr<expr_ptr> or_expression(bool with_conditional) {
    TROUPE_ASSIGN_OR_RETURN(expr_ptr left, and_expression());
    while (is_name("or")) {
      const int l = line();
      ++at_;
      TROUPE_ASSIGN_OR_RETURN(expr_ptr right, and_expression());
      left = binary("or", std::move(left), std::move(right), l);
    }
    if (with_conditional && is_name("if")) {  // a if cond else b
      const int l = line();
      ++at_;
      auto c = make(expr::kind::conditional, l);
      TROUPE_ASSIGN_OR_RETURN(expr_ptr cond, or_expression(false));
      c->items.push_back(std::move(cond));
      c->items.push_back(std::move(left));
      if (accept_name("else")) {
        TROUPE_ASSIGN_OR_RETURN(expr_ptr otherwise, or_expression(true));
        c->items.push_back(std::move(otherwise));
      }
      return c;
    }
    return left;
  }

  absl::StatusOr<expr_ptr> and_expression() {
    TROUPE_ASSIGN_OR_RETURN(expr_ptr left, not_expression());
    while (is_name("and")) {
      const int l = line();
      ++at_;
      TROUPE_ASSIGN_OR_RETURN(expr_ptr right, not_expression());
      left = binary("and", std::move(left), std::move(right), l);
    }
    return left;
  }

  absl::StatusOr<expr_ptr> not_expression() {
    if (is_name("not")) {
      const int l = line();
      ++at_;
      TROUPE_ASSIGN_OR_RETURN(expr_ptr operand, not_expression());
      return unary("not", std::move(operand), l);
    }
    return comparison();
  }

  absl::StatusOr<expr_ptr> comparison() {
    TROUPE_ASSIGN_OR_RETURN(expr_ptr left, sum());
    while (true) {
      const int l = line();
      std::string op;
      for (const char* o : {"==", "!=", "<", ">", "<=", ">="})
        if (is_op(o)) op = o;
      if (!op.empty()) {
        ++at_;
      } else if (is_name("in")) {
        op = "in";
        ++at_;
      } else if (is_name("not") && at_ + 1 < t_.size() && t_[at_ + 1].k == token::kind::name &&
                 t_[at_ + 1].text == "in") {
        op = "not in";
        at_ += 2;
      } else {
        return left;
      }
      TROUPE_ASSIGN_OR_RETURN(expr_ptr right, sum());
      left = binary(op, std::move(left), std::move(right), l);
    }
  }

  absl::StatusOr<expr_ptr> sum() {
    TROUPE_ASSIGN_OR_RETURN(expr_ptr left, concat());
    while (is_op("+") || is_op("-")) {
      const std::string op = t_[at_].text;
      const int l = line();
      ++at_;
      TROUPE_ASSIGN_OR_RETURN(expr_ptr right, concat());
      left = binary(op, std::move(left), std::move(right), l);
    }
    return left;
  }

  absl::StatusOr<expr_ptr> concat() {
    TROUPE_ASSIGN_OR_RETURN(expr_ptr left, product());
    while (is_op("~")) {
      const int l = line();
      ++at_;
      TROUPE_ASSIGN_OR_RETURN(expr_ptr right, product());
      left = binary("~", std::move(left), std::move(right), l);
    }
    return left;
  }

  absl::StatusOr<expr_ptr> product() {
    TROUPE_ASSIGN_OR_RETURN(expr_ptr left, power());
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      const std::string op = t_[at_].text;
      const int l = line();
      ++at_;
      TROUPE_ASSIGN_OR_RETURN(expr_ptr right, power());
      left = binary(op, std::move(left), std::move(right), l);
    }
    return left;
  }

  absl::StatusOr<expr_ptr> power() {
    TROUPE_ASSIGN_OR_RETURN(expr_ptr left, unary_expression(true));
    while (is_op("**")) {
      const int l = line();
      ++at_;
      TROUPE_ASSIGN_OR_RETURN(expr_ptr right, unary_expression(true));
      left = binary("**", std::move(left), std::move(right), l);
    }
    return left;
  }

  absl::StatusOr<expr_ptr> unary_expression(bool with_filter) {
    const int l = line();
    expr_ptr node;
    if (accept_op("-")) {
      TROUPE_ASSIGN_OR_RETURN(expr_ptr operand, unary_expression(false));
      node = unary("-", std::move(operand), l);
    } else if (accept_op("+")) {
      TROUPE_ASSIGN_OR_RETURN(expr_ptr operand, unary_expression(false));
      node = unary("+", std::move(operand), l);
    } else {
      TROUPE_ASSIGN_OR_RETURN(node, primary());
    }
    TROUPE_ASSIGN_OR_RETURN(node, postfix(std::move(node)));
    if (with_filter) {
      TROUPE_ASSIGN_OR_RETURN(node, filters_and_tests(std::move(node)));
    }
    return node;
  }

  absl::Status call_arguments(expr& call) {
    // After '(': positional, then name=value (call.items[0] is the callee or the filtered value).
    bool first = true;
    while (!accept_op(")")) {
      if (!first) {
        TROUPE_RETURN_IF_ERROR(expect_op(","));
        if (accept_op(")")) break;
      }
      first = false;
      if (at_ + 1 < t_.size() && t_[at_].k == token::kind::name &&
          t_[at_ + 1].k == token::kind::op && t_[at_ + 1].text == "=") {
        std::string name = t_[at_].text;
        at_ += 2;
        TROUPE_ASSIGN_OR_RETURN(expr_ptr v, expression());
        call.keywords.emplace_back(std::move(name), std::move(v));
      } else {
        if (!call.keywords.empty())
          return error(line(), "a positional argument after a keyword one");
        TROUPE_ASSIGN_OR_RETURN(expr_ptr v, expression());
        call.items.push_back(std::move(v));
      }
    }
    return absl::OkStatus();
  }

  absl::StatusOr<expr_ptr> postfix(expr_ptr node) {
    while (true) {
      const int l = line();
      if (accept_op(".")) {
        auto a = make(expr::kind::attribute, l);
        if (at_ < t_.size() && t_[at_].k == token::kind::integer) {  // x.0 as Jinja allows
          a->k = expr::kind::subscript;
          a->items.push_back(std::move(node));
          auto index = make(expr::kind::literal, l);
          index->literal = value(static_cast<int64_t>(std::stoll(t_[at_++].text)));
          a->items.push_back(std::move(index));
          node = std::move(a);
          continue;
        }
        TROUPE_ASSIGN_OR_RETURN(a->text, expect_name());
        a->items.push_back(std::move(node));
        node = std::move(a);
      } else if (accept_op("[")) {
        TROUPE_ASSIGN_OR_RETURN(node, subscript(std::move(node), l));
      } else if (accept_op("(")) {
        auto c = make(expr::kind::call, l);
        c->items.push_back(std::move(node));
        TROUPE_RETURN_IF_ERROR(call_arguments(*c));
        node = std::move(c);
      } else {
        return node;
      }
    }
  }

  absl::StatusOr<expr_ptr> subscript(expr_ptr object, int l) {
    // [index] or [start:stop:step], any part absent.
    expr_ptr parts[3];
    int colons = 0;
    while (!is_op("]")) {
      if (accept_op(":")) {
        if (++colons > 2) return error(l, "a slice has at most two ':'");
        continue;
      }
      if (parts[colons]) return error(line(), absl::StrCat("expected ':' or ']'", here()));
      TROUPE_ASSIGN_OR_RETURN(parts[colons], expression());
    }
    TROUPE_RETURN_IF_ERROR(expect_op("]"));
    if (colons == 0) {
      if (!parts[0]) return error(l, "an empty subscript []");
      auto s = make(expr::kind::subscript, l);
      s->items.push_back(std::move(object));
      s->items.push_back(std::move(parts[0]));
      return s;
    }
    auto s = make(expr::kind::slice, l);
    s->items.push_back(std::move(object));
    for (auto& p : parts)
      s->items.push_back(std::move(p));
    return s;
  }

  absl::StatusOr<expr_ptr> filters_and_tests(expr_ptr node) {
    while (true) {
      const int l = line();
      if (accept_op("|")) {
        auto f = make(expr::kind::filter, l);
        TROUPE_ASSIGN_OR_RETURN(f->text, expect_name());
        f->items.push_back(std::move(node));
        if (accept_op("(")) TROUPE_RETURN_IF_ERROR(call_arguments(*f));
        node = std::move(f);
      } else if (accept_name("is")) {
        auto t = make(expr::kind::test, l);
        t->negated = accept_name("not");
        TROUPE_ASSIGN_OR_RETURN(t->text, expect_name());
        t->items.push_back(std::move(node));
        if (accept_op("(")) {
          TROUPE_RETURN_IF_ERROR(call_arguments(*t));
        } else if (at_ < t_.size() &&
                   (t_[at_].k == token::kind::string || t_[at_].k == token::kind::integer ||
                    t_[at_].k == token::kind::floating ||
                    (t_[at_].k == token::kind::name && t_[at_].text != "and" &&
                     t_[at_].text != "or" && t_[at_].text != "else" && t_[at_].text != "if" &&
                     t_[at_].text != "is" && t_[at_].text != "in" && t_[at_].text != "not"))) {
          // `is divisibleby 3`, `is sameas false`: one argument without parentheses.
          TROUPE_ASSIGN_OR_RETURN(expr_ptr arg, primary());
          TROUPE_ASSIGN_OR_RETURN(arg, postfix(std::move(arg)));
          t->items.push_back(std::move(arg));
        }
        node = std::move(t);
      } else {
        return node;
      }
    }
  }

  absl::StatusOr<expr_ptr> primary() {
    if (at_ >= t_.size()) return error(line(), "an expression is missing at the end");
    const token& tok = t_[at_];
    const int l = tok.line;
    switch (tok.k) {
      case token::kind::name: {
        ++at_;
        auto e = make(expr::kind::literal, l);
        if (tok.text == "true" || tok.text == "True") {
          e->literal = value(true);
        } else if (tok.text == "false" || tok.text == "False") {
          e->literal = value(false);
        } else if (tok.text == "none" || tok.text == "None") {
          e->literal = value(none{});
        } else {
          e->k = expr::kind::name;
          e->text = tok.text;
        }
        return e;
      }
      case token::kind::string: {
        std::string s;
        while (at_ < t_.size() && t_[at_].k == token::kind::string)  // "a" "b" is "ab"
          s += t_[at_++].text;
        auto e = make(expr::kind::literal, l);
        e->literal = value(std::move(s));
        return e;
      }
      case token::kind::integer: {
        ++at_;
        int64_t v = 0;
        const auto r = std::from_chars(tok.text.data(), tok.text.data() + tok.text.size(), v);
        if (r.ec != std::errc())
          return error(l, absl::StrCat("the number ", tok.text, " is too large"));
        auto e = make(expr::kind::literal, l);
        e->literal = value(v);
        return e;
      }
      case token::kind::floating: {
        ++at_;
        auto e = make(expr::kind::literal, l);
        e->literal = value(std::stod(tok.text));
        return e;
      }
      case token::kind::op:
        if (tok.text == "(") {
          ++at_;
          if (accept_op(")")) return make(expr::kind::list, l);  // ()
          TROUPE_ASSIGN_OR_RETURN(expr_ptr first, expression());
          if (!is_op(",")) {
            TROUPE_RETURN_IF_ERROR(expect_op(")"));
            return first;
          }
          auto tuple = make(expr::kind::list, l);
          tuple->items.push_back(std::move(first));
          while (accept_op(",")) {
            if (is_op(")")) break;
            TROUPE_ASSIGN_OR_RETURN(expr_ptr item, expression());
            tuple->items.push_back(std::move(item));
          }
          TROUPE_RETURN_IF_ERROR(expect_op(")"));
          return tuple;
        }
        if (tok.text == "[") {
          ++at_;
          auto list = make(expr::kind::list, l);
          while (!accept_op("]")) {
            if (!list->items.empty()) {
              TROUPE_RETURN_IF_ERROR(expect_op(","));
              if (accept_op("]")) break;
            }
            TROUPE_ASSIGN_OR_RETURN(expr_ptr item, expression());
            list->items.push_back(std::move(item));
          }
          return list;
        }
        if (tok.text == "{") {
          ++at_;
          auto dict = make(expr::kind::dict, l);
          while (!accept_op("}")) {
            if (!dict->items.empty()) {
              TROUPE_RETURN_IF_ERROR(expect_op(","));
              if (accept_op("}")) break;
            }
            TROUPE_ASSIGN_OR_RETURN(expr_ptr key, expression());
            TROUPE_RETURN_IF_ERROR(expect_op(":"));
            TROUPE_ASSIGN_OR_RETURN(expr_ptr v, expression());
            dict->items.push_back(std::move(key));
            dict->items.push_back(std::move(v));
          }
          return dict;
        }
        break;
      default:
        break;
    }
    return error(l, absl::StrCat("expected an expression", here()));
  }

  static expr_ptr binary(const std::string& op, expr_ptr l, expr_ptr r, int line) {
    auto e = make(expr::kind::binary, line);
    e->text = op;
    e->items.push_back(std::move(l));
    e->items.push_back(std::move(r));
    return e;
  }
  static expr_ptr unary(const std::string& op, expr_ptr operand, int line) {
    auto e = make(expr::kind::unary, line);
    e->text = op;
    e->items.push_back(std::move(operand));
    return e;
  }

  const std::vector<token>& t_;
  size_t at_ = 0;
};

}  // namespace

absl::StatusOr<body> parse(const std::vector<token>& tokens) {
  parser p(tokens);
  return p.statements({}, nullptr);
}

}  // namespace troupe::jinja

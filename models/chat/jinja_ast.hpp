#pragma once

// The syntax tree of a Jinja template: expressions and statements, each with its source line
// for error messages.

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "models/chat/jinja_value.hpp"

namespace troupe::jinja {

struct expr;
using expr_ptr = std::unique_ptr<expr>;

/// An expression. `kind` says which fields are used.
struct expr {
  enum class kind {
    literal,      // value
    name,         // text
    list,         // items (tuples too)
    dict,         // items: key, value, key, value, ...
    attribute,    // items[0].text
    subscript,    // items[0][items[1]]
    slice,        // items[0][items[1]:items[2]:items[3]] (null parts absent)
    call,         // items[0](items[1..], keywords)
    filter,       // items[0] | text(items[1..], keywords)
    test,         // items[0] is [not] text(items[1..])
    unary,        // text: "not", "-", "+"; items[0]
    binary,       // text: the operator; items[0], items[1]
    conditional,  // items[1] if items[0] else items[2] (absent: undefined)
  } k;
  int line = 0;
  value literal;
  std::string text;
  std::vector<expr_ptr> items;
  std::vector<std::pair<std::string, expr_ptr>> keywords;
  bool negated = false;  // a test with "is not"
};

struct stmt;
using stmt_ptr = std::unique_ptr<stmt>;
using body = std::vector<stmt_ptr>;

/// A statement or a piece of template text.
struct stmt {
  enum class kind {
    text,    // text
    output,  // {{ value }}
    if_,     // conditions[i] → bodies[i]; bodies.back() is the else when one more
    for_,    // for targets in value [if condition]: bodies[0], else bodies[1]
    set,     // set targets[0] [. attribute] = value; a block set when value is null
    macro,   // macro targets[0](params) bodies[0]
    break_,
    continue_,
    passthrough,  // a block that renders its body (transformers' {% generation %})
  } k;
  int line = 0;
  std::string text;
  expr_ptr value;
  std::vector<expr_ptr> conditions;
  std::vector<body> bodies;
  std::vector<std::string> targets;
  std::string attribute;                                 // set ns.attribute = ...
  std::vector<std::pair<std::string, expr_ptr>> params;  // a macro's, defaults may be null
};

}  // namespace troupe::jinja

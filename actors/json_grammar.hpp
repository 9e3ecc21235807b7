#pragma once

// Structured output (OpenAI's response_format json_object and json_schema): a JSON schema
// compiled into a grammar, and a matcher that reads a value byte by byte and says which bytes may
// come next, from which the engine masks the tokens that would leave the grammar. The output is
// compact JSON as Python's json.dumps writes it: at most one space after ':' and ',', no other
// whitespace, so that every value ends.
//
// The schema subset: type (one or a list whose members start differently), enum and const (at
// most 64 values), properties (written in the schema's order; those not in required may be left
// out), required, items, minItems, maxItems, minLength, maxLength, and anyOf of objects told
// apart by their first property, a required string const (a tagged union, as a list of function
// calls); title, description, default, examples, $schema and additionalProperties are read as
// annotations (only the declared properties are written). Any other keyword (pattern, format,
// minimum, oneOf, $ref, ...), and any other anyOf, is refused by name. A schema of no type, and
// the values of an object without properties, are any JSON value, nested at most 8 deep; a
// schema may nest 32 levels. Numbers hold at most 16 digits and exponents 2, within a double.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace troupe::actors {

class json_grammar {
 public:
  /// The grammar of `schema` (a JSON schema, its keys in their written order); INVALID_ARGUMENT
  /// naming the keyword and where it is when the schema is outside the subset.
  [[nodiscard]] static absl::StatusOr<std::shared_ptr<const json_grammar>> compile(
      const nlohmann::ordered_json& schema);
  /// compile() of a schema's JSON text.
  [[nodiscard]] static absl::StatusOr<std::shared_ptr<const json_grammar>> compile(
      const std::string& schema_text);

  enum class kind : uint8_t { any, object, array, string, number, literal, choice };
  struct node {
    kind type = kind::any;
    // object: its properties' keys as written ("\"name\""), value nodes and whether required;
    // open: any string keys, any values
    std::vector<std::string> keys;
    std::vector<int> values;
    std::vector<bool> required;
    bool open = false;
    // a tagged union (anyOf): values[0] is the literal of every tag; after the i-th tag, the
    // other properties' values are tagged[i]
    std::vector<std::vector<int>> tagged;
    // array
    int items = -1;
    int min_items = 0;
    int max_items = INT32_MAX;
    // string
    int min_length = 0;
    int max_length = INT32_MAX;
    // number
    bool integer = false;
    // literal: the JSON texts allowed (enum, const, true/false, null)
    std::vector<std::string> literals;
    // choice: alternatives that begin with different bytes
    std::vector<int> options;
  };

  [[nodiscard]] const node& at(int id) const { return nodes_[id]; }
  [[nodiscard]] int root() const { return root_; }

  /// Whether node `id`'s values may begin with byte `b`.
  [[nodiscard]] bool may_begin(int id, uint8_t b) const;

  // The nodes of "any JSON value" (built with every grammar).
  int any_value = -1, any_object = -1, any_array = -1, any_string = -1, any_number = -1,
      any_bool = -1, any_null = -1;

 private:
  friend class schema_compiler;
  std::vector<node> nodes_;
  int root_ = -1;
};

/// A position in a grammar's value, advanced one byte at a time. Cheap to copy: a stack of small
/// frames (and copy-assigning reuses the stack's memory).
class json_matcher {
 public:
  /// At the start of `grammar`'s value; the grammar must outlive the matcher and its copies.
  explicit json_matcher(const json_grammar& grammar);

  /// Reads `b` if the grammar allows it there. On false the matcher is spoiled: try bytes on a
  /// copy.
  [[nodiscard]] bool accept(uint8_t b);
  /// accept() of every byte of `bytes`.
  [[nodiscard]] bool accept(std::string_view bytes);
  /// A whole value has been read (it may still go on: a number's next digit).
  [[nodiscard]] bool complete() const;
  /// Some byte may still follow.
  [[nodiscard]] bool can_continue() const;
  /// Inside a string, between characters: how many more characters it may take; -1 elsewhere.
  [[nodiscard]] int string_room() const;

 private:
  struct frame {
    int node = 0;
    int phase = 0;
    int count = 0;           // string: characters; array: items; object: properties passed
    int pos = 0;             // literal or key: bytes matched; number: digits
    uint64_t mask = 0;       // literal or key: the candidates still matching
    int chosen = -1;         // object: the property whose value is read
    int tag = -1;            // tagged union: the tag its first property was
    uint8_t lo = 0, hi = 0;  // string: the range of the next UTF-8 continuation byte
    int pending = 0;         // string: continuation bytes due
  };
  enum class result { take, refuse, pop_and_retry, retry };

  result step(frame& f, uint8_t b);
  result step_object(frame& f, uint8_t b);
  result step_array(frame& f, uint8_t b);
  result step_string(frame& f, uint8_t b);
  result step_number(frame& f, uint8_t b);
  result step_literal(frame& f, uint8_t b);
  void push(int node);
  void child_done();
  [[nodiscard]] bool accepting(const frame& f) const;
  [[nodiscard]] uint64_t key_candidates(const json_grammar::node& n, int from) const;

  const json_grammar* grammar_;
  std::vector<frame> stack_;
};

}  // namespace troupe::actors

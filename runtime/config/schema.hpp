#pragma once

// Declarative schemas that validate a YAML map and fill a C++ struct in one pass.
//
//   object_schema<restart_spec> s;
//   s.field("max", &restart_spec::max).range(0, 1000).help("restarts before giving up");
//
// One declaration drives validation (unknown, missing, mistyped and out-of-range keys, each
// reported with file:line:col and key path), parsing, and writing the resolved config back out.

#include <algorithm>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/base/suggest.hpp"
#include "runtime/config/codec.hpp"

namespace troupe::config {

/// What a field looks like, for reference documentation and `troupe plugins list`.
struct field_info {
  std::string key;
  std::string type;
  bool required = false;
  std::string default_value;
  std::string help;
};

template <class T>
class object_schema;

namespace detail {

template <class M>
struct is_optional : std::false_type {};
template <class M>
struct is_optional<std::optional<M>> : std::true_type {};

template <class T>
class field_base {
 public:
  explicit field_base(std::string key) : key_(std::move(key)) {}
  virtual ~field_base() = default;
  virtual bool parse(const YAML::Node& node, const parse_context& ctx, T& out) const = 0;
  virtual YAML::Node to_node(const T& value) const = 0;
  virtual field_info info(const T& defaults) const = 0;

  const std::string& key() const { return key_; }
  bool is_required() const { return required_; }

 protected:
  std::string key_;
  bool required_ = false;
  std::string help_;
};

}  // namespace detail

/// One key of an object schema, bound to the member `M T::*`. Returned by `object_schema::field`
/// so that constraints can be chained.
template <class T, class M>
class field : public detail::field_base<T> {
 public:
  using parse_fn = std::function<bool(const YAML::Node&, const parse_context&, M&)>;
  using to_node_fn = std::function<YAML::Node(const M&)>;
  using check_fn = std::function<std::optional<std::string>(const M&)>;

  field(std::string key, M T::*member, parse_fn parse, to_node_fn to_node, std::string type)
      : detail::field_base<T>(std::move(key)),
        member_(member),
        parse_(std::move(parse)),
        to_node_(std::move(to_node)),
        type_(std::move(type)) {}

  /// The key must be present; otherwise the struct's default member value is used.
  field& required() {
    this->required_ = true;
    return *this;
  }

  /// One line for reference docs.
  field& help(std::string text) {
    this->help_ = std::move(text);
    return *this;
  }

  /// Numbers must lie in [lo, hi] (an optional one when it is set).
  field& range(M lo, M hi) {
    return check([lo, hi](const M& v) -> std::optional<std::string> {
      if constexpr (detail::is_optional<M>::value) {
        if (!v || (*v >= *lo && *v <= *hi)) return std::nullopt;
        return absl::StrCat("must be between ", *lo, " and ", *hi, ", got ", *v);
      } else {
        if (v >= lo && v <= hi) return std::nullopt;
        return absl::StrCat("must be between ", lo, " and ", hi, ", got ", v);
      }
    });
  }

  /// Strings must be one of `choices`.
  field& one_of(std::vector<std::string> choices) {
    return check([choices = std::move(choices)](const M& v) -> std::optional<std::string> {
      for (const auto& c : choices) {
        if (v == c) return std::nullopt;
      }
      return absl::StrCat("'", v, "' is not allowed. ", suggestion_text(v, choices, "values"));
    });
  }

  /// Strings and lists must not be empty.
  field& non_empty() {
    return check([](const M& v) -> std::optional<std::string> {
      if (!v.empty()) return std::nullopt;
      return std::string("must not be empty");
    });
  }

  /// Any other constraint: return an error message, or nullopt when `v` is fine.
  field& check(check_fn fn) {
    checks_.push_back(std::move(fn));
    return *this;
  }

  bool parse(const YAML::Node& node, const parse_context& ctx, T& out) const override {
    M value = out.*member_;
    if (!parse_(node, ctx, value)) return false;
    for (const auto& fn : checks_) {
      if (auto message = fn(value)) {
        ctx.error(node, *message);
        return false;
      }
    }
    out.*member_ = std::move(value);
    return true;
  }

  YAML::Node to_node(const T& value) const override { return to_node_(value.*member_); }

  field_info info(const T& defaults) const override {
    field_info fi{this->key_, type_, this->required_, {}, this->help_};
    if (!this->required_) {
      YAML::Emitter out;
      out << YAML::Flow << to_node_(defaults.*member_);
      fi.default_value = out.c_str();
    }
    return fi;
  }

 private:
  M T::*member_;
  parse_fn parse_;
  to_node_fn to_node_;
  std::string type_;
  std::vector<check_fn> checks_;
};

/// A schema for a YAML map that fills a `T`. Fields not present keep `T{}`'s values.
template <class T>
class object_schema {
 public:
  /// A field whose value type has a `codec`.
  template <class M>
  field<T, M>& add(std::string key, M T::*member) {
    return emplace<M>(std::move(key), member, &codec<M>::parse, &codec<M>::to_node,
                      codec<M>::expected);
  }

  /// A field holding a nested map described by `nested`.
  template <class M>
  field<T, M>& add(std::string key, M T::*member, object_schema<M> nested) {
    auto schema = std::make_shared<object_schema<M>>(std::move(nested));
    return emplace<M>(
        std::move(key), member,
        [schema](const YAML::Node& n, const parse_context& c, M& m) {
          return schema->parse(n, c, m);
        },
        [schema](const M& m) { return schema->to_node(m); }, "a map");
  }

  /// An optional nested map: absent or null (`key: null`, so `--set a.key=null` removes it)
  /// stays `nullopt` (and is left out of the resolved config).
  template <class M>
  field<T, std::optional<M>>& add(std::string key, std::optional<M> T::*member,
                                  object_schema<M> nested) {
    auto schema = std::make_shared<object_schema<M>>(std::move(nested));
    return emplace<std::optional<M>>(
        std::move(key), member,
        [schema](const YAML::Node& n, const parse_context& c, std::optional<M>& m) {
          if (n.IsNull()) {
            m.reset();
            return true;
          }
          M value{};
          if (!schema->parse(n, c, value)) return false;
          m = std::move(value);
          return true;
        },
        [schema](const std::optional<M>& m) { return m ? schema->to_node(*m) : YAML::Node(); },
        "a map");
  }

  /// A constraint across fields, checked after they parsed; reported at the map itself.
  object_schema& check(std::function<std::optional<std::string>(const T&)> fn) {
    checks_.push_back(std::move(fn));
    return *this;
  }

  /// A map of named entries (`roles: {name: {...}}`) kept in document order; each entry's key
  /// goes into `name_member`.
  template <class M>
  field<T, std::vector<M>>& add_named(std::string key, std::vector<M> T::*member,
                                      std::string M::*name_member, object_schema<M> entry) {
    auto schema = std::make_shared<object_schema<M>>(std::move(entry));
    auto parse = [schema, name_member](const YAML::Node& n, const parse_context& c,
                                       std::vector<M>& out) {
      if (!n.IsMap()) {
        c.error(n, absl::StrCat("expected a map of named entries, got ", describe_node(n)));
        return false;
      }
      bool ok = true;
      std::vector<M> entries;
      for (const auto& kv : n) {
        M entry{};
        entry.*name_member = kv.first.Scalar();
        ok = schema->parse(kv.second, c.child(kv.first.Scalar()), entry) && ok;
        entries.push_back(std::move(entry));
      }
      if (ok) out = std::move(entries);
      return ok;
    };
    auto to_node = [schema, name_member](const std::vector<M>& v) {
      YAML::Node node(YAML::NodeType::Map);
      for (const auto& entry : v)
        node[entry.*name_member] = schema->to_node(entry);
      return node;
    };
    return emplace<std::vector<M>>(std::move(key), member, parse, to_node, "a map");
  }

  /// Accepts one extra key whose name depends on the parsed value (the app's own section, named
  /// after the app); its subtree is kept raw in `member`.
  object_schema& add_section_named_by(std::function<std::string(const T&)> key_of,
                                      raw_node T::*member) {
    section_key_of_ = std::move(key_of);
    section_member_ = member;
    return *this;
  }

  /// Parses `node` into `out`. Every problem is reported through `ctx`; returns false if any.
  bool parse(const YAML::Node& node, const parse_context& ctx, T& out) const {
    if (!node.IsDefined() || node.IsNull()) return parse(YAML::Node(YAML::NodeType::Map), ctx, out);
    if (!node.IsMap()) {
      ctx.error(node, absl::StrCat("expected a map, got ", describe_node(node)));
      return false;
    }
    bool ok = true;
    for (const auto& f : fields_) {
      const YAML::Node value = node[f->key()];
      if (!value.IsDefined()) {
        if (f->is_required()) {
          ctx.error(node, absl::StrCat("missing required key '", f->key(), "'"));
          ok = false;
        }
        continue;
      }
      ok = f->parse(value, ctx.child(f->key()), out) && ok;
    }
    if (ok) {
      for (const auto& fn : checks_) {
        if (auto message = fn(out)) {
          ctx.error(node, *message);
          ok = false;
        }
      }
    }
    std::vector<std::string> valid = keys();
    if (section_key_of_) {
      const std::string section = section_key_of_(out);
      if (!section.empty()) {
        valid.push_back(section);
        if (node[section].IsDefined()) out.*section_member_ = {node[section]};
      }
    }
    return check_keys(node, ctx, valid) && ok;
  }

  /// Writes `value` back as YAML (the resolved config: every default made explicit).
  YAML::Node to_node(const T& value) const {
    YAML::Node node(YAML::NodeType::Map);
    for (const auto& f : fields_) {
      YAML::Node v = f->to_node(value);
      if (!v.IsNull()) node[f->key()] = v;  // unset optional parts stay out of the output
    }
    if (section_key_of_) {
      const std::string section = section_key_of_(value);
      const YAML::Node& raw = (value.*section_member_).node;
      if (!section.empty() && raw.IsDefined()) node[section] = raw;
    }
    return node;
  }

  /// The keys this schema accepts, in declaration order.
  std::vector<std::string> keys() const {
    std::vector<std::string> k;
    for (const auto& f : fields_)
      k.push_back(f->key());
    return k;
  }

  /// Field descriptions with defaults taken from `T{}`.
  std::vector<field_info> describe() const {
    T defaults{};
    std::vector<field_info> out;
    for (const auto& f : fields_)
      out.push_back(f->info(defaults));
    return out;
  }

 private:
  template <class M, class P, class W>
  field<T, M>& emplace(std::string key, M T::*member, P parse, W to_node, std::string type) {
    auto f = std::make_shared<field<T, M>>(std::move(key), member, std::move(parse),
                                           std::move(to_node), std::move(type));
    field<T, M>& ref = *f;
    fields_.push_back(std::move(f));
    return ref;
  }

  static bool check_keys(const YAML::Node& node, const parse_context& ctx,
                         const std::vector<std::string>& valid) {
    std::vector<std::string> seen;
    bool ok = true;
    for (const auto& kv : node) {
      const std::string key = kv.first.IsScalar() ? kv.first.Scalar() : std::string();
      if (std::find(seen.begin(), seen.end(), key) != seen.end()) {
        ctx.child(key).error(kv.first, "duplicate key; each key may appear once in a map");
        ok = false;
        continue;
      }
      seen.push_back(key);
      if (std::find(valid.begin(), valid.end(), key) == valid.end()) {
        ctx.child(key).error(kv.first, absl::StrCat("unknown key '", key, "'. ",
                                                    suggestion_text(key, valid, "keys here")));
        ok = false;
      }
    }
    return ok;
  }

  std::vector<std::shared_ptr<detail::field_base<T>>> fields_;
  std::vector<std::function<std::optional<std::string>(const T&)>> checks_;
  std::function<std::string(const T&)> section_key_of_;
  raw_node T::*section_member_ = nullptr;
};

}  // namespace troupe::config

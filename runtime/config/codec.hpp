#pragma once

// How each value type a config schema can hold is read from, and written back to, YAML.

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "runtime/config/parse_context.hpp"

namespace troupe::config {

/// A YAML subtree kept as-is for a second pass, e.g. role options validated once the role's
/// implementation (maybe from a plugin) is known.
struct raw_node {
  YAML::Node node;
};

/// `codec<T>` reads a `T` from a node (reporting errors through the context) and writes it back.
template <class T, class Enable = void>
struct codec;

template <>
struct codec<bool> {
  static constexpr const char* expected = "true or false";
  static bool parse(const YAML::Node& node, const parse_context& ctx, bool& out) {
    if (node.IsScalar()) {
      std::string s = absl::AsciiStrToLower(node.Scalar());
      if (s == "true" || s == "yes" || s == "on") return out = true, true;
      if (s == "false" || s == "no" || s == "off") return out = false, true;
    }
    ctx.error(node, absl::StrCat("expected ", expected, ", got ", describe_node(node)));
    return false;
  }
  static YAML::Node to_node(bool v) { return YAML::Node(v); }
};

template <class T>
struct codec<T, std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, bool>>> {
  static constexpr const char* expected = "an integer";
  static bool parse(const YAML::Node& node, const parse_context& ctx, T& out) {
    int64_t wide = 0;
    if (!node.IsScalar() || !absl::SimpleAtoi(node.Scalar(), &wide)) {
      ctx.error(node, absl::StrCat("expected ", expected, ", got ", describe_node(node)));
      return false;
    }
    if (wide < static_cast<int64_t>(std::numeric_limits<T>::min()) ||
        (wide > 0 &&
         static_cast<uint64_t>(wide) > static_cast<uint64_t>(std::numeric_limits<T>::max()))) {
      ctx.error(node, absl::StrCat("value ", wide, " does not fit (allowed ",
                                   +std::numeric_limits<T>::min(), " to ",
                                   +std::numeric_limits<T>::max(), ")"));
      return false;
    }
    out = static_cast<T>(wide);
    return true;
  }
  static YAML::Node to_node(T v) { return YAML::Node(v); }
};

template <>
struct codec<double> {
  static constexpr const char* expected = "a number";
  static bool parse(const YAML::Node& node, const parse_context& ctx, double& out) {
    if (!node.IsScalar() || !absl::SimpleAtod(node.Scalar(), &out)) {
      ctx.error(node, absl::StrCat("expected ", expected, ", got ", describe_node(node)));
      return false;
    }
    return true;
  }
  static YAML::Node to_node(double v) { return YAML::Node(v); }
};

template <>
struct codec<std::string> {
  static constexpr const char* expected = "a string";
  static bool parse(const YAML::Node& node, const parse_context& ctx, std::string& out) {
    if (!node.IsScalar()) {
      ctx.error(node, absl::StrCat("expected ", expected, ", got ", describe_node(node)));
      return false;
    }
    out = node.Scalar();
    return true;
  }
  static YAML::Node to_node(const std::string& v) { return YAML::Node(v); }
};

template <class T>
struct codec<std::vector<T>> {
  static constexpr const char* expected = "a list";
  static bool parse(const YAML::Node& node, const parse_context& ctx, std::vector<T>& out) {
    if (!node.IsSequence()) {
      ctx.error(node, absl::StrCat("expected a list, got ", describe_node(node), " (each item ",
                                   codec<T>::expected, ")"));
      return false;
    }
    std::vector<T> values(node.size());
    bool ok = true;
    for (size_t i = 0; i < node.size(); ++i) {
      ok = codec<T>::parse(node[i], ctx.element(i), values[i]) && ok;
    }
    if (ok) out = std::move(values);
    return ok;
  }
  static YAML::Node to_node(const std::vector<T>& v) {
    YAML::Node node(YAML::NodeType::Sequence);
    for (const auto& x : v)
      node.push_back(codec<T>::to_node(x));
    return node;
  }
};

/// A value that may be left unset: absent or null (`--set a.key=null`) is nullopt, and an unset
/// value stays out of the resolved config.
template <class T>
struct codec<std::optional<T>> {
  static constexpr const char* expected = codec<T>::expected;
  static bool parse(const YAML::Node& node, const parse_context& ctx, std::optional<T>& out) {
    if (node.IsNull()) {
      out.reset();
      return true;
    }
    T value{};
    if (!codec<T>::parse(node, ctx, value)) return false;
    out = std::move(value);
    return true;
  }
  static YAML::Node to_node(const std::optional<T>& v) {
    return v ? codec<T>::to_node(*v) : YAML::Node();
  }
};

template <>
struct codec<raw_node> {
  static constexpr const char* expected = "a map";
  static bool parse(const YAML::Node& node, const parse_context&, raw_node& out) {
    out.node = node;
    return true;
  }
  static YAML::Node to_node(const raw_node& v) { return v.node; }
};

}  // namespace troupe::config

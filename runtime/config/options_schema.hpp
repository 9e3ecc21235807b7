#pragma once

#include <memory>

#include "runtime/config/schema.hpp"

namespace troupe::config {

/// A type-erased object schema: how the registry holds the options of roles and apps whose types
/// the core does not know (they may come from plugins).
class options_schema {
 public:
  virtual ~options_schema() = default;

  /// Parses a role's or app's options; nullptr when `ctx` received errors.
  [[nodiscard]] virtual std::shared_ptr<const void> parse(const YAML::Node& node,
                                                          const parse_context& ctx) const = 0;

  /// Writes parsed options (as returned by `parse`) back to YAML.
  [[nodiscard]] virtual YAML::Node to_node(const void* options) const = 0;

  /// The accepted keys with types, defaults and help.
  [[nodiscard]] virtual std::vector<field_info> describe() const = 0;
};

/// The `options_schema` of a concrete options struct `T`.
template <class T>
class typed_options_schema final : public options_schema {
 public:
  explicit typed_options_schema(object_schema<T> schema) : schema_(std::move(schema)) {}

  std::shared_ptr<const void> parse(const YAML::Node& node,
                                    const parse_context& ctx) const override {
    auto options = std::make_shared<T>();
    if (!schema_.parse(node, ctx, *options)) return nullptr;
    return options;
  }

  YAML::Node to_node(const void* options) const override {
    return schema_.to_node(*static_cast<const T*>(options));
  }

  std::vector<field_info> describe() const override { return schema_.describe(); }

 private:
  object_schema<T> schema_;
};

/// Wraps `schema` for the registry.
template <class T>
std::shared_ptr<const options_schema> make_options_schema(object_schema<T> schema) {
  return std::make_shared<typed_options_schema<T>>(std::move(schema));
}

}  // namespace troupe::config

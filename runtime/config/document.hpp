#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "yaml-cpp/yaml.h"

namespace troupe::config {

/// A YAML configuration as loaded from a file, with `--set` overrides applied on top.
///
/// Keeps what an error message needs to point at the right place: the file name for nodes that
/// came from the file (yaml-cpp keeps their line and column) and the override text for nodes that
/// came from `--set`.
class document {
 public:
  /// Parses `path`. Syntax errors name file:line:column.
  [[nodiscard]] static absl::StatusOr<document> load_file(const std::string& path);

  /// Parses `text`; `name` stands in for the file name in messages.
  [[nodiscard]] static absl::StatusOr<document> load_string(absl::string_view text,
                                                            std::string name);

  /// Applies one `key.path=value` override. The value is parsed as YAML, so `3`, `true`,
  /// `[a, b]` and `{x: 1}` keep their types. Missing maps along the path are created.
  [[nodiscard]] absl::Status apply_override(absl::string_view assignment);

  /// The root node.
  [[nodiscard]] const YAML::Node& root() const { return root_; }

  /// The file name given at load time.
  [[nodiscard]] const std::string& name() const { return name_; }

  /// Where the node at `path` came from: "file:line:col", or "--set a.b=c" for overrides.
  [[nodiscard]] std::string where(absl::string_view path, const YAML::Node& node) const;

 private:
  struct override_entry {
    std::string path;
    std::string text;
  };

  document(YAML::Node root, std::string name) : root_(std::move(root)), name_(std::move(name)) {}

  YAML::Node root_;
  std::string name_;
  std::vector<override_entry> overrides_;
};

}  // namespace troupe::config

#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "yaml-cpp/yaml.h"

namespace troupe::config {

class document;

/// Collects located config errors so that one run reports all of them, not just the first.
class diagnostics {
 public:
  /// Records one error; `where` is "file:line:col" or "--set ...", `path` the key path.
  void error(std::string where, absl::string_view path, absl::string_view message);

  [[nodiscard]] bool empty() const { return errors_.empty(); }
  [[nodiscard]] const std::vector<std::string>& errors() const { return errors_; }

  /// OK when no error was recorded; otherwise InvalidArgument with one error per line.
  [[nodiscard]] absl::Status status() const;

 private:
  std::vector<std::string> errors_;
};

/// The position of a value being parsed: its key path and the document it came from.
class parse_context {
 public:
  parse_context(const document& doc, diagnostics& diag, std::string path = {})
      : doc_(&doc), diag_(&diag), path_(std::move(path)) {}

  /// The context of `key` inside the current map.
  [[nodiscard]] parse_context child(absl::string_view key) const;

  /// The context of element `index` inside the current list.
  [[nodiscard]] parse_context element(size_t index) const;

  /// Records an error located at `node` (file:line:col or the `--set` that made it).
  void error(const YAML::Node& node, absl::string_view message) const;

  [[nodiscard]] const std::string& path() const { return path_; }
  [[nodiscard]] const document& doc() const { return *doc_; }
  [[nodiscard]] diagnostics& diag() const { return *diag_; }

 private:
  const document* doc_;
  diagnostics* diag_;
  std::string path_;
};

/// Short human description of a node's shape for "expected X, got Y" messages.
[[nodiscard]] std::string describe_node(const YAML::Node& node);

}  // namespace troupe::config

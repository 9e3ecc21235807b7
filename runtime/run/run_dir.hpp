#pragma once

#include <filesystem>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace troupe::run {

/// A run's directory: the resolved config (`config.yaml`), the event log (`events.jsonl`), the
/// human log (`troupe.log`), the summary (`summary.json`) and whatever the app writes.
class run_dir {
 public:
  /// Uses `requested` (which must be missing or empty), or creates `runs/<app>-<date>-<time>`
  /// under the working directory, adding "-2", "-3", ... if that exists.
  [[nodiscard]] static absl::StatusOr<run_dir> create(const std::optional<std::string>& requested,
                                                      absl::string_view app);

  [[nodiscard]] const std::filesystem::path& path() const { return path_; }
  [[nodiscard]] std::filesystem::path file(absl::string_view name) const {
    return path_ / std::string(name);
  }

  /// Writes `contents` to `name` inside the directory.
  [[nodiscard]] absl::Status write_file(absl::string_view name, absl::string_view contents) const;

 private:
  explicit run_dir(std::filesystem::path path) : path_(std::move(path)) {}
  std::filesystem::path path_;
};

}  // namespace troupe::run

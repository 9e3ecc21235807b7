#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "runtime/actor/message_types.hpp"

namespace troupe::actors {

/// Options of the built-in `source/text` role.
struct text_source_options {
  /// A text file, or a directory whose regular files are read in name order (symlinks and
  /// `*.dat` index files are skipped, as in the fortunes package).
  std::string path;
  /// A line equal to this separates records (fortune files use "%"); empty: one record per line.
  std::string delimiter = "%";
  /// Use only the first `limit` records; 0 reads all.
  int64_t limit = 0;
};

/// Records read from text files, served by position so that a restarted source continues
/// exactly where the stream was.
class text_source {
 public:
  /// Reads every record under `options.path`.
  [[nodiscard]] static absl::StatusOr<text_source> open(const text_source_options& options);

  /// Up to `max` records starting at `first`, numbered from `first`; empty past the end.
  [[nodiscard]] actor::source_batch batch(uint64_t first, uint32_t max) const;

  [[nodiscard]] uint64_t size() const { return records_.size(); }

 private:
  explicit text_source(std::vector<std::string> records) : records_(std::move(records)) {}
  std::vector<std::string> records_;
};

/// The text files under `path`: the file itself, or a directory's regular files in name order
/// (symlinks and `*.dat` index files skipped, as in the fortunes package).
[[nodiscard]] absl::StatusOr<std::vector<std::string>> text_files(const std::string& path);

/// Splits `text` into records separated by lines equal to `delimiter` (or into lines when
/// `delimiter` is empty), dropping empty records and each record's final newline.
void split_records(absl::string_view text, absl::string_view delimiter,
                   std::vector<std::string>& out);

}  // namespace troupe::actors

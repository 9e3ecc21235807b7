#include "actors/text_source.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "runtime/base/status.hpp"

namespace troupe::actors {
namespace fs = std::filesystem;

void split_records(absl::string_view text, absl::string_view delimiter,
                   std::vector<std::string>& out) {
  std::string record;
  auto flush = [&] {
    if (!record.empty() && record.back() == '\n') record.pop_back();
    if (!record.empty()) out.push_back(std::move(record));
    record.clear();
  };
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    const size_t next = end == absl::string_view::npos ? text.size() : end + 1;
    absl::string_view line =
        text.substr(pos, (end == absl::string_view::npos ? text.size() : end) - pos);
    if (delimiter.empty()) {
      record.assign(line.data(), line.size());
      flush();
    } else if (line == delimiter) {
      flush();
    } else {
      record.append(text.data() + pos, next - pos);
    }
    pos = next;
  }
  flush();
}

absl::StatusOr<std::vector<std::string>> text_files(const std::string& path) {
  std::error_code ec;
  const fs::path root(path);
  std::vector<std::string> files;
  if (fs::is_directory(root, ec)) {
    for (const auto& entry : fs::directory_iterator(root, ec)) {
      if (entry.is_symlink() || !entry.is_regular_file()) continue;
      if (entry.path().extension() == ".dat") continue;
      files.push_back(entry.path().string());
    }
    std::sort(files.begin(), files.end());
    if (files.empty()) {
      return absl::NotFoundError(absl::StrCat(path, ": the directory holds no text files"));
    }
  } else if (fs::is_regular_file(root, ec)) {
    files.push_back(path);
  } else {
    return absl::NotFoundError(absl::StrCat(path, ": no such file or directory"));
  }
  return files;
}

absl::StatusOr<text_source> text_source::open(const text_source_options& options) {
  TROUPE_ASSIGN_OR_RETURN(std::vector<std::string> files, text_files(options.path));
  std::vector<std::string> records;
  for (const auto& file : files) {
    std::ifstream in(file, std::ios::binary);
    if (!in) return absl::UnavailableError(absl::StrCat(file, ": cannot read"));
    std::stringstream text;
    text << in.rdbuf();
    split_records(text.str(), options.delimiter, records);
    if (options.limit > 0 && static_cast<int64_t>(records.size()) >= options.limit) {
      records.resize(options.limit);
      break;
    }
  }
  if (records.empty()) {
    return absl::NotFoundError(absl::StrCat(options.path, ": no records found"));
  }
  return text_source(std::move(records));
}

actor::source_batch text_source::batch(uint64_t first, uint32_t max) const {
  actor::source_batch out;
  out.total = static_cast<int64_t>(records_.size());
  for (uint64_t i = first; i < records_.size() && i - first < max; ++i) {
    out.items.push_back({i, records_[i]});
  }
  return out;
}

}  // namespace troupe::actors

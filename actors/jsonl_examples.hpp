#pragma once

// Reading a data set of JSONL examples (supervised examples, preference pairs): shared by
// sft_data.cpp and preference_data.cpp.

#include <fstream>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "actors/text_source.hpp"
#include "runtime/base/status.hpp"

namespace troupe::actors {

/// The examples of the JSONL files under `path` (text_files() order), each non-blank line made
/// one by `parse` (whose INVALID_ARGUMENT gets FILE:LINE in front), split into the training
/// examples and the last `val_fraction` of them held out; INVALID_ARGUMENT when that leaves
/// either side empty.
template <class T>
absl::StatusOr<std::pair<std::vector<T>, std::vector<T>>> read_jsonl_examples(
    const std::string& path, double val_fraction,
    const std::function<absl::StatusOr<T>(const std::string& line)>& parse) {
  TROUPE_ASSIGN_OR_RETURN(std::vector<std::string> files, text_files(path));
  std::vector<T> examples;
  for (const auto& file : files) {
    std::ifstream in(file, std::ios::binary);
    if (!in) return absl::UnavailableError(absl::StrCat(file, ": cannot read"));
    std::string line;
    for (int number = 1; std::getline(in, line); ++number) {
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;  // a blank line
      absl::StatusOr<T> e = parse(line);
      if (!e.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat(file, ":", number, ": ", e.status().message()));
      }
      examples.push_back(*std::move(e));
    }
  }
  const size_t val = static_cast<size_t>(static_cast<double>(examples.size()) * val_fraction);
  if (val == 0 || val == examples.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": ", examples.size(), " examples cannot give a training and a validation set with ",
        "val_fraction ", val_fraction, "; name more examples in data.path"));
  }
  std::vector<T> held(std::make_move_iterator(examples.end() - val),
                      std::make_move_iterator(examples.end()));
  examples.resize(examples.size() - val);
  return std::pair{std::move(examples), std::move(held)};
}

}  // namespace troupe::actors

#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "runtime/tensor/safetensors.hpp"

namespace troupe::checkpoint {

/// A file staged into a checkpoint: its name in the step directory, size and sha256.
struct file_record {
  std::string name;
  uint64_t bytes = 0;
  std::string sha256;  ///< lowercase hex
};

/// A loaded checkpoint: step, the writer's metadata, and every file's tensors, verified.
struct checkpoint {
  int64_t step = 0;
  std::string dir;
  nlohmann::json meta;
  std::map<std::string, tensor::named_tensors> files;
};

/// Checkpoints under one root directory (DESIGN.md "State and checkpoints"):
///
///   ROOT/step-N/            a committed checkpoint: safetensors files + manifest.json
///   ROOT/.step-N.partial/   files being written; never read
///
/// Writers (one per rank) stage their files into the partial directory; one committer writes
/// manifest.json (step, meta, the size and sha256 of every file) and renames the directory to
/// step-N. The rename is atomic, so a torn write is never visible; the newest `keep` are kept,
/// an older one renamed to a hidden name before it is deleted, so that a process killed while
/// deleting leaves no half-deleted step-N either.
class checkpoint_store {
 public:
  explicit checkpoint_store(std::string root) : root_(std::move(root)) {}

  [[nodiscard]] const std::string& root() const { return root_; }

  /// Writes `contents` as safetensors file `name` into step `step`'s partial directory, synced
  /// to disk; returns its record for the manifest.
  [[nodiscard]] absl::StatusOr<file_record> stage(int64_t step, const std::string& name,
                                                  const tensor::named_tensors& contents) const;
  /// Writes the manifest and makes step `step` visible; then removes all but the newest `keep`.
  [[nodiscard]] absl::Status commit(int64_t step, const std::vector<file_record>& files,
                                    const nlohmann::json& meta, int keep) const;

  /// The committed steps, oldest first.
  [[nodiscard]] std::vector<int64_t> steps() const;
  /// Reads step directory `dir`, checking every file against the manifest (presence, size,
  /// sha256) before parsing it. Errors name the checkpoint and the file.
  [[nodiscard]] static absl::StatusOr<checkpoint> read(const std::string& dir);
  /// The newest checkpoint that reads cleanly; each newer damaged one is skipped with a warning
  /// that names it and says why. NotFound when there is none.
  [[nodiscard]] absl::StatusOr<checkpoint> read_latest(std::vector<std::string>* warnings) const;

  [[nodiscard]] std::string step_dir(int64_t step) const;

 private:
  [[nodiscard]] std::string partial_dir(int64_t step) const;
  std::string root_;
};

/// The checkpoint root a run directory names: RUN_DIR/checkpoints when it exists, else the
/// directory itself (what `--resume DIR` and a `checkpoint:` setting read).
[[nodiscard]] std::string checkpoint_root_of(const std::string& dir);

/// The sha256 of a file's bytes, lowercase hex.
[[nodiscard]] absl::StatusOr<std::string> sha256_file(const std::string& path);

}  // namespace troupe::checkpoint

#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/tensor/tensor.hpp"

namespace troupe::tensor {

/// A safetensors file mapped into memory read-only: its header checked whole when it is opened
/// (every tensor's dtype, shape and offsets; the tensors tile the data exactly), its tensors'
/// bytes read in place, so that a checkpoint of many gigabytes is never copied whole. Reads
/// F32, BF16, F16 and I32 (Hugging Face checkpoints come in F32, BF16 and F16).
class mapped_safetensors {
 public:
  /// One tensor of the file.
  struct entry {
    std::string name;
    std::string dtype;  ///< as the file spells it: "F32", "BF16", "F16" or "I32"
    shape_t shape;
    const void* data = nullptr;  ///< inside the mapping, little-endian
    uint64_t bytes = 0;
  };

  /// Maps `path`. NOT_FOUND when it cannot be opened; DATA_LOSS naming the file (and the
  /// tensor) for anything inconsistent: too short, a header that does not fit or is not a JSON
  /// object, a dtype it does not read, offsets that disagree with the shape, overlap, a hole, or
  /// data past the end (a truncated file).
  [[nodiscard]] static absl::StatusOr<mapped_safetensors> open(const std::string& path);

  mapped_safetensors(mapped_safetensors&& other) noexcept;
  mapped_safetensors& operator=(mapped_safetensors&& other) noexcept;
  mapped_safetensors(const mapped_safetensors&) = delete;
  mapped_safetensors& operator=(const mapped_safetensors&) = delete;
  ~mapped_safetensors();

  [[nodiscard]] const std::string& path() const { return path_; }
  /// In file order (by offset).
  [[nodiscard]] const std::vector<entry>& entries() const { return entries_; }
  [[nodiscard]] const std::map<std::string, std::string>& metadata() const { return metadata_; }
  /// The tensor called `name`, or nullptr.
  [[nodiscard]] const entry* find(const std::string& name) const;

 private:
  mapped_safetensors() = default;

  std::string path_;
  void* base_ = nullptr;
  size_t size_ = 0;
  std::vector<entry> entries_;
  std::map<std::string, std::string> metadata_;
};

/// Converts a mapped F32, BF16 or F16 tensor's elements to f32 into `out` (numel floats);
/// INVALID_ARGUMENT for another dtype.
[[nodiscard]] absl::Status copy_as_f32(const mapped_safetensors::entry& e, float* out);

}  // namespace troupe::tensor

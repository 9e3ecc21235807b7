#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/tensor/tensor.hpp"

namespace troupe::tensor {

/// Tensors by name plus the free-form string metadata of a safetensors file.
struct named_tensors {
  std::vector<std::pair<std::string, tensor>> tensors;  ///< in file order
  std::map<std::string, std::string> metadata;

  /// The tensor called `name`, or NotFound naming it.
  [[nodiscard]] absl::StatusOr<tensor> get(const std::string& name) const;
};

/// Writes the safetensors format (8-byte little-endian header length, JSON header padded to
/// 8 bytes, raw little-endian data) to `path`. CUDA tensors are copied to the host first.
[[nodiscard]] absl::Status write_safetensors(const std::string& path, const named_tensors& file);

/// Reads a safetensors file into host tensors. Every inconsistency (truncated file, bad JSON,
/// offsets outside the data or overlapping, an unsupported dtype) is an error naming the file and
/// the tensor.
[[nodiscard]] absl::StatusOr<named_tensors> read_safetensors(const std::string& path);

}  // namespace troupe::tensor

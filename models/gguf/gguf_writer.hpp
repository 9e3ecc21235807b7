#pragma once

// A GGUF file (version 3), the format llama.cpp and the ggml tools read: the magic "GGUF", the
// version, the tensor and key counts, typed key-value metadata, each tensor's name, dimensions
// (innermost first, ggml's ne), element type and offset, then the tensor data, each tensor
// aligned to 32 bytes (general.alignment's default). Tensors are given as f32 rows and encoded
// here in F32, F16, BF16 or Q8_0 (blocks of 32 values: an f16 scale, amax / 127, and 32 int8s
// rounded to nearest, as ggml's reference quantizer makes them).

#include <cstdint>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "absl/status/status.h"

namespace troupe::models::gguf {

/// ggml's element types that troupe writes (ggml.h's enum values).
enum class tensor_type : uint32_t { f32 = 0, f16 = 1, q8_0 = 8, bf16 = 30 };

/// "F32", "F16", "BF16" or "Q8_0", as llama.cpp names them.
[[nodiscard]] const char* tensor_type_name(tensor_type t);

/// Values a Q8_0 block holds; a Q8_0 tensor's rows must be a multiple of it.
inline constexpr int64_t q8_0_block = 32;

/// The bytes of `values` in `type` (Q8_0: values.size() a multiple of q8_0_block).
[[nodiscard]] std::string encode_tensor(std::span<const float> values, tensor_type type);

/// Builds a GGUF file: metadata in the order set, tensors in the order added.
class gguf_writer {
 public:
  void set_string(std::string key, std::string value);
  void set_u32(std::string key, uint32_t value);
  void set_i32(std::string key, int32_t value);
  void set_f32(std::string key, float value);
  void set_bool(std::string key, bool value);
  void set_strings(std::string key, std::vector<std::string> values);
  void set_i32s(std::string key, std::vector<int32_t> values);

  /// A tensor of the given dimensions (innermost first) whose f32 values, row-major with the
  /// innermost dimension fastest, are `values` (kept by reference until write) or, with the
  /// second overload, owned here. INVALID_ARGUMENT when the element count does not match the
  /// dimensions, or a Q8_0 tensor's rows are not a multiple of 32.
  absl::Status add_tensor(std::string name, std::vector<int64_t> dims, tensor_type type,
                          std::span<const float> values);
  absl::Status add_tensor(std::string name, std::vector<int64_t> dims, tensor_type type,
                          std::vector<float> values);

  /// Writes the file (through a temporary beside it, renamed into place): an error names the
  /// path that could not be written.
  [[nodiscard]] absl::Status write(const std::string& path) const;

  [[nodiscard]] size_t tensor_count() const { return tensors_.size(); }

 private:
  using array = std::variant<std::vector<std::string>, std::vector<int32_t>>;
  using value = std::variant<std::string, uint32_t, int32_t, float, bool, array>;
  struct tensor {
    std::string name;
    std::vector<int64_t> dims;
    tensor_type type;
    std::span<const float> values;
    std::vector<float> owned;
  };

  std::vector<std::pair<std::string, value>> metadata_;
  std::vector<tensor> tensors_;
};

}  // namespace troupe::models::gguf

#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace troupe::tensor {

/// Element types of a tensor. Master weights and CPU compute are f32; CUDA compute is bf16;
/// token ids and positions are i32.
enum class dtype : uint8_t { f32, bf16, i32 };

/// Bytes per element.
[[nodiscard]] constexpr size_t dtype_size(dtype t) {
  return t == dtype::bf16 ? 2 : 4;
}

/// "f32", "bf16" or "i32", as configs and error messages spell them.
[[nodiscard]] const char* dtype_name(dtype t);

/// The safetensors spelling: "F32", "BF16" or "I32".
[[nodiscard]] const char* safetensors_dtype_name(dtype t);

/// Parses a safetensors dtype name; other names (F16, F64, ...) are an error that names them.
[[nodiscard]] absl::StatusOr<dtype> dtype_from_safetensors(absl::string_view name);

/// bfloat16: the upper 16 bits of an IEEE f32, rounded to nearest even.
struct bf16 {
  uint16_t bits = 0;

  bf16() = default;
  explicit bf16(float f) : bits(round(f)) {}
  explicit operator float() const {
    const uint32_t u = static_cast<uint32_t>(bits) << 16;
    float f;
    std::memcpy(&f, &u, sizeof f);
    return f;
  }

 private:
  static uint16_t round(float f) {
    uint32_t u;
    std::memcpy(&u, &f, sizeof u);
    if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu) != 0) {
      return static_cast<uint16_t>((u >> 16) | 0x40);  // keep NaN a (quiet) NaN
    }
    u += 0x7fffu + ((u >> 16) & 1u);
    return static_cast<uint16_t>(u >> 16);
  }
};

/// The dtype of a C++ element type, for typed accessors.
template <class T>
constexpr dtype dtype_of();
template <>
constexpr dtype dtype_of<float>() {
  return dtype::f32;
}
template <>
constexpr dtype dtype_of<bf16>() {
  return dtype::bf16;
}
template <>
constexpr dtype dtype_of<int32_t>() {
  return dtype::i32;
}

}  // namespace troupe::tensor

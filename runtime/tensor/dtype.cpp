#include "runtime/tensor/dtype.hpp"

#include "absl/strings/str_cat.h"

namespace troupe::tensor {

const char* dtype_name(dtype t) {
  switch (t) {
    case dtype::f32:
      return "f32";
    case dtype::bf16:
      return "bf16";
    case dtype::i32:
      return "i32";
  }
  return "?";
}

const char* safetensors_dtype_name(dtype t) {
  switch (t) {
    case dtype::f32:
      return "F32";
    case dtype::bf16:
      return "BF16";
    case dtype::i32:
      return "I32";
  }
  return "?";
}

absl::StatusOr<dtype> dtype_from_safetensors(absl::string_view name) {
  if (name == "F32") return dtype::f32;
  if (name == "BF16") return dtype::bf16;
  if (name == "I32") return dtype::i32;
  return absl::InvalidArgumentError(
      absl::StrCat("dtype '", name, "' is not supported; troupe reads F32, BF16 and I32"));
}

}  // namespace troupe::tensor

// Built instead of the .cu files when troupe is compiled without CUDA (-DTROUPE_CUDA=OFF or no
// nvcc): every device query and operation reports that, so callers take their CPU paths.

#include "runtime/tensor/allocator.hpp"
#include "runtime/tensor/cuda_device.hpp"
#include "runtime/tensor/cuda_memory.hpp"

namespace troupe::tensor {
namespace {

absl::Status not_built() {
  return absl::FailedPreconditionError(
      "troupe was built without CUDA (no nvcc found, or -DTROUPE_CUDA=OFF); rebuild where nvcc "
      "exists");
}

}  // namespace

bool cuda_compiled() {
  return false;
}

absl::StatusOr<std::vector<cuda_device_info>> cuda_devices() {
  return not_built();
}

absl::Status cuda_self_test(int) {
  return not_built();
}

absl::StatusOr<allocator*> cuda_allocator(int) {
  return not_built();
}

absl::Status cuda_copy(void*, const void*, size_t, copy_kind) {
  return not_built();
}

absl::Status cuda_copy_rows(void*, size_t, const void*, size_t, size_t, size_t) {
  return not_built();
}

absl::Status cuda_zero(void*, size_t) {
  return not_built();
}

}  // namespace troupe::tensor

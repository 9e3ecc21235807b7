// Built instead of cuda_device.cu when troupe is compiled without CUDA (-DTROUPE_CUDA=OFF or no
// nvcc): every query reports that, so callers take their CPU paths.

#include "runtime/tensor/cuda_device.hpp"

namespace troupe::tensor {
namespace {

absl::Status not_built() {
  return absl::FailedPreconditionError(
      "troupe was built without CUDA (no nvcc found, or -DTROUPE_CUDA=OFF)");
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

}  // namespace troupe::tensor

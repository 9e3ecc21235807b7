// Built when troupe is compiled without CUDA: every device operation says so.

#include "runtime/tensor/allocator.hpp"
#include "runtime/tensor/cuda_memory.hpp"

namespace troupe::tensor {
namespace {
absl::Status no_cuda() {
  return absl::FailedPreconditionError(
      "troupe was built without CUDA; rebuild where nvcc exists (cmake -DTROUPE_CUDA=ON)");
}
}  // namespace

absl::StatusOr<allocator*> cuda_allocator(int) {
  return no_cuda();
}
absl::Status cuda_copy(void*, const void*, size_t, copy_kind) {
  return no_cuda();
}
absl::Status cuda_zero(void*, size_t) {
  return no_cuda();
}

}  // namespace troupe::tensor

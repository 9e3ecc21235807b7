#include <vector>

#include <cuda_runtime.h>

#include "absl/strings/str_cat.h"
#include "runtime/tensor/cuda_device.hpp"
#include "runtime/tensor/cuda_status.hpp"

namespace troupe::tensor {
namespace {

__global__ void iota_squared(int* out, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = i * i;
}

}  // namespace

bool cuda_compiled() {
  return true;
}

absl::StatusOr<std::vector<cuda_device_info>> cuda_devices() {
  int count = 0;
  TROUPE_CUDA_RETURN_IF_ERROR(cudaGetDeviceCount(&count));
  std::vector<cuda_device_info> out;
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp prop{};
    TROUPE_CUDA_RETURN_IF_ERROR(cudaGetDeviceProperties(&prop, i));
    out.push_back({i, prop.name, prop.totalGlobalMem, prop.major, prop.minor});
  }
  return out;
}

absl::Status cuda_self_test(int index) {
  constexpr int n = 1000;
  TROUPE_CUDA_RETURN_IF_ERROR(cudaSetDevice(index));
  int* device = nullptr;
  TROUPE_CUDA_RETURN_IF_ERROR(cudaMalloc(&device, n * sizeof(int)));
  iota_squared<<<(n + 255) / 256, 256>>>(device, n);
  std::vector<int> host(n);
  absl::Status status = cuda_status(cudaGetLastError(), "iota_squared launch", __FILE__, __LINE__);
  if (status.ok()) {
    status.Update(
        cuda_status(cudaMemcpy(host.data(), device, n * sizeof(int), cudaMemcpyDeviceToHost),
                    "cudaMemcpy", __FILE__, __LINE__));
  }
  cudaFree(device);
  if (!status.ok()) return status;
  for (int i = 0; i < n; ++i) {
    if (host[i] != i * i) {
      return absl::InternalError(
          absl::StrCat("kernel result wrong at ", i, ": ", host[i], " != ", i * i));
    }
  }
  return absl::OkStatus();
}

}  // namespace troupe::tensor

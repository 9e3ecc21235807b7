#pragma once

// Helpers shared by the CUDA kernels: bf16 views of troupe's bf16, launch checks, device scratch,
// warp and block reductions.

#include <cstdint>
#include <vector>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "absl/status/statusor.h"
#include "runtime/base/status.hpp"
#include "runtime/tensor/cuda_status.hpp"
#include "runtime/tensor/dtype.hpp"

namespace troupe::kernels::cuda {

using tensor::bf16;

inline __nv_bfloat16* dev(bf16* p) {
  return reinterpret_cast<__nv_bfloat16*>(p);
}
inline const __nv_bfloat16* dev(const bf16* p) {
  return reinterpret_cast<const __nv_bfloat16*>(p);
}
inline cudaStream_t to_stream(void* stream) {
  return static_cast<cudaStream_t>(stream);
}

/// The launch's own error (bad configuration), with file and line.
#define TROUPE_CUDA_LAUNCH_STATUS() \
  ::troupe::tensor::cuda_status(cudaGetLastError(), "kernel launch", __FILE__, __LINE__)

/// True when every pointer is 16-byte aligned (for 8-value bf16 loads).
template <class... T>
bool aligned16(const T*... p) {
  return ((reinterpret_cast<uintptr_t>(p) % 16 == 0) && ...);
}

inline int blocks_for(int64_t n, int threads) {
  return static_cast<int>((n + threads - 1) / threads);
}

/// Device scratch from the stream-ordered pool (cudaMallocAsync), freed on the stream, after the
/// work queued on it, when it goes.
class device_scratch {
 public:
  explicit device_scratch(cudaStream_t stream) : stream_(stream) {}
  ~device_scratch() {
    for (void* p : taken_)
      cudaFreeAsync(p, stream_);
  }
  device_scratch(const device_scratch&) = delete;
  device_scratch& operator=(const device_scratch&) = delete;

  template <class T>
  absl::StatusOr<T*> take(int64_t n) {
    void* p = nullptr;
    TROUPE_CUDA_RETURN_IF_ERROR(cudaMallocAsync(&p, n * sizeof(T), stream_));
    taken_.push_back(p);
    return static_cast<T*>(p);
  }

 private:
  cudaStream_t stream_;
  std::vector<void*> taken_;
};

/// After the kernels that wrote `*value` were launched on `stream`: checks the launch, copies the
/// value to the host and waits for it.
template <class T>
absl::StatusOr<T> read_scalar(const T* value, cudaStream_t stream) {
  TROUPE_RETURN_IF_ERROR(TROUPE_CUDA_LAUNCH_STATUS());
  T host{};
  TROUPE_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(&host, value, sizeof host, cudaMemcpyDeviceToHost, stream));
  TROUPE_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
  return host;
}

__device__ inline float warp_sum(float x) {
  for (int o = 16; o > 0; o /= 2)
    x += __shfl_xor_sync(0xffffffff, x, o);
  return x;
}
__device__ inline float warp_max(float x) {
  for (int o = 16; o > 0; o /= 2)
    x = fmaxf(x, __shfl_xor_sync(0xffffffff, x, o));
  return x;
}

/// Sum over a block of up to 1024 threads; every thread gets the result. `shared` holds 32.
__device__ inline float block_sum(float x, float* shared) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = (blockDim.x + 31) / 32;
  x = warp_sum(x);
  __syncthreads();
  if (lane == 0) shared[warp] = x;
  __syncthreads();
  x = lane < warps ? shared[lane] : 0.0f;
  return warp_sum(x);
}
__device__ inline float block_max(float x, float* shared) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = (blockDim.x + 31) / 32;
  x = warp_max(x);
  __syncthreads();
  if (lane == 0) shared[warp] = x;
  __syncthreads();
  x = lane < warps ? shared[lane] : -INFINITY;
  return warp_max(x);
}

}  // namespace troupe::kernels::cuda

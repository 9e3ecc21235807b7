#include "kernels/cross_entropy.hpp"
#include "kernels/cuda/common.cuh"

namespace troupe::kernels::cuda {
namespace {

// A running maximum and sum of exponentials relative to it (the online softmax's pair).
struct running_softmax {
  float max = -INFINITY, sum = 0.0f;
  __device__ void add(float x) {
    if (x > max) {
      sum = sum * expf(max - x) + 1.0f;
      max = x;
    } else {
      sum += expf(x - max);
    }
  }
};

// One block per row, two passes over it: the maximum and the sum of exponentials together (the
// online softmax), then the loss and the gradient over the logits. Eight logits a load and store
// when `packed` (vocab a multiple of 8 and the logits 16-byte aligned), one at a time otherwise.
__global__ void cross_entropy_fused_kernel(float* losses, __nv_bfloat16* logits,
                                           const int32_t* targets, float dloss, int vocab,
                                           bool packed) {
  __shared__ float shared[32];
  const int row = blockIdx.x;
  __nv_bfloat16* z = logits + static_cast<int64_t>(row) * vocab;
  const int packed_end = packed ? vocab : 0;
  running_softmax mine;
  for (int j = threadIdx.x * 8; j < packed_end; j += blockDim.x * 8) {
    const uint4 pack = *reinterpret_cast<const uint4*>(z + j);
    const auto* v = reinterpret_cast<const __nv_bfloat16*>(&pack);
#pragma unroll
    for (int e = 0; e < 8; ++e)
      mine.add(__bfloat162float(v[e]));
  }
  for (int j = packed_end + threadIdx.x; j < vocab; j += blockDim.x)
    mine.add(__bfloat162float(z[j]));
  const float max = block_max(mine.max, shared);
  const float sum = block_sum(mine.sum == 0.0f ? 0.0f : mine.sum * expf(mine.max - max), shared);
  const int t = targets[row];
  if (threadIdx.x == 0) {
    losses[row] = t < 0 ? 0.0f : logf(sum) - (__bfloat162float(z[t]) - max);
  }
  __syncthreads();  // z[t] is read above before it is overwritten below
  const float scale = t < 0 ? 0.0f : dloss;
  const auto gradient = [&](float x, int j) {
    return __float2bfloat16((expf(x - max) / sum - (j == t ? 1.0f : 0.0f)) * scale);
  };
  for (int j = threadIdx.x * 8; j < packed_end; j += blockDim.x * 8) {
    uint4 pack = *reinterpret_cast<const uint4*>(z + j);
    auto* v = reinterpret_cast<__nv_bfloat16*>(&pack);
#pragma unroll
    for (int e = 0; e < 8; ++e)
      v[e] = gradient(__bfloat162float(v[e]), j + e);
    *reinterpret_cast<uint4*>(z + j) = pack;
  }
  for (int j = packed_end + threadIdx.x; j < vocab; j += blockDim.x)
    z[j] = gradient(__bfloat162float(z[j]), j);
}

}  // namespace

absl::Status cross_entropy_fused(float* losses, bf16* logits, const int32_t* targets, float dloss,
                                 int rows, int vocab, void* stream) {
  const bool packed = vocab % 8 == 0 && aligned16(logits);
  cross_entropy_fused_kernel<<<rows, 512, 0, to_stream(stream)>>>(losses, dev(logits), targets,
                                                                  dloss, vocab, packed);
  return TROUPE_CUDA_LAUNCH_STATUS();
}

}  // namespace troupe::kernels::cuda

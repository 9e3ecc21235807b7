#include "kernels/cross_entropy.hpp"
#include "kernels/cuda/common.cuh"

namespace troupe::kernels::cuda {
namespace {

// One block per row: max, sum of exponentials, the loss, then the gradient over the logits.
__global__ void cross_entropy_fused_kernel(float* losses, __nv_bfloat16* logits,
                                           const int32_t* targets, float dloss, int vocab) {
  __shared__ float shared[32];
  const int row = blockIdx.x;
  __nv_bfloat16* z = logits + static_cast<int64_t>(row) * vocab;
  float max = -INFINITY;
  for (int j = threadIdx.x; j < vocab; j += blockDim.x)
    max = fmaxf(max, __bfloat162float(z[j]));
  max = block_max(max, shared);
  float sum = 0.0f;
  for (int j = threadIdx.x; j < vocab; j += blockDim.x)
    sum += expf(__bfloat162float(z[j]) - max);
  sum = block_sum(sum, shared);
  const int t = targets[row];
  if (threadIdx.x == 0) {
    losses[row] = t < 0 ? 0.0f : logf(sum) - (__bfloat162float(z[t]) - max);
  }
  __syncthreads();  // z[t] is read above before it is overwritten below
  const float scale = t < 0 ? 0.0f : dloss;
  for (int j = threadIdx.x; j < vocab; j += blockDim.x) {
    const float p = expf(__bfloat162float(z[j]) - max) / sum;
    z[j] = __float2bfloat16((p - (j == t ? 1.0f : 0.0f)) * scale);
  }
}

}  // namespace

absl::Status cross_entropy_fused(float* losses, bf16* logits, const int32_t* targets, float dloss,
                                 int rows, int vocab, void* stream) {
  cross_entropy_fused_kernel<<<rows, 512, 0, to_stream(stream)>>>(losses, dev(logits), targets,
                                                                  dloss, vocab);
  return TROUPE_CUDA_LAUNCH_STATUS();
}

}  // namespace troupe::kernels::cuda

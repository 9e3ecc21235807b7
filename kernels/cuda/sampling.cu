#include "kernels/cuda/common.cuh"
#include "kernels/sampling.hpp"

namespace troupe::kernels::cuda {
namespace {

__device__ float uniform(uint64_t seed, uint64_t counter) {
  uint64_t z = seed + 0x9e3779b97f4a7c15ull * (counter + 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return static_cast<float>(z >> 40) * (1.0f / 16777216.0f);
}

// One block. Candidates are the tokens whose probability reaches a threshold found by
// bisection: the largest threshold keeping at least top_k tokens (or all), then the largest
// keeping at least top_p of the mass. The draw walks the candidates in token order.
__global__ void sample_kernel(int* token, const float* logits, int vocab, float temperature,
                              int top_k, float top_p, uint64_t seed, uint64_t counter) {
  __shared__ float shared[32];
  __shared__ float s_lo;
  float max = -INFINITY;
  int arg = 0;
  for (int j = threadIdx.x; j < vocab; j += blockDim.x) {
    if (logits[j] > max) max = logits[j], arg = j;
  }
  const float block_best = block_max(max, shared);
  if (temperature <= 0.0f) {  // greedy: the lowest index holding the maximum
    __shared__ int s_arg;
    if (threadIdx.x == 0) s_arg = vocab;
    __syncthreads();
    if (max == block_best) atomicMin(&s_arg, arg);
    __syncthreads();
    if (threadIdx.x == 0) *token = s_arg;
    return;
  }
  auto weight = [&](int j) { return expf((logits[j] - block_best) / temperature); };
  // Candidates are the tokens with weight w >= a threshold in (0, 1], found by bisection: the
  // largest keeping top_k tokens, then, as on the CPU, the largest of those keeping top_p of the
  // top-k mass.
  auto count_and_mass = [&](float threshold, float& count, float& mass) {
    count = 0.0f;
    mass = 0.0f;
    for (int j = threadIdx.x; j < vocab; j += blockDim.x) {
      const float w = weight(j);
      if (w >= threshold) count += 1.0f, mass += w;
    }
    count = block_sum(count, shared);
    mass = block_sum(mass, shared);
  };
  float lo = 0.0f, hi = 1.0f, count = 0.0f, mass = 0.0f;
  if (top_k > 0) {
    for (int iter = 0; iter < 40; ++iter) {
      const float mid = 0.5f * (lo + hi);
      count_and_mass(mid, count, mass);
      if (count >= top_k)
        lo = mid;
      else
        hi = mid;
    }
  }
  count_and_mass(lo, count, mass);
  const float kept_mass = mass;
  if (top_p < 1.0f) {
    hi = 1.0f;
    for (int iter = 0; iter < 40; ++iter) {
      const float mid = 0.5f * (lo + hi);
      count_and_mass(mid, count, mass);
      if (mass >= top_p * kept_mass)
        lo = mid;
      else
        hi = mid;
    }
  }
  if (threadIdx.x == 0) s_lo = lo;
  __syncthreads();
  if (threadIdx.x != 0) return;
  float candidates = 0.0f;
  for (int j = 0; j < vocab; ++j)
    candidates += weight(j) >= s_lo ? weight(j) : 0.0f;
  const float target = uniform(seed, counter) * candidates;
  float acc = 0.0f;
  int last = 0;
  for (int j = 0; j < vocab; ++j) {
    if (weight(j) < s_lo) continue;
    acc += weight(j);
    last = j;
    if (target < acc) break;
  }
  *token = last;
}

}  // namespace

absl::StatusOr<int> sample_token(const float* logits, int vocab, const sampling_params& p,
                                 uint64_t seed, uint64_t counter, void* stream) {
  cudaStream_t st = to_stream(stream);
  device_scratch mem(st);
  TROUPE_ASSIGN_OR_RETURN(int* device_token, mem.take<int>(1));
  sample_kernel<<<1, 1024, 0, st>>>(device_token, logits, vocab, p.temperature, p.top_k, p.top_p,
                                    seed, counter);
  return read_scalar(device_token, st);
}

}  // namespace troupe::kernels::cuda

#include <mutex>
#include <vector>

#include <cublasLt.h>

#include "absl/strings/str_cat.h"
#include "kernels/cuda/common.cuh"
#include "kernels/matmul.hpp"

namespace troupe::kernels::cuda {
namespace {

absl::Status cublas_status(cublasStatus_t s, const char* what, const char* file, int line) {
  if (s == CUBLAS_STATUS_SUCCESS) return absl::OkStatus();
  return absl::InternalError(
      absl::StrCat(file, ":", line, ": ", what, ": cuBLAS status ", static_cast<int>(s)));
}
#define TROUPE_CUBLAS_RETURN_IF_ERROR(call)                                             \
  do {                                                                                  \
    if (absl::Status s_ = cublas_status((call), #call, __FILE__, __LINE__); !s_.ok()) { \
      return s_;                                                                        \
    }                                                                                   \
  } while (false)

constexpr size_t workspace_bytes = size_t{32} << 20;

// One cuBLASLt handle and workspace per device, made on first use.
struct lt_state {
  cublasLtHandle_t handle = nullptr;
  void* workspace = nullptr;
};

absl::StatusOr<lt_state*> state_for_current_device() {
  static std::mutex mutex;
  static std::vector<lt_state> states;
  int device = 0;
  TROUPE_CUDA_RETURN_IF_ERROR(cudaGetDevice(&device));
  std::lock_guard lock(mutex);
  if (states.size() <= static_cast<size_t>(device)) states.resize(device + 1);
  lt_state& s = states[device];
  if (s.handle == nullptr) {
    TROUPE_CUBLAS_RETURN_IF_ERROR(cublasLtCreate(&s.handle));
    TROUPE_CUDA_RETURN_IF_ERROR(cudaMalloc(&s.workspace, workspace_bytes));
  }
  return &s;
}

// out[i][j] += bias[j], for f32 outputs (cuBLASLt's bias epilogue wants the bias in D's type).
__global__ void add_bias_rows(float* out, const __nv_bfloat16* bias, int m, int n) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < static_cast<int64_t>(m) * n) out[i] += __bfloat162float(bias[i % n]);
}

// Column sums in two passes, each in a fixed order (no atomics): a block of 32 x 8 threads sums
// a stripe of rows of 32 columns, then one thread per column adds the stripes' partials.
constexpr int stripe_rows = 256;

__global__ void column_partials(float* partials, const __nv_bfloat16* dout, int m, int n) {
  __shared__ float lanes[8][33];
  const int j = blockIdx.x * 32 + threadIdx.x;
  const int first = blockIdx.y * stripe_rows, last = min(m, first + stripe_rows);
  float s = 0.0f;
  if (j < n) {
    for (int i = first + threadIdx.y; i < last; i += 8)
      s += __bfloat162float(dout[static_cast<int64_t>(i) * n + j]);
  }
  lanes[threadIdx.y][threadIdx.x] = s;
  __syncthreads();
  if (threadIdx.y == 0 && j < n) {
    float total = 0.0f;
    for (int y = 0; y < 8; ++y)
      total += lanes[y][threadIdx.x];
    partials[static_cast<int64_t>(blockIdx.y) * n + j] = total;
  }
}

__global__ void column_totals(float* dbias, const float* partials, int stripes, int n) {
  const int j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= n) return;
  float s = 0.0f;
  for (int y = 0; y < stripes; ++y)
    s += partials[static_cast<int64_t>(y) * n + j];
  dbias[j] += s;
}

// Sets a layout's strided batch (a count of 1 leaves it a single matrix).
absl::Status set_batch(cublasLtMatrixLayout_t layout, int batch, int64_t stride) {
  if (batch == 1) return absl::OkStatus();
  const int32_t count = batch;
  TROUPE_CUBLAS_RETURN_IF_ERROR(cublasLtMatrixLayoutSetAttribute(
      layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof count));
  TROUPE_CUBLAS_RETURN_IF_ERROR(cublasLtMatrixLayoutSetAttribute(
      layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof stride));
  return absl::OkStatus();
}

absl::Status lt_matmul(void* out, tensor::dtype out_type, const bf16* a, const bf16* b,
                       const bf16* bias, const batched_gemm& bg, void* stream) {
  const gemm& g = bg.shape;
  TROUPE_ASSIGN_OR_RETURN(lt_state * lt, state_for_current_device());
  // Row-major out = op(a) op(b) is column-major out^T = op(b)^T op(a)^T: swap the operands.
  const cudaDataType_t out_cuda = out_type == tensor::dtype::f32 ? CUDA_R_32F : CUDA_R_16BF;
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t la = nullptr, lb = nullptr, lc = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  absl::Status status = [&]() -> absl::Status {
    TROUPE_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    const cublasOperation_t op_first = g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasOperation_t op_second = g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    TROUPE_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA,
                                                                 &op_first, sizeof op_first));
    TROUPE_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB,
                                                                 &op_second, sizeof op_second));
    const bool bias_epilogue = bias != nullptr && out_type == tensor::dtype::bf16;
    if (bias_epilogue) {
      const cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_BIAS;
      const cudaDataType_t bias_type = CUDA_R_16BF;
      TROUPE_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulDescSetAttribute(
          desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof epilogue));
      TROUPE_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulDescSetAttribute(
          desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type, sizeof bias_type));
      TROUPE_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulDescSetAttribute(
          desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
    }
    // Column-major shapes: first operand b^T is [n, k] (stored as b: rows of length ldb).
    const uint64_t b_rows = g.trans_b ? g.k : g.n, b_cols = g.trans_b ? g.n : g.k;
    const uint64_t a_rows = g.trans_a ? g.m : g.k, a_cols = g.trans_a ? g.k : g.m;
    TROUPE_CUBLAS_RETURN_IF_ERROR(
        cublasLtMatrixLayoutCreate(&lb, CUDA_R_16BF, b_rows, b_cols, bg.ldb ? bg.ldb : b_rows));
    TROUPE_CUBLAS_RETURN_IF_ERROR(
        cublasLtMatrixLayoutCreate(&la, CUDA_R_16BF, a_rows, a_cols, bg.lda ? bg.lda : a_rows));
    TROUPE_CUBLAS_RETURN_IF_ERROR(
        cublasLtMatrixLayoutCreate(&lc, out_cuda, g.n, g.m, bg.ld_out ? bg.ld_out : g.n));
    TROUPE_RETURN_IF_ERROR(set_batch(lb, bg.batch, bg.stride_b));
    TROUPE_RETURN_IF_ERROR(set_batch(la, bg.batch, bg.stride_a));
    TROUPE_RETURN_IF_ERROR(set_batch(lc, bg.batch, bg.stride_out));
    TROUPE_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulPreferenceCreate(&pref));
    TROUPE_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace_bytes, sizeof workspace_bytes));
    cublasLtMatmulHeuristicResult_t heuristic{};
    int found = 0;
    TROUPE_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulAlgoGetHeuristic(lt->handle, desc, lb, la, lc, lc,
                                                                 pref, 1, &heuristic, &found));
    if (found == 0) {
      return absl::FailedPreconditionError(absl::StrCat(
          "cuBLASLt offers no algorithm for a ", g.m, "x", g.n, "x", g.k,
          " bf16 GEMM on this device; pad the dimensions to multiples of 8 (as GPT-2's vocabulary "
          "is padded to 50304)"));
    }
    const float alpha = 1.0f, beta = g.accumulate ? 1.0f : 0.0f;
    TROUPE_CUBLAS_RETURN_IF_ERROR(cublasLtMatmul(lt->handle, desc, &alpha, b, lb, a, la, &beta, out,
                                                 lc, out, lc, &heuristic.algo, lt->workspace,
                                                 workspace_bytes, to_stream(stream)));
    if (bias != nullptr && !bias_epilogue) {
      add_bias_rows<<<blocks_for(int64_t{g.m} * g.n, 256), 256, 0, to_stream(stream)>>>(
          static_cast<float*>(out), dev(bias), g.m, g.n);
      return TROUPE_CUDA_LAUNCH_STATUS();
    }
    return absl::OkStatus();
  }();
  if (pref) cublasLtMatmulPreferenceDestroy(pref);
  if (lc) cublasLtMatrixLayoutDestroy(lc);
  if (la) cublasLtMatrixLayoutDestroy(la);
  if (lb) cublasLtMatrixLayoutDestroy(lb);
  if (desc) cublasLtMatmulDescDestroy(desc);
  return status;
}

}  // namespace

absl::Status matmul(void* out, tensor::dtype out_type, const bf16* a, const bf16* b,
                    const bf16* bias, const gemm& g, void* stream) {
  return lt_matmul(out, out_type, a, b, bias, {.shape = g}, stream);
}

absl::Status matmul_batched(void* out, tensor::dtype out_type, const bf16* a, const bf16* b,
                            const batched_gemm& g, void* stream) {
  if (g.batch < 1) return absl::InvalidArgumentError("matmul_batched: batch must be at least 1");
  return lt_matmul(out, out_type, a, b, nullptr, g, stream);
}

absl::Status bias_backward(float* dbias, const bf16* dout, int m, int n, void* stream) {
  if (m <= 0 || n <= 0) return absl::OkStatus();
  cudaStream_t st = to_stream(stream);
  const int stripes = (m + stripe_rows - 1) / stripe_rows;
  device_scratch mem(st);
  TROUPE_ASSIGN_OR_RETURN(float* partials, mem.take<float>(int64_t{stripes} * n));
  column_partials<<<dim3((n + 31) / 32, stripes), dim3(32, 8), 0, st>>>(partials, dev(dout), m, n);
  column_totals<<<blocks_for(n, 256), 256, 0, st>>>(dbias, partials, stripes, n);
  return TROUPE_CUDA_LAUNCH_STATUS();
}

}  // namespace troupe::kernels::cuda

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

__global__ void column_sums(float* dbias, const __nv_bfloat16* dout, int m, int n) {
  const int j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= n) return;
  float s = 0.0f;
  for (int i = 0; i < m; ++i)
    s += __bfloat162float(dout[static_cast<int64_t>(i) * n + j]);
  dbias[j] += s;
}

}  // namespace

absl::Status matmul(void* out, tensor::dtype out_type, const bf16* a, const bf16* b,
                    const bf16* bias, const gemm& g, void* stream) {
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
        cublasLtMatrixLayoutCreate(&lb, CUDA_R_16BF, b_rows, b_cols, b_rows));
    TROUPE_CUBLAS_RETURN_IF_ERROR(
        cublasLtMatrixLayoutCreate(&la, CUDA_R_16BF, a_rows, a_cols, a_rows));
    TROUPE_CUBLAS_RETURN_IF_ERROR(cublasLtMatrixLayoutCreate(&lc, out_cuda, g.n, g.m, g.n));
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

absl::Status bias_backward(float* dbias, const bf16* dout, int m, int n, void* stream) {
  column_sums<<<blocks_for(n, 256), 256, 0, to_stream(stream)>>>(dbias, dev(dout), m, n);
  return TROUPE_CUDA_LAUNCH_STATUS();
}

}  // namespace troupe::kernels::cuda

#pragma once

// Matrix multiply with optional bias and transposes: the GEMMs of every linear layer.
// Row-major. op(a) is [m, k], op(b) is [k, n], out is [m, n].

#include <cstdint>

#include "absl/status/statusor.h"
#include "runtime/tensor/dtype.hpp"

namespace troupe::kernels {

/// Shape and options of one GEMM.
struct gemm {
  int m = 0, n = 0, k = 0;
  bool trans_a = false;     ///< a is stored [k, m]
  bool trans_b = false;     ///< b is stored [n, k]
  bool accumulate = false;  ///< out += product (gradient accumulation) instead of out = product
};

namespace cuda {
/// The default stream (a null cudaStream_t), for callers that run on one stream.
inline constexpr void* default_stream = nullptr;

/// out = op(a) @ op(b) (+ bias[n]) through cuBLASLt: bf16 inputs, fp32 accumulation, out in
/// `out_type` (bf16 activations, or f32 for gradients that accumulate).
[[nodiscard]] absl::Status matmul(void* out, tensor::dtype out_type, const tensor::bf16* a,
                                  const tensor::bf16* b, const tensor::bf16* bias, const gemm& g,
                                  void* stream);
/// A batch of GEMMs with the same shape, the i-th on the matrices at a + i * stride_a,
/// b + i * stride_b and out + i * stride_out (cuBLASLt's strided batch); leading dimensions are
/// row-major (0: packed). No bias.
struct batched_gemm {
  gemm shape;
  int64_t lda = 0, ldb = 0, ld_out = 0;
  int batch = 1;
  int64_t stride_a = 0, stride_b = 0, stride_out = 0;
};
[[nodiscard]] absl::Status matmul_batched(void* out, tensor::dtype out_type, const tensor::bf16* a,
                                          const tensor::bf16* b, const batched_gemm& g,
                                          void* stream);
/// dbias[n] += the column sums of dout[m, n].
[[nodiscard]] absl::Status bias_backward(float* dbias, const tensor::bf16* dout, int m, int n,
                                         void* stream);
}  // namespace cuda

namespace cpu {
class thread_pool;

/// out = op(a) @ op(b) (+ bias[n] broadcast over rows). Forward products (no trans_a, no
/// accumulate) are row-invariant: a row's outputs are the same bits whatever m is. Gradients go
/// through OpenBLAS sgemm.
void matmul(float* out, const float* a, const float* b, const float* bias, const gemm& g);
/// The same, a forward product's columns split over `pool` in chunks (the same bits as without;
/// nullptr: the caller alone). For one or a few rows, where the caller has no rows to split;
/// never from inside one of `pool`'s own tasks (it would wait on itself).
void matmul(float* out, const float* a, const float* b, const float* bias, const gemm& g,
            thread_pool* pool);
/// dbias[n] += the column sums of dout[m, n].
void bias_backward(float* dbias, const float* dout, int m, int n);
/// The BLAS library's build description, e.g. "OpenBLAS 0.3.21 DYNAMIC_ARCH ... Zen".
[[nodiscard]] const char* blas_config();
/// Threads OpenBLAS may use per call. Callers that already run one replica per core set 1.
void set_blas_threads(int threads);
}  // namespace cpu

}  // namespace troupe::kernels

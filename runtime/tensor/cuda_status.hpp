#pragma once

// CUDA, cuBLAS and NCCL codes become absl::Status with file and line (DESIGN.md "Errors and
// style"). Only .cu files include this header.

#include <cuda_runtime.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace troupe::tensor {

inline absl::Status cuda_status(cudaError_t err, const char* what, const char* file, int line) {
  if (err == cudaSuccess) return absl::OkStatus();
  return absl::UnavailableError(absl::StrCat(file, ":", line, ": ", what, ": ",
                                             cudaGetErrorName(err), ": ", cudaGetErrorString(err)));
}

}  // namespace troupe::tensor

/// Returns a Status naming the call, file and line when a CUDA runtime call fails.
#define TROUPE_CUDA_RETURN_IF_ERROR(call)                                                   \
  do {                                                                                      \
    if (absl::Status s_ = ::troupe::tensor::cuda_status((call), #call, __FILE__, __LINE__); \
        !s_.ok())                                                                           \
      return s_;                                                                            \
  } while (false)

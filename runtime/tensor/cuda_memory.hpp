#pragma once

#include <cstddef>

#include "absl/status/status.h"

namespace troupe::tensor {

/// Direction of a copy between host and device memory.
enum class copy_kind { host_to_device, device_to_host, device_to_device };

/// Copies `bytes` with cudaMemcpy and waits for it. An error without CUDA or on a CUDA failure.
[[nodiscard]] absl::Status cuda_copy(void* dst, const void* src, size_t bytes, copy_kind kind);

/// Copies `rows` rows of `width` bytes between device buffers whose rows start `dst_pitch` and
/// `src_pitch` bytes apart (cudaMemcpy2D): some columns of a row-major matrix. Waits for it.
[[nodiscard]] absl::Status cuda_copy_rows(void* dst, size_t dst_pitch, const void* src,
                                          size_t src_pitch, size_t width, size_t rows);

/// Fills `bytes` of device memory with zero.
[[nodiscard]] absl::Status cuda_zero(void* dst, size_t bytes);

}  // namespace troupe::tensor

#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace troupe::tensor {

/// One CUDA device as the runtime reports it.
struct cuda_device_info {
  int index = 0;
  std::string name;
  size_t memory_bytes = 0;
  int compute_major = 0;
  int compute_minor = 0;
};

/// Whether this build compiled its CUDA code.
[[nodiscard]] bool cuda_compiled();

/// The CUDA devices this process can use. Errors name the CUDA error (for instance no driver on
/// a machine without a GPU), or say that troupe was built without CUDA.
[[nodiscard]] absl::StatusOr<std::vector<cuda_device_info>> cuda_devices();

/// Runs a small kernel on device `index` and checks its result: proof that kernels launch.
[[nodiscard]] absl::Status cuda_self_test(int index);

}  // namespace troupe::tensor

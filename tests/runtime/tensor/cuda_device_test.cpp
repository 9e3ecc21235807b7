#include "runtime/tensor/cuda_device.hpp"

#include <gtest/gtest.h>

namespace troupe::tensor {
namespace {

// Label `gpu`: skips cleanly on machines without a usable CUDA device.
TEST(CudaDevice, KernelsLaunchOnEveryDevice) {
  if (!cuda_compiled()) GTEST_SKIP() << "built without CUDA";
  auto devices = cuda_devices();
  if (!devices.ok() || devices->empty()) {
    GTEST_SKIP() << "no CUDA device: "
                 << (devices.ok() ? "none found" : devices.status().ToString());
  }
  for (const auto& d : *devices) {
    EXPECT_FALSE(d.name.empty());
    EXPECT_GT(d.memory_bytes, 0u);
    EXPECT_TRUE(cuda_self_test(d.index).ok()) << d.name;
  }
}

TEST(CudaDevice, QueriesFailWithAReasonInsteadOfCrashing) {
  auto devices = cuda_devices();
  if (devices.ok()) GTEST_SKIP() << "CUDA is available here";
  EXPECT_FALSE(devices.status().message().empty());
}

}  // namespace
}  // namespace troupe::tensor

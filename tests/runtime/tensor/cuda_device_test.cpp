#include "runtime/tensor/cuda_device.hpp"

#include <gtest/gtest.h>

#include "runtime/tensor/allocator.hpp"
#include "runtime/tensor/tensor.hpp"

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

TEST(CudaDevice, CachingAllocatorReusesFreedBlocksAndCopiesRoundTrip) {
  auto devices = cuda_devices();
  if (!devices.ok() || devices->empty()) GTEST_SKIP() << "no CUDA device";
  absl::StatusOr<allocator*> cuda = cuda_allocator(0);
  ASSERT_TRUE(cuda.ok()) << cuda.status();
  const allocator_stats before = (*cuda)->stats();
  {
    tensor t = *tensor::empty({1 << 20}, dtype::f32, device::cuda(0));
    EXPECT_GE((*cuda)->stats().allocated_bytes, before.allocated_bytes + (4u << 20));
  }
  const allocator_stats freed = (*cuda)->stats();
  {
    tensor again = *tensor::empty({1 << 20}, dtype::f32, device::cuda(0));  // from the cache
    tensor host = tensor::host({1 << 20});
    for (int i = 0; i < (1 << 20); i += 4099)
      host.data<float>()[i] = float(i);
    ASSERT_TRUE(copy(again, host).ok());
    tensor back = *again.to(device::cpu());
    for (int i = 0; i < (1 << 20); i += 4099)
      ASSERT_EQ(back.data<float>()[i], float(i));
  }
  const allocator_stats after = (*cuda)->stats();
  EXPECT_EQ(after.cache_hits, freed.cache_hits + 1);
  EXPECT_EQ(after.reserved_bytes, freed.reserved_bytes);
  EXPECT_GE(after.peak_bytes, 4u << 20);
  EXPECT_EQ(cuda_allocator(99).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(CudaDevice, StridedViewsCopyToAndFromTheDevice) {
  auto devices = cuda_devices();
  if (!devices.ok() || devices->empty()) GTEST_SKIP() << "no CUDA device";
  tensor host = tensor::host({4, 6});
  for (int i = 0; i < 24; ++i)
    host.data<float>()[i] = float(i);
  tensor dev = *host.to(device::cuda(0));
  tensor transposed = *(*dev.transpose(0, 1)).to(device::cpu());  // strided device source
  EXPECT_EQ(transposed.data<float>()[1], 6.0f);
  tensor cols = *dev.narrow(1, 2, 3);  // strided device destination
  ASSERT_TRUE(zero(cols).ok());
  tensor back = *dev.to(device::cpu());
  EXPECT_EQ(back.data<float>()[2], 0.0f);
  EXPECT_EQ(back.data<float>()[5], 5.0f);  // outside the view: kept
}

TEST(CudaDevice, QueriesFailWithAReasonInsteadOfCrashing) {
  auto devices = cuda_devices();
  if (devices.ok()) GTEST_SKIP() << "CUDA is available here";
  EXPECT_FALSE(devices.status().message().empty());
}

}  // namespace
}  // namespace troupe::tensor

// The NCCL communicator on the one GPU a device machine has (NCCL puts one rank per GPU, so
// multi-rank traffic needs more devices): single-rank operations, and the bound on forming a
// group whose other rank never arrives. CTest label `gpu`; skips without a CUDA device.

#include "runtime/comm/nccl_communicator.hpp"

#include <gtest/gtest.h>

#include "runtime/tensor/cuda_device.hpp"

namespace troupe::comm {
namespace {

using namespace std::chrono_literals;

class NcclCommunicator : public ::testing::Test {
 protected:
  void SetUp() override {
    auto devices = tensor::cuda_devices();
    if (!devices.ok() || devices->empty()) GTEST_SKIP() << "no CUDA device";
  }
};

TEST_F(NcclCommunicator, SingleRankOperations) {
  memory_store store;
  auto group = make_nccl_communicator(store, {.name = "solo", .rank = 0, .size = 1}, 0);
  ASSERT_TRUE(group.ok()) << group.status();
  tensor::tensor host = tensor::tensor::host({1000});
  for (int i = 0; i < 1000; ++i)
    host.data<float>()[i] = float(i);
  tensor::tensor data = *host.to(tensor::device::cuda(0));
  tensor::tensor out = *tensor::tensor::empty({1000}, tensor::dtype::f32, tensor::device::cuda(0));
  ASSERT_TRUE((*group)->allreduce(data, reduce_op::avg).ok());
  ASSERT_TRUE((*group)->allgather(data, out).ok());
  ASSERT_TRUE((*group)->broadcast(out, 0).ok());
  ASSERT_TRUE((*group)->barrier().ok());
  tensor::tensor back = *out.to(tensor::device::cpu());
  EXPECT_EQ(back.data<float>()[999], 999.0f);
  EXPECT_EQ((*group)->allreduce(host, reduce_op::sum).code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(NcclCommunicator, AMissingRankFailsWithinTheTimeout) {
  memory_store store;
  const auto start = std::chrono::steady_clock::now();
  auto group = make_nccl_communicator(
      store, {.name = "pair", .rank = 0, .size = 2, .timeout = std::chrono::milliseconds(2000)}, 0);
  EXPECT_EQ(group.status().code(), absl::StatusCode::kDeadlineExceeded) << group.status();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 15s);
}

}  // namespace
}  // namespace troupe::comm

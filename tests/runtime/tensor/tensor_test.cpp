#include "runtime/tensor/tensor.hpp"

#include <gtest/gtest.h>

#include "runtime/tensor/allocator.hpp"

namespace troupe::tensor {
namespace {

tensor iota(const shape_t& shape) {
  tensor t = tensor::host(shape);
  for (int64_t i = 0; i < t.numel(); ++i)
    t.data<float>()[i] = static_cast<float>(i);
  return t;
}

TEST(Tensor, ShapeStridesAndBytes) {
  tensor t = tensor::host({2, 3, 4}, dtype::bf16);
  EXPECT_EQ(t.numel(), 24);
  EXPECT_EQ(t.nbytes(), 48u);
  EXPECT_EQ(t.strides(), (shape_t{12, 4, 1}));
  EXPECT_TRUE(t.is_contiguous());
  EXPECT_EQ(t.description(), "bf16[2, 3, 4] on cpu");
  EXPECT_EQ(reinterpret_cast<uintptr_t>(t.raw()) % 64, 0u);
}

TEST(Tensor, ViewNarrowAndTransposeShareStorage) {
  tensor t = iota({4, 6});
  tensor v = *t.view({2, -1});
  EXPECT_EQ(v.shape(), (shape_t{2, 12}));
  EXPECT_EQ(v.raw(), t.raw());
  tensor rows = *t.narrow(0, 1, 2);
  EXPECT_EQ(rows.data<float>()[0], 6.0f);
  EXPECT_TRUE(rows.is_contiguous());
  tensor cols = *t.narrow(1, 2, 3);
  EXPECT_FALSE(cols.is_contiguous());
  tensor tr = *t.transpose(0, 1);
  EXPECT_EQ(tr.shape(), (shape_t{6, 4}));
  tensor packed = *tr.clone();  // strided host copy
  EXPECT_TRUE(packed.is_contiguous());
  for (int i = 0; i < 6; ++i) {
    for (int j = 0; j < 4; ++j)
      EXPECT_EQ(packed.data<float>()[i * 4 + j], float(j * 6 + i));
  }
  t.data<float>()[7] = -1.0f;
  EXPECT_EQ(v.data<float>()[7], -1.0f);  // a view, not a copy
}

TEST(Tensor, BadViewsAreErrorsNamingTheShapes) {
  tensor t = iota({4, 6});
  EXPECT_NE(t.view({5, 5}).status().message().find("cannot view f32[4, 6] on cpu as [5, 5]"),
            std::string::npos);
  EXPECT_EQ(t.narrow(1, 4, 3).status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(t.transpose(0, 2).status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ((*t.transpose(0, 1)).view({24}).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_FALSE(tensor::empty({-1}, dtype::f32).ok());
  tensor other = tensor::host({4, 6}, dtype::i32);
  EXPECT_EQ(copy(other, t).code(), absl::StatusCode::kInvalidArgument);
}

TEST(Tensor, ZeroClearsAStridedViewAndNothingElse) {
  tensor t = iota({4, 6});
  tensor cols = *t.narrow(1, 2, 3);  // columns 2..4 of every row
  ASSERT_TRUE(zero(cols).ok());
  for (int r = 0; r < 4; ++r) {
    for (int c = 0; c < 6; ++c) {
      const float want = (c >= 2 && c < 5) ? 0.0f : float(r * 6 + c);
      EXPECT_EQ(t.data<float>()[r * 6 + c], want) << r << "," << c;
    }
  }
}

TEST(Tensor, Bf16RoundsToNearestEven) {
  EXPECT_EQ(static_cast<float>(bf16(1.0f)), 1.0f);
  EXPECT_EQ(static_cast<float>(bf16(3.14159f)), 3.140625f);
  EXPECT_EQ(bf16(1.0f + 1.0f / 256).bits, bf16(1.0f).bits);  // a tie rounds to even
  EXPECT_TRUE(std::isnan(static_cast<float>(bf16(std::nanf("")))));
}

TEST(Tensor, HostAllocatorCountsBytes) {
  const allocator_stats before = cpu_allocator().stats();
  {
    tensor t = tensor::host({1000});
    EXPECT_EQ(cpu_allocator().stats().allocated_bytes, before.allocated_bytes + 4000);
  }
  EXPECT_EQ(cpu_allocator().stats().allocated_bytes, before.allocated_bytes);
  EXPECT_GT(cpu_allocator().stats().allocations, before.allocations);
}

TEST(Tensor, CudaTensorsFailCleanlyWithoutAGpu) {
  absl::StatusOr<tensor> t = tensor::empty({4}, dtype::f32, device::cuda(0));
  if (t.ok()) GTEST_SKIP() << "a CUDA device is present; the gpu tests cover it";
  EXPECT_FALSE(t.status().message().empty());
}

}  // namespace
}  // namespace troupe::tensor

// The CUDA twin of the pipeline's and the tensor-parallel group's data plane (issue 18): the
// same stage_link calls pipeline_stage makes over Gloo with host tensors, here with device
// tensors over NCCL (grouped ncclSend/ncclRecv, ncclAllReduce). NCCL puts one rank per GPU, so
// both need two GPUs: with fewer they skip (a device machine has one). CTest label `gpu`.

#include <cmath>
#include <cstring>
#include <optional>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "actors/pipeline_schedule.hpp"
#include "actors/stage_link.hpp"
#include "kernels/matmul.hpp"
#include "runtime/comm/nccl_communicator.hpp"
#include "runtime/tensor/cuda_device.hpp"

namespace troupe::actors {
namespace {

using tensor::bf16;
using tensor::device;

class StageLinkCuda : public ::testing::Test {
 protected:
  void SetUp() override {
    auto devices = tensor::cuda_devices();
    if (!devices.ok() || devices->size() < 2) {
      GTEST_SKIP() << "two ranks need two GPUs (NCCL puts one rank per GPU); this machine has "
                   << (devices.ok() ? devices->size() : 0);
    }
  }

  static tensor::tensor filled(int64_t n, float value, int gpu) {
    tensor::tensor host = tensor::tensor::host({n});
    std::fill(host.data<float>(), host.data<float>() + n, value);
    return *host.to(device::cuda(gpu));
  }
  static std::vector<float> download(const tensor::tensor& t) {
    tensor::tensor host = *t.to(device::cpu());
    return std::vector<float>(host.data<float>(), host.data<float>() + host.numel());
  }
};

// Two stages run 1F1B's plan over eight micro-batches as pipeline_stage pairs its transfers:
// each unit's output posted together with the receive the next unit needs. Every micro-batch's
// activations arrive downstream and its gradients upstream, each the one it should be.
TEST_F(StageLinkCuda, ActivationsAndGradientsCrossTheStageBoundaryOnTheGpu) {
  constexpr int stages = 2, micro_batches = 8;
  constexpr int64_t n = 4096;
  comm::memory_store store;
  std::vector<std::thread> threads;
  for (int s = 0; s < stages; ++s) {
    threads.emplace_back([&, s] {
      auto pipe = comm::make_nccl_communicator(store, {.name = "pp", .rank = s, .size = stages}, s);
      ASSERT_TRUE(pipe.ok()) << pipe.status();
      const stage_link link(pipe->get(), s, stages);
      tensor::tensor in = filled(n, 0, s);
      std::optional<comm::transfer> pending;
      for (const pipeline_action& a :
           stage_schedule(pipeline_schedule_kind::one_f_one_b, stages, s, micro_batches)) {
        const bool forward = a.op == pipeline_action::kind::forward;
        std::vector<comm::transfer> recvs;
        if (forward && !link.first()) recvs.push_back(link.activations_in(in, a.micro_batch));
        if (!forward && !link.last()) recvs.push_back(link.gradients_in(in, a.micro_batch));
        std::vector<comm::transfer> sends;
        if (pending) sends.push_back(*std::move(pending));
        pending.reset();
        if (!sends.empty() || !recvs.empty()) {
          ASSERT_TRUE(link.exchange(sends, recvs).ok());
        }
        const float mb = static_cast<float>(a.micro_batch + 1);
        // What came in is micro-batch mb's: its activations (mb) or their gradients (-mb).
        if (!recvs.empty()) {
          EXPECT_EQ(download(in), std::vector<float>(n, forward ? mb : -mb))
              << "stage " << s << " micro-batch " << a.micro_batch;
        }
        if (forward && !link.last())
          pending = link.activations_out(filled(n, mb, s), a.micro_batch);
        if (!forward && !link.first())
          pending = link.gradients_out(filled(n, -mb, s), a.micro_batch);
      }
      if (pending) {
        ASSERT_TRUE(link.exchange({*std::move(pending)}, {}).ok());
      }
    });
  }
  for (auto& t : threads)
    t.join();
}

// A row-parallel projection as a tensor-parallel block computes it: each rank multiplies its
// columns of the input by its rows of the weight (bf16, fp32 accumulation, cuBLASLt), and the
// sum over the group is the whole product.
TEST_F(StageLinkCuda, RowParallelPartsSumToTheWholeProductOnTheGpu) {
  constexpr int ranks = 2, rows = 64, k = 256, cols = 96, part = k / ranks;
  std::vector<float> x(rows * k), w(k * cols);
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = static_cast<float>(bf16(std::sin(0.37f * i)));
  for (size_t i = 0; i < w.size(); ++i)
    w[i] = static_cast<float>(bf16(std::cos(0.11f * i) * 0.1f));
  std::vector<double> want(rows * cols, 0.0);
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c)
      for (int j = 0; j < k; ++j)
        want[r * cols + c] += double(x[r * k + j]) * w[j * cols + c];
  comm::memory_store store;
  std::vector<std::thread> threads;
  for (int t = 0; t < ranks; ++t) {
    threads.emplace_back([&, t] {
      auto group = comm::make_nccl_communicator(store, {.name = "tp", .rank = t, .size = ranks}, t);
      ASSERT_TRUE(group.ok()) << group.status();
      // This rank's columns of x and rows of w, in bf16 on its GPU.
      std::vector<bf16> xs(rows * part), ws(part * cols);
      for (int r = 0; r < rows; ++r)
        for (int j = 0; j < part; ++j)
          xs[r * part + j] = bf16(x[r * k + t * part + j]);
      for (int j = 0; j < part; ++j)
        for (int c = 0; c < cols; ++c)
          ws[j * cols + c] = bf16(w[(t * part + j) * cols + c]);
      const auto upload = [&](const std::vector<bf16>& v) {
        tensor::tensor host =
            tensor::tensor::host({static_cast<int64_t>(v.size())}, tensor::dtype::bf16);
        std::memcpy(host.raw(), v.data(), v.size() * sizeof(bf16));
        return *host.to(device::cuda(t));
      };
      const tensor::tensor dx = upload(xs), dw = upload(ws);
      tensor::tensor out =
          *tensor::tensor::zeros({rows * cols}, tensor::dtype::f32, device::cuda(t));
      ASSERT_TRUE(kernels::cuda::matmul(out.raw(), tensor::dtype::f32, dx.data<bf16>(),
                                        dw.data<bf16>(), nullptr, {rows, cols, part}, nullptr)
                      .ok());
      (void)download(out);  // the product is done before the group's stream sums it
      ASSERT_TRUE(tensor_parallel_sum(**group, out).ok());
      const std::vector<float> got = download(out);
      for (size_t i = 0; i < got.size(); ++i)
        ASSERT_NEAR(got[i], want[i], 1e-3 + 1e-3 * std::abs(want[i])) << "rank " << t << " " << i;
    });
  }
  for (auto& t : threads)
    t.join();
}

}  // namespace
}  // namespace troupe::actors

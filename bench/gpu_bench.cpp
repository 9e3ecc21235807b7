// GPU figures for a session with the device machine, each against its baseline in the same run:
//   gemm: troupe's cuBLASLt bf16 GEMM at 8192^3 against cublasGemmEx (cuBLAS) on the same buffers
//   hbm: a troupe elementwise kernel (2 reads + 1 write) against cudaMemcpy device to device
//   train: tokens/s of a training step (forward + backward + AdamW) at the GPT-2 124M shape
//          (12 layers, dim 768, 12 heads, ctx 1024, vocab 50304), batch 8
//
//   gpu_bench [--repeats R] [--batch B] [--torch-tokens-per-s X] [--only gemm|hbm|train]
// The training row's baseline is PyTorch on the same GPU (bench/ref_gpt_cuda_torch.py), run just
// before by scripts/gpu_check.sh and passed in with --torch-tokens-per-s.

#include <chrono>
#include <cstdio>
#include <functional>
#include <string>

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "bench/bench_report.hpp"
#include "kernels/matmul.hpp"
#include "kernels/residual.hpp"
#include "models/decoder/decoder_cuda_model.hpp"

namespace {

using namespace troupe;

void check(const absl::Status& s, const char* what) {
  if (!s.ok()) {
    std::fprintf(stderr, "gpu_bench: %s: %s\n", what, std::string(s.message()).c_str());
    std::exit(1);
  }
}

double seconds(const std::function<void()>& fn, int iters) {
  fn();
  cudaDeviceSynchronize();
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < iters; ++i)
    fn();
  cudaDeviceSynchronize();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / iters;
}

tensor::tensor device_tensor(int64_t n, tensor::dtype t) {
  auto r = tensor::tensor::zeros({n}, t, tensor::device::cuda(0));
  check(r.status(), "allocate");
  return *r;
}

void gemm(int repeats) {
  const int n = 8192;
  auto a = device_tensor(int64_t{n} * n, tensor::dtype::bf16),
       b = device_tensor(int64_t{n} * n, tensor::dtype::bf16),
       c = device_tensor(int64_t{n} * n, tensor::dtype::bf16);
  cublasHandle_t handle;
  cublasCreate(&handle);
  const double flops = 2.0 * n * n * n;
  std::vector<double> ours, theirs;
  for (int r = 0; r < repeats; ++r) {
    ours.push_back(flops / 1e12 /
                   seconds(
                       [&] {
                         check(kernels::cuda::matmul(c.raw(), tensor::dtype::bf16,
                                                     a.data<tensor::bf16>(), b.data<tensor::bf16>(),
                                                     nullptr, {n, n, n}, nullptr),
                               "matmul");
                       },
                       20));
    theirs.push_back(flops / 1e12 /
                     seconds(
                         [&] {
                           const float alpha = 1.0f, beta = 0.0f;
                           cublasGemmEx(handle, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &alpha, b.raw(),
                                        CUDA_R_16BF, n, a.raw(), CUDA_R_16BF, n, &beta, c.raw(),
                                        CUDA_R_16BF, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
                         },
                         20));
  }
  cublasDestroy(handle);
  bench::report("gpu_bench", "gemm_bf16_8192", ours, "TFLOP/s", "cublasGemmEx", theirs,
                bench::better::higher, {{"m", n}, {"n", n}, {"k", n}});
}

void hbm(int repeats) {
  const int64_t n = int64_t{1} << 30;  // 2 GiB of bf16 per buffer
  auto x = device_tensor(n, tensor::dtype::bf16), y = device_tensor(n, tensor::dtype::bf16),
       z = device_tensor(n, tensor::dtype::bf16);
  std::vector<double> ours, theirs;
  for (int r = 0; r < repeats; ++r) {
    ours.push_back(3.0 * n * 2 / 1e9 /
                   seconds(
                       [&] {
                         check(kernels::cuda::residual_forward(z.data<tensor::bf16>(),
                                                               x.data<tensor::bf16>(),
                                                               y.data<tensor::bf16>(), n, nullptr),
                               "residual");
                       },
                       10));
    theirs.push_back(
        2.0 * n * 2 / 1e9 /
        seconds([&] { cudaMemcpy(z.raw(), x.raw(), n * 2, cudaMemcpyDeviceToDevice); }, 10));
  }
  bench::report("gpu_bench", "hbm_bandwidth", ours, "GB/s", "cudaMemcpy device to device", theirs,
                bench::better::higher, {{"bytes_per_buffer", n * 2}});
}

void train(int repeats, int batch, double torch_tokens_per_s) {
  const models::decoder_config config{50304, 1024, 12, 768, 12};
  models::decoder_layout layout(config, models::layer_range::all(config));
  auto model = models::decoder_cuda_model::create(layout, batch, 0, 1);
  check(model.status(), "model");
  const int N = batch * config.ctx;
  tensor::tensor tokens = tensor::tensor::host({N}, tensor::dtype::i32),
                 targets = tensor::tensor::host({N}, tensor::dtype::i32);
  for (int i = 0; i < N; ++i) {
    tokens.data<int32_t>()[i] = (i * 2654435761u >> 8) % 50257;
    targets.data<int32_t>()[i] = (i * 40503u + 7) % 50257;
  }
  auto d_tokens = *tokens.to(tensor::device::cuda(0));
  auto d_targets = *targets.to(tensor::device::cuda(0));
  std::vector<double> rates, steps;
  for (int r = 0; r < repeats; ++r) {
    const double s = seconds(
        [&] {
          check((*model)->train_step(d_tokens, d_targets, batch, config.ctx, 1.0f / N).status(),
                "train_step");
          check((*model)->optimizer_step({6e-4f, 0.9f, 0.95f, 1e-8f, 0.0f, 1}, 0.1f), "adamw");
        },
        5);
    rates.push_back(N / s);
  }
  // For scale, llm.c publishes about 471k tokens/s per H100 at this shape.
  const double value = bench::median(rates);
  nlohmann::json line = {{"bench", "gpu_bench"},
                         {"metric", "train_tokens_per_s_gpt2_124m"},
                         {"value", value},
                         {"unit", "tokens/s"},
                         {"baseline", "pytorch bf16 autocast (bench/ref_gpt_cuda_torch.py)"},
                         {"baseline_value", torch_tokens_per_s},
                         {"ratio", torch_tokens_per_s > 0 ? value / torch_tokens_per_s : 0.0},
                         {"batch", batch},
                         {"params", layout.total()}};
  std::printf("%s\n", line.dump().c_str());
}

}  // namespace

int main(int argc, char** argv) {
  int repeats = 5, batch = 8;
  double torch_tokens_per_s = 0;
  std::string only;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    if (k == "--repeats")
      repeats = std::atoi(argv[i + 1]);
    else if (k == "--batch")
      batch = std::atoi(argv[i + 1]);
    else if (k == "--torch-tokens-per-s")
      torch_tokens_per_s = std::atof(argv[i + 1]);
    else if (k == "--only")
      only = argv[i + 1];
    else
      return bench::unknown_argument("gpu_bench", k);
  }
  if (!only.empty() && only != "gemm" && only != "hbm" && only != "train") {
    std::fprintf(stderr, "gpu_bench: --only %s: expected gemm, hbm or train\n", only.c_str());
    return 2;
  }
  if (only.empty() || only == "gemm") gemm(repeats);
  if (only.empty() || only == "hbm") hbm(repeats);
  if (only.empty() || only == "train") train(repeats, batch, torch_tokens_per_s);
  return 0;
}

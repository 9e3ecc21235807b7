// GFLOP/s of troupe's CPU matmul at the tiny GPT's shapes (batch 16 x 128 tokens) against calling
// OpenBLAS's cblas_sgemm directly on the same buffers, alternating, in the same run, both on one
// core: the trainer runs one model replica per core, single-threaded kernels in each.
//
//   gemm_bench [--repeats R]

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include <cblas.h>

#include "bench/bench_report.hpp"
#include "kernels/matmul.hpp"

namespace {

using troupe::kernels::gemm;

struct shape {
  const char* name;
  gemm g;
};

// Forward, input-gradient and weight-gradient GEMMs of one block and of the tied head.
const shape shapes[] = {
    {"qkv_forward", {2048, 384, 128}},
    {"fc_forward", {2048, 512, 128}},
    {"fc2_forward", {2048, 128, 512}},
    {"head_forward", {2048, 256, 128, false, true}},
    {"fc2_input_grad", {2048, 512, 128, false, true}},
    {"fc_weight_grad", {128, 512, 2048, true, false, true}},
};

double seconds_per_call(const std::function<void()>& fn, int calls) {
  fn();
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < calls; ++i)
    fn();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / calls;
}

}  // namespace

int main(int argc, char** argv) {
  int repeats = 7;
  if (argc == 3 && std::string(argv[1]) == "--repeats") repeats = std::atoi(argv[2]);
  troupe::kernels::cpu::set_blas_threads(1);
  for (const shape& s : shapes) {
    const gemm& g = s.g;
    std::vector<float> a(int64_t{g.m} * g.k, 0.5f), b(int64_t{g.k} * g.n, 0.25f),
        out(int64_t{g.m} * g.n);
    const double flops = 2.0 * g.m * g.n * g.k;
    const int calls = std::max(3, static_cast<int>(2e9 / flops));
    std::vector<double> ours, theirs;
    for (int r = 0; r < repeats; ++r) {
      ours.push_back(
          flops / 1e9 /
          seconds_per_call(
              [&] { troupe::kernels::cpu::matmul(out.data(), a.data(), b.data(), nullptr, g); },
              calls));
      theirs.push_back(flops / 1e9 /
                       seconds_per_call(
                           [&] {
                             cblas_sgemm(CblasRowMajor, g.trans_a ? CblasTrans : CblasNoTrans,
                                         g.trans_b ? CblasTrans : CblasNoTrans, g.m, g.n, g.k, 1.0f,
                                         a.data(), g.trans_a ? g.m : g.k, b.data(),
                                         g.trans_b ? g.k : g.n, g.accumulate ? 1.0f : 0.0f,
                                         out.data(), g.n);
                           },
                           calls));
    }
    troupe::bench::report(
        "gemm_bench", s.name, ours, "GFLOP/s", "openblas cblas_sgemm", theirs,
        troupe::bench::better::higher,
        {{"m", g.m}, {"n", g.n}, {"k", g.k}, {"trans_a", g.trans_a}, {"trans_b", g.trans_b}});
  }
  return 0;
}

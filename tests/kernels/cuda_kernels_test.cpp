// Every CUDA kernel against its CPU twin with an absolute plus relative tolerance (bf16 inputs,
// fp32 accumulation). CTest label `gpu`; skips without a CUDA device.

#include <cmath>

#include <gtest/gtest.h>

#include "kernels/adamw.hpp"
#include "kernels/attention.hpp"
#include "kernels/cross_entropy.hpp"
#include "kernels/embedding.hpp"
#include "kernels/gelu.hpp"
#include "kernels/kv_cache.hpp"
#include "kernels/layernorm.hpp"
#include "kernels/matmul.hpp"
#include "kernels/quantized_matmul.hpp"
#include "kernels/residual.hpp"
#include "kernels/rmsnorm.hpp"
#include "kernels/rope.hpp"
#include "kernels/sampling.hpp"
#include "kernels/swiglu.hpp"
#include "runtime/tensor/cuda_device.hpp"
#include "runtime/tensor/tensor.hpp"
#include "tests/kernels/gradient_check.hpp"

namespace troupe::kernels {
namespace {

using tensor::bf16;
using tensor::device;
using tensor::dtype;
using testing::random_values;

class CudaKernels : public ::testing::Test {
 protected:
  void SetUp() override {
    auto devices = tensor::cuda_devices();
    if (!devices.ok() || devices->empty()) GTEST_SKIP() << "no CUDA device";
  }

  // Values rounded to bf16, so CPU and GPU start from the same numbers.
  static std::vector<float> rounded(std::vector<float> v) {
    for (auto& x : v)
      x = static_cast<float>(bf16(x));
    return v;
  }
  template <class T>
  static tensor::tensor upload(const std::vector<T>& v) {
    tensor::tensor host =
        tensor::tensor::host({static_cast<int64_t>(v.size())}, tensor::dtype_of<T>());
    std::memcpy(host.raw(), v.data(), v.size() * sizeof(T));
    return *host.to(device::cuda(0));
  }
  static tensor::tensor upload_bf16(const std::vector<float>& v) {
    std::vector<bf16> b(v.size());
    for (size_t i = 0; i < v.size(); ++i)
      b[i] = bf16(v[i]);
    return upload(b);
  }
  static tensor::tensor zeros(int64_t n, dtype t) {
    return *tensor::tensor::zeros({n}, t, device::cuda(0));
  }
  static std::vector<float> download(const tensor::tensor& t) {
    tensor::tensor host = *t.to(device::cpu());
    std::vector<float> out(t.numel());
    for (int64_t i = 0; i < t.numel(); ++i) {
      out[i] = t.type() == dtype::bf16 ? static_cast<float>(host.data<bf16>()[i])
                                       : host.data<float>()[i];
    }
    return out;
  }
  static void expect_close(const std::vector<float>& got, const std::vector<float>& want,
                           double atol, double rtol, const char* what) {
    ASSERT_EQ(got.size(), want.size()) << what;
    int bad = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      if (std::abs(got[i] - want[i]) > atol + rtol * std::abs(want[i]) && ++bad <= 5) {
        ADD_FAILURE() << what << "[" << i << "]: cuda " << got[i] << ", cpu " << want[i];
      }
    }
  }
  // The CUDA layernorm forward and backward at [rows, dim] against the CPU one.
  void check_layernorm(int rows, int dim);
  // The CUDA attention at shape `s`, with `limit` bytes of score scratch, against the CPU one.
  void check_attention(const attention_shape& s, int64_t limit, int shift);
  // The CUDA RMSNorm forward and backward over `r`'s rows of a buffer of `size` values, against
  // the CPU one on each token's rows; the values between rows are left alone.
  void check_rmsnorm(const cuda::norm_rows& r, int64_t size);

  void* stream_ = nullptr;  // the default stream
};

TEST_F(CudaKernels, MatmulEveryTransposeWithBias) {
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      const gemm g{67, 96, 80, ta, tb, false};
      auto a = rounded(random_values(g.m * g.k, 1)), b = rounded(random_values(g.k * g.n, 2));
      auto bias = rounded(random_values(g.n, 3));
      std::vector<float> want(g.m * g.n);
      cpu::matmul(want.data(), a.data(), b.data(), bias.data(), g);
      auto da = upload_bf16(a), db = upload_bf16(b), dbias = upload_bf16(bias);
      auto out = zeros(g.m * g.n, dtype::f32);
      ASSERT_TRUE(cuda::matmul(out.raw(), dtype::f32, da.data<bf16>(), db.data<bf16>(),
                               dbias.data<bf16>(), g, stream_)
                      .ok());
      expect_close(download(out), want, 1e-3, 1e-3, "matmul f32 out");
      auto out16 = zeros(g.m * g.n, dtype::bf16);
      ASSERT_TRUE(cuda::matmul(out16.raw(), dtype::bf16, da.data<bf16>(), db.data<bf16>(),
                               dbias.data<bf16>(), g, stream_)
                      .ok());
      expect_close(download(out16), want, 1e-2, 1e-2, "matmul bf16 out");
    }
  }
}

// The bias gradient adds the column sums to what is there, over stripes of rows that do not
// divide the row count and columns that do not fill a warp.
TEST_F(CudaKernels, BiasBackwardAddsTheColumnSums) {
  const int m = 1000, n = 70;
  auto dout = rounded(random_values(int64_t{m} * n, 4)), start = random_values(n, 5);
  std::vector<float> want = start;
  cpu::bias_backward(want.data(), dout.data(), m, n);
  auto d_dout = upload_bf16(dout), d_bias = upload(start);
  ASSERT_TRUE(cuda::bias_backward(d_bias.data<float>(), d_dout.data<bf16>(), m, n, stream_).ok());
  expect_close(download(d_bias), want, 1e-4, 1e-5, "bias gradient");
}

// A strided batch of three products, each against the CPU one.
TEST_F(CudaKernels, BatchedMatmulIsEachProduct) {
  const gemm g{45, 64, 40, false, true, false};
  const int batch = 3;
  auto a = rounded(random_values(int64_t{batch} * g.m * g.k, 6));
  auto b = rounded(random_values(int64_t{batch} * g.n * g.k, 7));
  std::vector<float> want(int64_t{batch} * g.m * g.n);
  for (int i = 0; i < batch; ++i) {
    cpu::matmul(want.data() + i * g.m * g.n, a.data() + i * g.m * g.k, b.data() + i * g.n * g.k,
                nullptr, g);
  }
  auto da = upload_bf16(a), db = upload_bf16(b);
  auto out = zeros(int64_t{batch} * g.m * g.n, dtype::f32);
  cuda::batched_gemm bg{.shape = g,
                        .batch = batch,
                        .stride_a = int64_t{g.m} * g.k,
                        .stride_b = int64_t{g.n} * g.k,
                        .stride_out = int64_t{g.m} * g.n};
  ASSERT_TRUE(
      cuda::matmul_batched(out.raw(), dtype::f32, da.data<bf16>(), db.data<bf16>(), bg, stream_)
          .ok());
  expect_close(download(out), want, 1e-3, 1e-3, "batched matmul");
}

// Widths for both input-gradient kernels: multiples of 8 (one and four groups of 8 per lane,
// 16-byte loads) and one that is not.
TEST_F(CudaKernels, LayernormForwardAndBackward) {
  for (int dim : {96, 1000, 770}) {
    SCOPED_TRACE(::testing::Message() << "dim " << dim);
    check_layernorm(37, dim);
  }
}

void CudaKernels::check_layernorm(int rows, int dim) {
  auto in = rounded(random_values(rows * dim, 1, -2, 2)),
       w = rounded(random_values(dim, 2, 0.5, 1.5));
  auto b = rounded(random_values(dim, 3)), dout = rounded(random_values(rows * dim, 4));
  std::vector<float> out(rows * dim), mean(rows), rstd(rows), din(rows * dim, 0), dw(dim, 0),
      db(dim, 0);
  cpu::layernorm_forward(out.data(), mean.data(), rstd.data(), in.data(), w.data(), b.data(), rows,
                         dim);
  cpu::layernorm_backward(din.data(), dw.data(), db.data(), dout.data(), in.data(), w.data(),
                          mean.data(), rstd.data(), rows, dim);
  auto d_in = upload_bf16(in), d_w = upload_bf16(w), d_b = upload_bf16(b),
       d_dout = upload_bf16(dout);
  auto d_out = zeros(rows * dim, dtype::bf16), d_mean = zeros(rows, dtype::f32),
       d_rstd = zeros(rows, dtype::f32), d_din = zeros(rows * dim, dtype::bf16),
       d_dw = zeros(dim, dtype::f32), d_db = zeros(dim, dtype::f32);
  ASSERT_TRUE(cuda::layernorm_forward(d_out.data<bf16>(), d_mean.data<float>(),
                                      d_rstd.data<float>(), d_in.data<bf16>(), d_w.data<bf16>(),
                                      d_b.data<bf16>(), rows, dim, stream_)
                  .ok());
  ASSERT_TRUE(cuda::layernorm_backward(d_din.data<bf16>(), d_dw.data<float>(), d_db.data<float>(),
                                       d_dout.data<bf16>(), d_in.data<bf16>(), d_w.data<bf16>(),
                                       d_mean.data<float>(), d_rstd.data<float>(), rows, dim,
                                       stream_)
                  .ok());
  expect_close(download(d_out), out, 2e-2, 1e-2, "layernorm out");
  expect_close(download(d_din), din, 2e-2, 2e-2, "layernorm din");
  expect_close(download(d_dw), dw, 1e-3, 1e-3, "layernorm dweight");
  expect_close(download(d_db), db, 1e-3, 1e-3, "layernorm dbias");
}

// The elementwise maps take 8 values a load: a multiple of 8, a tail of 3, and buffers one
// value off 16-byte alignment (one at a time throughout).
TEST_F(CudaKernels, GeluResidualAndEmbedding) {
  for (const auto& [size, offset] : {std::pair{1000, 0}, std::pair{1003, 0}, std::pair{1000, 1}}) {
    const int n = size, shift = offset;
    SCOPED_TRACE(::testing::Message() << n << " values from " << shift);
    auto x = rounded(random_values(n, 1, -4, 4)), y = rounded(random_values(n, 2));
    std::vector<float> g(n), dg(n), sum(n), twice(n);
    cpu::gelu_forward(g.data(), x.data(), n);
    cpu::gelu_backward(dg.data(), x.data(), y.data(), n);
    cpu::residual_forward(sum.data(), x.data(), y.data(), n);
    cpu::residual_forward(twice.data(), sum.data(), y.data(), n);
    auto dx = upload_bf16(x), dy = upload_bf16(y), out = zeros(n, dtype::bf16);
    const int64_t m = n - shift;
    bf16 *o = out.data<bf16>() + shift, *a = dx.data<bf16>() + shift, *b = dy.data<bf16>() + shift;
    const auto from_shift = [&](std::vector<float> v) {
      return std::vector<float>(v.begin() + shift, v.end());
    };
    ASSERT_TRUE(cuda::gelu_forward(o, a, m, stream_).ok());
    expect_close(from_shift(download(out)), from_shift(g), 1e-2, 1e-2, "gelu");
    ASSERT_TRUE(cuda::gelu_backward(o, a, b, m, stream_).ok());
    expect_close(from_shift(download(out)), from_shift(dg), 1e-2, 1e-2, "gelu backward");
    ASSERT_TRUE(cuda::residual_forward(o, a, b, m, stream_).ok());
    expect_close(from_shift(download(out)), from_shift(sum), 1e-2, 1e-2, "residual");
    ASSERT_TRUE(cuda::accumulate(o, b, m, stream_).ok());
    expect_close(from_shift(download(out)), from_shift(twice), 2e-2, 1e-2, "accumulate");
  }

  const int vocab = 50, ctx = 8, dim = 64, rows = 12;
  auto wte = rounded(random_values(vocab * dim, 3)), wpe = rounded(random_values(ctx * dim, 4));
  std::vector<int32_t> tokens(rows), positions(rows);
  for (int i = 0; i < rows; ++i)
    tokens[i] = (i * 7) % vocab, positions[i] = i % ctx;
  auto dout = rounded(random_values(rows * dim, 5));
  std::vector<float> emb(rows * dim), dwte(vocab * dim, 0), dwpe(ctx * dim, 0);
  cpu::embedding_forward(emb.data(), tokens.data(), positions.data(), rows, wte.data(), wpe.data(),
                         dim);
  cpu::embedding_backward(dwte.data(), dwpe.data(), dout.data(), tokens.data(), positions.data(),
                          rows, dim);
  auto d_tokens = upload(tokens), d_pos = upload(positions), d_wte = upload_bf16(wte),
       d_wpe = upload_bf16(wpe), d_dout = upload_bf16(dout), d_emb = zeros(rows * dim, dtype::bf16),
       d_dwte = zeros(vocab * dim, dtype::f32), d_dwpe = zeros(ctx * dim, dtype::f32);
  ASSERT_TRUE(cuda::embedding_forward(d_emb.data<bf16>(), d_tokens.data<int32_t>(),
                                      d_pos.data<int32_t>(), rows, d_wte.data<bf16>(),
                                      d_wpe.data<bf16>(), dim, stream_)
                  .ok());
  ASSERT_TRUE(cuda::embedding_backward(d_dwte.data<float>(), d_dwpe.data<float>(),
                                       d_dout.data<bf16>(), d_tokens.data<int32_t>(),
                                       d_pos.data<int32_t>(), rows, dim, stream_)
                  .ok());
  expect_close(download(d_emb), emb, 1e-2, 1e-2, "embedding");
  expect_close(download(d_dwte), dwte, 1e-5, 1e-5, "embedding dwte");
  expect_close(download(d_dwpe), dwpe, 1e-5, 1e-5, "embedding dwpe");
}

// Against the CPU's attention: two heads of 64 over 45 positions (not a multiple of 8: padded
// score rows), then 64 over 200 with four heads, the first shape with the scores scratch too
// small for more than one head at a time (a chunk per head), and with its rows one element off
// 16-byte alignment (moved one value at a time); then grouped-query attention (four query heads
// on two key/value heads, aligned and not) and multi-query attention (one).
TEST_F(CudaKernels, AttentionForwardAndBackward) {
  struct attention_case {
    attention_shape s;
    int64_t limit = cuda::attention_scores_limit;
    int shift = 0;
  };
  for (const auto& [s, limit, shift] : std::vector<attention_case>{{{2, 45, 128, 2}},
                                                                   {{2, 200, 256, 4}},
                                                                   {{2, 45, 128, 2}, 1},
                                                                   {{2, 45, 128, 2}, 1, 1},
                                                                   {{2, 45, 256, 4, 2}},
                                                                   {{2, 45, 256, 4, 2}, 1, 1},
                                                                   {{1, 70, 256, 4, 1}}}) {
    SCOPED_TRACE(::testing::Message()
                 << "seq " << s.seq << ", heads " << s.heads << "/" << s.kv_head_count()
                 << ", limit " << limit << ", shift " << shift);
    check_attention(s, limit, shift);
  }
}

void CudaKernels::check_attention(const attention_shape& s, int64_t limit, int shift) {
  const int64_t n_qkv = int64_t{s.batch} * s.seq * s.row_width(),
                n_out = int64_t{s.batch} * s.seq * s.dim;
  auto qkv = rounded(random_values(n_qkv, 1, -1, 1)), dout = rounded(random_values(n_out, 2));
  std::vector<float> out(n_out), probs(int64_t{s.batch} * s.heads * s.seq * s.seq), dqkv(n_qkv);
  cpu::attention_forward(out.data(), probs.data(), qkv.data(), s, nullptr);
  cpu::attention_backward(dqkv.data(), dout.data(), qkv.data(), probs.data(), s, nullptr);
  // Every device buffer starts `shift` values into its allocation.
  auto shifted = [&](std::vector<float> v) {
    v.insert(v.begin(), shift, 0.0f);
    return v;
  };
  auto unshifted = [&](const tensor::tensor& t) {
    auto v = download(t);
    return std::vector<float>(v.begin() + shift, v.end());
  };
  auto d_qkv = upload_bf16(shifted(qkv)), d_dout = upload_bf16(shifted(dout)),
       d_out = zeros(n_out + shift, dtype::bf16),
       d_lse = zeros(int64_t{s.batch} * s.heads * s.seq, dtype::f32),
       d_dqkv = zeros(n_qkv + shift, dtype::bf16);
  bf16 *q = d_qkv.data<bf16>() + shift, *o = d_out.data<bf16>() + shift;
  ASSERT_TRUE(cuda::attention_forward(o, d_lse.data<float>(), q, s, stream_, limit).ok());
  expect_close(unshifted(d_out), out, 1e-2, 2e-2, "attention out");
  ASSERT_TRUE(cuda::attention_backward(d_dqkv.data<bf16>() + shift, d_dout.data<bf16>() + shift, q,
                                       o, d_lse.data<float>(), s, stream_, limit)
                  .ok());
  expect_close(unshifted(d_dqkv), dqkv, 2e-2, 3e-2, "attention dqkv");
}

// Plain rows (a width of several warps, and one not a multiple of 32), then Qwen 3's per-head
// norm: four heads of 32 at the start of rows of 200 (the queries of a [q | k | v] row).
TEST_F(CudaKernels, RmsnormForwardAndBackward) {
  check_rmsnorm({.tokens = 37, .dim = 96}, 37 * 96);
  check_rmsnorm({.tokens = 37, .dim = 1000}, 37 * 1000);
  check_rmsnorm({.tokens = 6, .dim = 32, .per_token = 4, .stride = 200}, 6 * 200);
}

void CudaKernels::check_rmsnorm(const cuda::norm_rows& r, int64_t size) {
  SCOPED_TRACE(::testing::Message() << r.tokens << " x " << r.per_token << " rows of " << r.dim
                                    << ", stride " << r.token_stride());
  auto in = rounded(random_values(size, 1, -2, 2)), w = rounded(random_values(r.dim, 2, 0.5, 1.5));
  auto dout = rounded(random_values(size, 3)), din_start = rounded(random_values(size, 4));
  std::vector<float> out = in, rstd(r.count()), din = din_start, dw(r.dim, 0.25f);
  for (int64_t t = 0; t < r.tokens; ++t) {  // a token's rows are contiguous
    const int64_t at = t * r.token_stride();
    cpu::rmsnorm_forward(out.data() + at, rstd.data() + t * r.per_token, in.data() + at, w.data(),
                         r.per_token, r.dim, 1e-6f);
    cpu::rmsnorm_backward(din.data() + at, dw.data(), dout.data() + at, in.data() + at, w.data(),
                          rstd.data() + t * r.per_token, r.per_token, r.dim);
  }
  auto d_in = upload_bf16(in), d_w = upload_bf16(w), d_dout = upload_bf16(dout),
       d_out = upload_bf16(in), d_din = upload_bf16(din_start),
       d_rstd = zeros(r.count(), dtype::f32), d_dw = upload(std::vector<float>(r.dim, 0.25f));
  ASSERT_TRUE(cuda::rmsnorm_forward(d_out.data<bf16>(), d_rstd.data<float>(), d_in.data<bf16>(),
                                    d_w.data<bf16>(), r, 1e-6f, stream_)
                  .ok());
  ASSERT_TRUE(cuda::rmsnorm_backward(d_din.data<bf16>(), d_dw.data<float>(), d_dout.data<bf16>(),
                                     d_in.data<bf16>(), d_w.data<bf16>(), d_rstd.data<float>(), r,
                                     stream_)
                  .ok());
  expect_close(download(d_out), out, 2e-2, 1e-2, "rmsnorm out");
  expect_close(download(d_rstd), rstd, 1e-5, 1e-4, "rmsnorm rstd");
  expect_close(download(d_din), din, 2e-2, 2e-2, "rmsnorm din");
  expect_close(download(d_dw), dw, 1e-3, 1e-3, "rmsnorm dweight");
  // In place, as the decoder norms its queries.
  ASSERT_TRUE(cuda::rmsnorm_forward(d_in.data<bf16>(), nullptr, d_in.data<bf16>(), d_w.data<bf16>(),
                                    r, 1e-6f, stream_)
                  .ok());
  expect_close(download(d_in), out, 2e-2, 1e-2, "rmsnorm in place");
  EXPECT_EQ(
      cuda::rmsnorm_forward(d_out.data<bf16>(), nullptr, d_in.data<bf16>(), d_w.data<bf16>(),
                            {.tokens = 2, .dim = 32, .per_token = 4, .stride = 100}, 1e-6f, stream_)
          .code(),
      absl::StatusCode::kInvalidArgument);
}

// Three heads of 64 at the start of rows of 200, at scattered positions with Llama 3's base:
// the device's angles equal the CPU's, the rotation matches, and backward turns it back.
TEST_F(CudaKernels, RopeForwardAndBackward) {
  const int rows = 9, heads = 3, head_dim = 64, stride = 200;
  std::vector<int32_t> positions = {0, 1, 2, 7, 100, 1000, 4095, 33, 5};
  std::vector<float> inv_freq(head_dim / 2);
  for (int i = 0; i < head_dim / 2; ++i)
    inv_freq[i] = static_cast<float>(1.0 / std::pow(500000.0, 2.0 * i / head_dim));
  std::vector<float> cos(rows * head_dim / 2), sin(cos.size());
  cpu::rope_angles(cos.data(), sin.data(), positions.data(), rows, head_dim, inv_freq.data());
  auto x = rounded(random_values(rows * stride, 1));
  std::vector<float> turned = x;
  cpu::rope_forward(turned.data(), stride, rows, heads, head_dim, cos.data(), sin.data());
  auto d_pos = upload(positions), d_freq = upload(inv_freq), d_x = upload_bf16(x);
  auto d_cos = zeros(rows * head_dim / 2, dtype::f32),
       d_sin = zeros(rows * head_dim / 2, dtype::f32);
  ASSERT_TRUE(cuda::rope_angles(d_cos.data<float>(), d_sin.data<float>(), d_pos.data<int32_t>(),
                                rows, head_dim, d_freq.data<float>(), stream_)
                  .ok());
  expect_close(download(d_cos), cos, 1e-6, 0, "cos");
  expect_close(download(d_sin), sin, 1e-6, 0, "sin");
  ASSERT_TRUE(cuda::rope_forward(d_x.data<bf16>(), stride, rows, heads, head_dim,
                                 d_cos.data<float>(), d_sin.data<float>(), stream_)
                  .ok());
  expect_close(download(d_x), turned, 1e-2, 1e-2, "rope forward");
  ASSERT_TRUE(cuda::rope_backward(d_x.data<bf16>(), stride, rows, heads, head_dim,
                                  d_cos.data<float>(), d_sin.data<float>(), stream_)
                  .ok());
  expect_close(download(d_x), x, 2e-2, 2e-2, "rope backward undoes forward");
}

// Rows of [gate | up], in place in backward as a trainer would run it.
TEST_F(CudaKernels, SwigluForwardAndBackward) {
  const int rows = 7, width = 100;
  auto gate_up = rounded(random_values(rows * 2 * width, 1, -4, 4));
  auto dout = rounded(random_values(rows * width, 2));
  std::vector<float> out(rows * width), dgate_up(rows * 2 * width);
  for (int r = 0; r < rows; ++r) {
    const float* g = gate_up.data() + r * 2 * width;
    cpu::swiglu_forward(out.data() + r * width, g, g + width, width);
    float* d = dgate_up.data() + r * 2 * width;
    cpu::swiglu_backward(d, d + width, g, g + width, dout.data() + r * width, width);
  }
  auto d_gate_up = upload_bf16(gate_up), d_dout = upload_bf16(dout),
       d_out = zeros(rows * width, dtype::bf16);
  ASSERT_TRUE(
      cuda::swiglu_forward(d_out.data<bf16>(), d_gate_up.data<bf16>(), rows, width, stream_).ok());
  expect_close(download(d_out), out, 1e-2, 1e-2, "swiglu");
  ASSERT_TRUE(cuda::swiglu_backward(d_gate_up.data<bf16>(), d_gate_up.data<bf16>(),
                                    d_dout.data<bf16>(), rows, width, stream_)
                  .ok());
  expect_close(download(d_gate_up), dgate_up, 1e-2, 1e-2, "swiglu backward");
}

// Paged decoding with grouped-query attention: four query heads of 32 on two key/value heads,
// two sequences in scattered blocks of 4, one with a chunk of two new rows and one with one,
// against the CPU's cached attention over the same (bf16-rounded) cache; and the shapes it
// refuses.
TEST_F(CudaKernels, PagedAttentionWithGroupedQueries) {
  const int heads = 4, kv_heads = 2, head_dim = 32, Q = heads * head_dim;
  const kv_layout l{4, kv_heads * head_dim};
  const int blocks = 8;
  auto keys = rounded(random_values(blocks * l.block_size * l.width, 1));
  auto values = rounded(random_values(blocks * l.block_size * l.width, 2));
  const std::vector<int32_t> tables = {5, 0, 3, /* b: */ 7, 2, 6};
  const std::vector<int32_t> offsets = {0, 0, 3}, positions = {5, 6, 9};
  const int rows = 3;
  auto q = rounded(random_values(rows * Q, 3));
  std::vector<float> want(rows * Q);
  for (int r = 0; r < rows; ++r) {
    std::vector<const float*> k(positions[r] + 1), v(positions[r] + 1);
    cpu::kv_rows(k.data(), keys.data(), tables.data() + offsets[r], l, positions[r] + 1);
    cpu::kv_rows(v.data(), values.data(), tables.data() + offsets[r], l, positions[r] + 1);
    cpu::cached_attention_forward(want.data() + r * Q, q.data() + r * Q, Q, k.data(), v.data(), 1,
                                  positions[r], Q, heads, kv_heads);
  }
  auto d_keys = upload_bf16(keys), d_values = upload_bf16(values), d_q = upload_bf16(q),
       d_tables = upload(tables), d_offsets = upload(offsets), d_positions = upload(positions),
       d_out = zeros(rows * Q, dtype::bf16);
  auto attend = [&](int h, int kvh, const kv_layout& layout) {
    return cuda::paged_attention(d_out.data<bf16>(), d_q.data<bf16>(), Q, d_keys.data<bf16>(),
                                 d_values.data<bf16>(), d_tables.data<int32_t>(),
                                 d_offsets.data<int32_t>(), d_positions.data<int32_t>(), layout,
                                 rows, h, kvh, stream_);
  };
  ASSERT_TRUE(attend(heads, kv_heads, l).ok());
  expect_close(download(d_out), want, 1e-2, 2e-2, "paged attention");
  EXPECT_EQ(attend(heads, 3, l).code(), absl::StatusCode::kInvalidArgument);  // 3 does not divide 4
  EXPECT_EQ(attend(heads, kv_heads, {4, kv_heads * 16}).code(),
            absl::StatusCode::kInvalidArgument);  // heads of 16
}

// Eight logits a load where the vocabulary is a multiple of 8 (1000), one at a time where not.
TEST_F(CudaKernels, FusedCrossEntropy) {
  for (const int vocab : {1000, 1003}) {
    SCOPED_TRACE(::testing::Message() << "vocab " << vocab);
    const int rows = 9;
    auto logits = rounded(random_values(rows * vocab, 1, -4, 4));
    std::vector<int32_t> targets = {0, 999, 5, -1, 7, 500, 3, 3, 12};
    std::vector<float> losses(rows), probs(logits.size());
    cpu::cross_entropy_forward(losses.data(), probs.data(), logits.data(), targets.data(), rows,
                               vocab);
    cpu::cross_entropy_backward(probs.data(), probs.data(), targets.data(), 0.125f, rows, vocab);
    auto d_logits = upload_bf16(logits), d_targets = upload(targets),
         d_losses = zeros(rows, dtype::f32);
    ASSERT_TRUE(cuda::cross_entropy_fused(d_losses.data<float>(), d_logits.data<bf16>(),
                                          d_targets.data<int32_t>(), 0.125f, rows, vocab, stream_)
                    .ok());
    expect_close(download(d_losses), losses, 1e-3, 1e-3, "losses");
    expect_close(download(d_logits), probs, 1e-4, 2e-2, "dlogits");
  }
}

TEST_F(CudaKernels, AdamWAndGradientNorm) {
  const int n = 5000;
  auto params = random_values(n, 1), grads = random_values(n, 2);
  std::vector<float> m(n, 0), v(n, 0), want = params;
  adamw_params p{1e-2f, 0.9f, 0.95f, 1e-8f, 0.1f, 3};
  cpu::adamw_update(want.data(), grads.data(), m.data(), v.data(), n, p, 0.5f);
  auto d_params = upload(params), d_grads = upload(grads), d_m = zeros(n, dtype::f32),
       d_v = zeros(n, dtype::f32), d_bf = zeros(n, dtype::bf16);
  ASSERT_TRUE(cuda::adamw_update(d_params.data<float>(), d_bf.data<bf16>(), d_grads.data<float>(),
                                 d_m.data<float>(), d_v.data<float>(), n, p, 0.5f, stream_)
                  .ok());
  expect_close(download(d_params), want, 1e-6, 1e-5, "adamw params");
  expect_close(download(d_bf), want, 1e-2, 1e-2, "adamw bf16 copy");
  absl::StatusOr<double> norm = cuda::sum_of_squares(d_grads.data<float>(), n, stream_);
  ASSERT_TRUE(norm.ok()) << norm.status();
  EXPECT_NEAR(*norm, cpu::sum_of_squares(grads.data(), n), 1e-6 * *norm);
}

TEST_F(CudaKernels, SamplingAndPagedCache) {
  std::vector<float> logits = {0.5f, 2.0f, -1.0f, 1.0f, 0.0f, 3.0f, -2.0f, 1.5f};
  auto d_logits = upload(logits);
  EXPECT_EQ(*cuda::sample_token(d_logits.data<float>(), 8, {0.0f, 0, 1.0f}, 1, 0, stream_), 5);
  for (uint64_t c = 0; c < 200; ++c) {
    const int top3 = *cuda::sample_token(d_logits.data<float>(), 8, {1.0f, 3, 1.0f}, 9, c, stream_);
    EXPECT_TRUE(top3 == 5 || top3 == 1 || top3 == 7) << top3;
    const int nucleus =
        *cuda::sample_token(d_logits.data<float>(), 8, {1.0f, 0, 0.7f}, 9, c, stream_);
    EXPECT_TRUE(nucleus == 5 || nucleus == 1) << nucleus;
  }

  const kv_layout l{4, 64};
  const int n = 13;
  std::vector<int32_t> table = {6, 1, 7, 3};
  auto values = rounded(random_values(n * l.width, 3));
  auto d_cache = zeros(8 * l.block_size * l.width, dtype::bf16), d_table = upload(table),
       d_values = upload_bf16(values), d_out = zeros(n * l.width, dtype::bf16);
  ASSERT_TRUE(cuda::kv_append(d_cache.data<bf16>(), d_table.data<int32_t>(), l, 0,
                              d_values.data<bf16>(), l.width, n, stream_)
                  .ok());
  ASSERT_TRUE(cuda::kv_gather(d_out.data<bf16>(), d_cache.data<bf16>(), d_table.data<int32_t>(), l,
                              n, stream_)
                  .ok());
  expect_close(download(d_out), values, 0, 0, "kv cache round trip");
}

// Weight-only quantized matmul, int8 per output channel and int4 in groups with zero points,
// against the CPU kernel on the same bf16-rounded activations.
TEST_F(CudaKernels, QuantizedMatmulInt8AndInt4) {
  const int rows = 70, cols = 256, m = 6;
  const auto w = random_values(rows * cols, 11);
  const auto x = rounded(random_values(m * cols, 12));
  const auto bias = rounded(random_values(rows, 13));
  for (const auto& [bits, group] : {std::pair{8, 256}, std::pair{4, 32}}) {
    quantized_matrix q{bits, rows, cols, group};
    std::vector<uint8_t> ints(rows * q.row_bytes());
    std::vector<float> scales(rows * q.groups()), zeros = random_values(rows * q.groups(), 14);
    cpu::quantize_symmetric(w.data(), cols, 1, bits, rows, cols, group, ints.data(), scales.data());
    q.q = ints.data(), q.scales = scales.data(), q.zeros = bits == 4 ? zeros.data() : nullptr;
    std::vector<float> want(m * rows);
    cpu::quantized_matmul(want.data(), x.data(), q, bias.data(), m);
    // The integers as 32-bit words on the device (the kernel reads them as bytes).
    std::vector<int32_t> words((ints.size() + 3) / 4);
    std::memcpy(words.data(), ints.data(), ints.size());
    auto d_q = upload(words), d_scales = upload(scales), d_zeros = upload(zeros),
         d_x = upload_bf16(x), d_bias = upload_bf16(bias),
         d_out = this->zeros(m * rows, dtype::bf16);
    quantized_matrix on_device = q;
    on_device.q = reinterpret_cast<const uint8_t*>(d_q.data<int32_t>());
    on_device.scales = d_scales.data<float>();
    on_device.zeros = q.zeros != nullptr ? d_zeros.data<float>() : nullptr;
    ASSERT_TRUE(cuda::quantized_matmul(d_out.data<bf16>(), d_x.data<bf16>(), on_device,
                                       d_bias.data<bf16>(), m, stream_)
                    .ok());
    expect_close(download(d_out), want, 2e-2, 1e-2, bits == 8 ? "int8 matmul" : "int4 matmul");
  }
}

}  // namespace
}  // namespace troupe::kernels

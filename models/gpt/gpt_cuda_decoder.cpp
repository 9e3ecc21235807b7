#include "models/gpt/gpt_cuda_decoder.hpp"

#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/embedding.hpp"
#include "kernels/gelu.hpp"
#include "kernels/kv_cache.hpp"
#include "kernels/layernorm.hpp"
#include "kernels/matmul.hpp"
#include "kernels/residual.hpp"
#include "runtime/tensor/cuda_device.hpp"
#include "runtime/tensor/tensor.hpp"

namespace troupe::models {
namespace {

namespace cuda = kernels::cuda;
using kernels::gemm;
using tensor::bf16;
using tensor::dtype;

class gpt_cuda_decoder final : public gpt_decoder {
 public:
  gpt_cuda_decoder(const gpt_layout& layout, int max_tokens, int cache_blocks, int block_size,
                   int device)
      : layout_(layout),
        max_tokens_(max_tokens),
        cache_blocks_(cache_blocks),
        kv_{block_size, layout.config().dim},
        device_(device) {}

  absl::Status allocate(const float* params) {
    const gpt_config& c = layout_.config();
    const auto where = tensor::device::cuda(device_);
    const int64_t N = max_tokens_, C = c.dim;
    const int64_t table_capacity = N * ((c.ctx + kv_.block_size - 1) / kv_.block_size);
    auto make = [&](tensor::tensor& t, int64_t n, dtype type) -> absl::Status {
      TROUPE_ASSIGN_OR_RETURN(t, tensor::tensor::zeros({n}, type, where));
      return absl::OkStatus();
    };
    TROUPE_RETURN_IF_ERROR(set_weights(params));
    pools_.resize(2 * c.layers);
    for (auto& pool : pools_)
      TROUPE_RETURN_IF_ERROR(make(pool, int64_t{cache_blocks_} * kv_.block_size * C, dtype::bf16));
    TROUPE_RETURN_IF_ERROR(make(x_, N * C, dtype::bf16));
    TROUPE_RETURN_IF_ERROR(make(ln_, N * C, dtype::bf16));
    TROUPE_RETURN_IF_ERROR(make(qkv_, N * 3 * C, dtype::bf16));
    TROUPE_RETURN_IF_ERROR(make(atty_, N * C, dtype::bf16));
    TROUPE_RETURN_IF_ERROR(make(tmp_, N * C, dtype::bf16));
    TROUPE_RETURN_IF_ERROR(make(fc_, N * 4 * C, dtype::bf16));
    TROUPE_RETURN_IF_ERROR(make(last_, N * C, dtype::bf16));
    TROUPE_RETURN_IF_ERROR(make(mean_, N, dtype::f32));
    TROUPE_RETURN_IF_ERROR(make(rstd_, N, dtype::f32));
    TROUPE_RETURN_IF_ERROR(make(logits_, N * c.vocab, dtype::f32));
    // Per row: token, position, offset of its block table; then the block tables.
    TROUPE_RETURN_IF_ERROR(make(indices_, 3 * N + table_capacity, dtype::i32));
    host_indices_ = tensor::tensor::host({3 * N + table_capacity}, dtype::i32);
    return absl::OkStatus();
  }

  absl::Status set_weights(const float* params) override {
    tensor::tensor host = tensor::tensor::host({layout_.total()}, dtype::bf16);
    for (int64_t i = 0; i < layout_.total(); ++i)
      host.data<bf16>()[i] = bf16(params[i]);
    TROUPE_ASSIGN_OR_RETURN(weights_, host.to(tensor::device::cuda(device_)));
    return absl::OkStatus();
  }

  absl::Status forward(std::span<const decode_request> requests, float* logits) override {
    const gpt_config& c = layout_.config();
    TROUPE_RETURN_IF_ERROR(
        validate_decode_batch(c, cache_blocks_, kv_.block_size, max_tokens_, requests));
    const int C = c.dim, R = static_cast<int>(requests.size());
    // The batch's indices, uploaded in one copy.
    int32_t* host = host_indices_.data<int32_t>();
    int32_t *tokens = host, *positions = host + max_tokens_, *offsets = host + 2 * max_tokens_;
    int32_t* tables = host + 3 * max_tokens_;
    std::vector<int> table_of(R);
    int N = 0, table_size = 0;
    for (int i = 0; i < R; ++i) {
      const decode_request& r = requests[i];
      const int blocks = (r.first_position + r.count + kv_.block_size - 1) / kv_.block_size;
      table_of[i] = table_size;
      std::memcpy(tables + table_size, r.block_table, blocks * sizeof(int32_t));
      for (int t = 0; t < r.count; ++t, ++N) {
        tokens[N] = r.tokens[t];
        positions[N] = r.first_position + t;
        offsets[N] = table_size;
      }
      table_size += blocks;
    }
    TROUPE_RETURN_IF_ERROR(upload(0, N));
    TROUPE_RETURN_IF_ERROR(upload(max_tokens_, N));
    TROUPE_RETURN_IF_ERROR(upload(2 * max_tokens_, N));
    TROUPE_RETURN_IF_ERROR(upload(3 * max_tokens_, table_size));
    const int32_t* dev = indices_.data<int32_t>();
    const int32_t *dev_tokens = dev, *dev_positions = dev + max_tokens_,
                  *dev_offsets = dev + 2 * max_tokens_, *dev_tables = dev + 3 * max_tokens_;

    const bf16* w = weights_.data<bf16>();
    bf16 *x = x_.data<bf16>(), *ln = ln_.data<bf16>(), *qkv = qkv_.data<bf16>();
    bf16 *atty = atty_.data<bf16>(), *tmp = tmp_.data<bf16>(), *fc = fc_.data<bf16>();
    float *mean = mean_.data<float>(), *rstd = rstd_.data<float>();
    TROUPE_RETURN_IF_ERROR(cuda::embedding_forward(x, dev_tokens, dev_positions, N,
                                                   w + layout_.wte(), w + layout_.wpe(), C,
                                                   cuda::default_stream));
    for (int l = 0; l < c.layers; ++l) {
      const auto& o = layout_.block(l);
      bf16 *keys = pools_[2 * l].data<bf16>(), *values = pools_[2 * l + 1].data<bf16>();
      TROUPE_RETURN_IF_ERROR(cuda::layernorm_forward(ln, mean, rstd, x, w + o.ln1_w, w + o.ln1_b, N,
                                                     C, cuda::default_stream));
      TROUPE_RETURN_IF_ERROR(cuda::matmul(qkv, dtype::bf16, ln, w + o.attn_w, w + o.attn_b,
                                          gemm{N, 3 * C, C}, cuda::default_stream));
      int row = 0;
      for (int i = 0; i < R; ++i) {
        const decode_request& r = requests[i];
        const bf16* new_rows = qkv + int64_t{row} * 3 * C;
        TROUPE_RETURN_IF_ERROR(cuda::kv_append(keys, dev_tables + table_of[i], kv_,
                                               r.first_position, new_rows + C, 3 * C, r.count,
                                               cuda::default_stream));
        TROUPE_RETURN_IF_ERROR(cuda::kv_append(values, dev_tables + table_of[i], kv_,
                                               r.first_position, new_rows + 2 * C, 3 * C, r.count,
                                               cuda::default_stream));
        row += r.count;
      }
      TROUPE_RETURN_IF_ERROR(cuda::paged_attention(atty, qkv, 3 * C, keys, values, dev_tables,
                                                   dev_offsets, dev_positions, kv_, N, c.heads,
                                                   cuda::default_stream));
      TROUPE_RETURN_IF_ERROR(cuda::matmul(tmp, dtype::bf16, atty, w + o.proj_w, w + o.proj_b,
                                          gemm{N, C, C}, cuda::default_stream));
      TROUPE_RETURN_IF_ERROR(cuda::accumulate(x, tmp, int64_t{N} * C, cuda::default_stream));
      TROUPE_RETURN_IF_ERROR(cuda::layernorm_forward(ln, mean, rstd, x, w + o.ln2_w, w + o.ln2_b, N,
                                                     C, cuda::default_stream));
      TROUPE_RETURN_IF_ERROR(cuda::matmul(fc, dtype::bf16, ln, w + o.fc_w, w + o.fc_b,
                                          gemm{N, 4 * C, C}, cuda::default_stream));
      TROUPE_RETURN_IF_ERROR(cuda::gelu_forward(fc, fc, int64_t{N} * 4 * C, cuda::default_stream));
      TROUPE_RETURN_IF_ERROR(cuda::matmul(tmp, dtype::bf16, fc, w + o.fc2_w, w + o.fc2_b,
                                          gemm{N, C, 4 * C}, cuda::default_stream));
      TROUPE_RETURN_IF_ERROR(cuda::accumulate(x, tmp, int64_t{N} * C, cuda::default_stream));
    }
    // Only each request's last row goes through the head.
    int row = 0;
    for (int i = 0; i < R; ++i) {
      row += requests[i].count;
      TROUPE_ASSIGN_OR_RETURN(tensor::tensor from, x_.narrow(0, int64_t{row - 1} * C, C));
      TROUPE_ASSIGN_OR_RETURN(tensor::tensor to, last_.narrow(0, int64_t{i} * C, C));
      TROUPE_RETURN_IF_ERROR(tensor::copy(to, from));
    }
    TROUPE_RETURN_IF_ERROR(cuda::layernorm_forward(ln, mean, rstd, last_.data<bf16>(),
                                                   w + layout_.lnf_w(), w + layout_.lnf_b(), R, C,
                                                   cuda::default_stream));
    TROUPE_RETURN_IF_ERROR(cuda::matmul(logits_.raw(), dtype::f32, ln, w + layout_.wte(), nullptr,
                                        gemm{R, c.vocab, C, false, true}, cuda::default_stream));
    TROUPE_ASSIGN_OR_RETURN(tensor::tensor produced, logits_.narrow(0, 0, int64_t{R} * c.vocab));
    TROUPE_ASSIGN_OR_RETURN(tensor::tensor on_host, produced.to(tensor::device::cpu()));
    std::memcpy(logits, on_host.data<float>(), int64_t{R} * c.vocab * sizeof(float));
    return absl::OkStatus();
  }

 private:
  // Copies host_indices_[first, first + n) to the device.
  absl::Status upload(int64_t first, int64_t n) {
    if (n == 0) return absl::OkStatus();
    TROUPE_ASSIGN_OR_RETURN(tensor::tensor to, indices_.narrow(0, first, n));
    TROUPE_ASSIGN_OR_RETURN(tensor::tensor from, host_indices_.narrow(0, first, n));
    return tensor::copy(to, from);
  }

  const gpt_layout& layout_;
  int max_tokens_;
  int cache_blocks_;
  kernels::kv_layout kv_;
  int device_;
  tensor::tensor weights_;
  std::vector<tensor::tensor> pools_;  // per layer: keys, values
  tensor::tensor x_, ln_, qkv_, atty_, tmp_, fc_, last_, mean_, rstd_, logits_, indices_;
  tensor::tensor host_indices_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<gpt_decoder>> make_gpt_cuda_decoder(const gpt_layout& layout,
                                                                   const float* params,
                                                                   int max_tokens, int cache_blocks,
                                                                   int block_size, int device) {
  auto devices = tensor::cuda_devices();
  if (!devices.ok()) {
    return absl::UnavailableError(
        absl::StrCat("CUDA device ", device,
                     " asked for, but CUDA cannot be used here: ", devices.status().message()));
  }
  if (device >= static_cast<int>(devices->size())) {
    return absl::UnavailableError(
        absl::StrCat("CUDA device ", device, " asked for, but ", devices->size(), " are visible"));
  }
  if (!layout.range().has_embedding() || !layout.range().has_head(layout.config())) {
    return absl::InvalidArgumentError("the CUDA decoder runs a whole model, not a pipeline stage");
  }
  auto decoder =
      std::make_unique<gpt_cuda_decoder>(layout, max_tokens, cache_blocks, block_size, device);
  TROUPE_RETURN_IF_ERROR(decoder->allocate(params));
  return decoder;
}

}  // namespace troupe::models

#include "models/decoder/cuda_quantized_weights.hpp"

#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "runtime/base/status.hpp"

namespace troupe::models {
namespace {

// `bytes` of host memory as a device tensor of 32-bit words (the kernel reads them as bytes).
absl::StatusOr<tensor::tensor> upload_bytes(const void* bytes, size_t n, tensor::dtype type,
                                            int device) {
  const int64_t words = static_cast<int64_t>((n + 3) / 4);
  tensor::tensor host = tensor::tensor::host({words}, type);
  std::memset(host.raw(), 0, static_cast<size_t>(words) * 4);
  std::memcpy(host.raw(), bytes, n);
  return host.to(tensor::device::cuda(device));
}

}  // namespace

absl::StatusOr<cuda_quantized_weights> cuda_quantized_weights::upload(const decoder_layout& layout,
                                                                      const quantized_weights& host,
                                                                      int device) {
  cuda_quantized_weights out;
  const decoder_config& c = layout.config();
  for (int l = layout.range().first; l < layout.range().last; ++l) {
    const auto& o = layout.block(l);
    if (c.family == decoder_family::gpt2) {
      for (const int64_t w : {o.attn_w, o.proj_w, o.fc_w, o.fc2_w})
        TROUPE_RETURN_IF_ERROR(out.stack(host, {w}, l, device));
    } else {
      TROUPE_RETURN_IF_ERROR(out.stack(host, {o.q_w, o.k_w, o.v_w}, l, device));
      TROUPE_RETURN_IF_ERROR(out.stack(host, {o.o_w}, l, device));
      TROUPE_RETURN_IF_ERROR(out.stack(host, {o.gate_w, o.up_w}, l, device));
      TROUPE_RETURN_IF_ERROR(out.stack(host, {o.down_w}, l, device));
    }
  }
  TROUPE_RETURN_IF_ERROR(out.stack(host, {layout.head_weight()}, -1, device));
  return out;
}

const kernels::quantized_matrix* cuda_quantized_weights::find(int64_t offset) const {
  const auto it = matrices_.find(offset);
  return it == matrices_.end() ? nullptr : &it->second.view;
}

absl::Status cuda_quantized_weights::stack(const quantized_weights& host,
                                           std::initializer_list<int64_t> parts, int layer,
                                           int device) {
  std::vector<const kernels::quantized_matrix*> found;
  for (const int64_t offset : parts) {
    if (const kernels::quantized_matrix* m = host.find(offset)) found.push_back(m);
  }
  if (found.empty()) return absl::OkStatus();  // stays bf16
  const kernels::quantized_matrix& first = *found.front();
  for (const kernels::quantized_matrix* m : found) {
    if (found.size() != parts.size() || m->bits != first.bits || m->cols != first.cols ||
        m->group_size != first.group_size || (m->zeros == nullptr) != (first.zeros == nullptr)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "layer ", layer,
          ": the CUDA decoder multiplies q, k and v (and gate and up) as one matrix, so they "
          "must be quantized alike (bits, inputs, group size, zero points); these are not"));
    }
  }
  std::vector<uint8_t> q;
  std::vector<float> scales, zeros;
  int rows = 0;
  for (const kernels::quantized_matrix* m : found) {
    q.insert(q.end(), m->q, m->q + m->rows * m->row_bytes());
    const int64_t n = int64_t{m->rows} * m->groups();
    scales.insert(scales.end(), m->scales, m->scales + n);
    if (m->zeros != nullptr) zeros.insert(zeros.end(), m->zeros, m->zeros + n);
    rows += m->rows;
  }
  matrix& out = matrices_[*parts.begin()];
  TROUPE_ASSIGN_OR_RETURN(out.q, upload_bytes(q.data(), q.size(), tensor::dtype::i32, device));
  TROUPE_ASSIGN_OR_RETURN(out.scales, upload_bytes(scales.data(), scales.size() * sizeof(float),
                                                   tensor::dtype::f32, device));
  out.view = first;
  out.view.rows = rows;
  out.view.q = static_cast<const uint8_t*>(out.q.raw());
  out.view.scales = out.scales.data<float>();
  out.view.zeros = nullptr;
  if (!zeros.empty()) {
    TROUPE_ASSIGN_OR_RETURN(out.zeros, upload_bytes(zeros.data(), zeros.size() * sizeof(float),
                                                    tensor::dtype::f32, device));
    out.view.zeros = out.zeros.data<float>();
  }
  return absl::OkStatus();
}

}  // namespace troupe::models

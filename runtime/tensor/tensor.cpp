#include "runtime/tensor/tensor.hpp"

#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/tensor/allocator.hpp"
#include "runtime/tensor/cuda_memory.hpp"

namespace troupe::tensor {
namespace {

shape_t contiguous_strides(const shape_t& shape) {
  shape_t strides(shape.size());
  int64_t stride = 1;
  for (int i = static_cast<int>(shape.size()) - 1; i >= 0; --i) {
    strides[i] = stride;
    stride *= shape[i];
  }
  return strides;
}

absl::StatusOr<allocator*> allocator_for(device where) {
  if (where.is_cpu()) return &cpu_allocator();
  return cuda_allocator(where.index);
}

// Copies a strided host tensor element by element, innermost dimension last.
void strided_host_copy(char* dst, const shape_t& dst_strides, const char* src,
                       const shape_t& src_strides, const shape_t& shape, size_t elem) {
  const int rank = static_cast<int>(shape.size());
  shape_t index(rank, 0);
  const int64_t n = shape_numel(shape);
  for (int64_t i = 0; i < n; ++i) {
    int64_t d = 0, s = 0;
    for (int k = 0; k < rank; ++k) {
      d += index[k] * dst_strides[k];
      s += index[k] * src_strides[k];
    }
    std::memcpy(dst + d * elem, src + s * elem, elem);
    for (int k = rank - 1; k >= 0; --k) {
      if (++index[k] < shape[k]) break;
      index[k] = 0;
    }
  }
}

// Bytes from a view's first element to just past its last, in storage order.
size_t span_bytes(const shape_t& shape, const shape_t& strides, size_t elem) {
  int64_t last = 0;
  for (size_t i = 0; i < shape.size(); ++i)
    last += (shape[i] - 1) * strides[i];
  return static_cast<size_t>(last + 1) * elem;
}

}  // namespace

std::string shape_string(const shape_t& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

int64_t shape_numel(const shape_t& shape) {
  int64_t n = 1;
  for (int64_t s : shape)
    n *= s;
  return n;
}

storage::~storage() {
  if (allocator_ != nullptr) allocator_->deallocate(data_, bytes_);
}

absl::StatusOr<tensor> tensor::empty(const shape_t& shape, dtype type, device where) {
  TROUPE_ASSIGN_OR_RETURN(allocator * from, allocator_for(where));
  return allocate(shape, type, where, *from);
}

absl::StatusOr<tensor> tensor::empty(const shape_t& shape, dtype type, allocator& from) {
  return allocate(shape, type, device::cpu(), from);
}

absl::StatusOr<tensor> tensor::allocate(const shape_t& shape, dtype type, device where,
                                        allocator& from) {
  for (int64_t s : shape) {
    if (s < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("tensor shape ", shape_string(shape), " has a negative size"));
    }
  }
  const size_t bytes = shape_numel(shape) * dtype_size(type);
  TROUPE_ASSIGN_OR_RETURN(void* data, from.allocate(bytes));
  tensor t;
  t.storage_ = std::make_shared<storage>(data, bytes, where, &from);
  t.shape_ = shape;
  t.strides_ = contiguous_strides(shape);
  t.dtype_ = type;
  return t;
}

absl::StatusOr<tensor> tensor::zeros(const shape_t& shape, dtype type, device where) {
  TROUPE_ASSIGN_OR_RETURN(tensor t, empty(shape, type, where));
  TROUPE_RETURN_IF_ERROR(zero(t));
  return t;
}

tensor tensor::host(const shape_t& shape, dtype type) {
  absl::StatusOr<tensor> t = zeros(shape, type);
  TROUPE_CHECK(t.ok());
  return *std::move(t);
}

bool tensor::is_contiguous() const {
  return strides_ == contiguous_strides(shape_);
}

absl::StatusOr<tensor> tensor::view(const shape_t& shape) const {
  if (!is_contiguous()) {
    return absl::FailedPreconditionError(
        absl::StrCat("view of a non-contiguous tensor ", description(), "; clone() it first"));
  }
  shape_t resolved = shape;
  int inferred = -1;
  int64_t known = 1;
  for (size_t i = 0; i < resolved.size(); ++i) {
    if (resolved[i] == -1 && inferred < 0) {
      inferred = static_cast<int>(i);
    } else {
      known *= resolved[i];
    }
  }
  if (inferred >= 0 && known > 0 && numel() % known == 0) resolved[inferred] = numel() / known;
  if (shape_numel(resolved) != numel() || (inferred >= 0 && resolved[inferred] < 0)) {
    return absl::InvalidArgumentError(absl::StrCat("cannot view ", description(), " as ",
                                                   shape_string(shape), ": element counts differ"));
  }
  tensor t = *this;
  t.shape_ = resolved;
  t.strides_ = contiguous_strides(resolved);
  return t;
}

absl::StatusOr<tensor> tensor::narrow(int dim, int64_t start, int64_t length) const {
  if (dim < 0 || dim >= rank() || start < 0 || length < 0 || start + length > shape_[dim]) {
    return absl::OutOfRangeError(absl::StrCat("narrow(dim ", dim, ", start ", start, ", length ",
                                              length, ") is outside ", description()));
  }
  tensor t = *this;
  t.shape_[dim] = length;
  t.offset_ += start * strides_[dim];
  return t;
}

absl::StatusOr<tensor> tensor::transpose(int a, int b) const {
  if (a < 0 || b < 0 || a >= rank() || b >= rank()) {
    return absl::OutOfRangeError(
        absl::StrCat("transpose(", a, ", ", b, ") of the rank-", rank(), " ", description()));
  }
  tensor t = *this;
  std::swap(t.shape_[a], t.shape_[b]);
  std::swap(t.strides_[a], t.strides_[b]);
  return t;
}

absl::StatusOr<tensor> tensor::to(device where) const {
  TROUPE_ASSIGN_OR_RETURN(tensor out, empty(shape_, dtype_, where));
  TROUPE_RETURN_IF_ERROR(copy(out, *this));
  return out;
}

std::string tensor::description() const {
  return absl::StrCat(dtype_name(dtype_), shape_string(shape_), " on ", where().name());
}

absl::Status copy(const tensor& dst, const tensor& src) {
  if (dst.shape() != src.shape() || dst.type() != src.type()) {
    return absl::InvalidArgumentError(absl::StrCat("copy from ", src.description(), " into ",
                                                   dst.description(),
                                                   ": shape and dtype must match"));
  }
  if (src.numel() == 0) return absl::OkStatus();
  if (dst.where().is_cpu() && src.where().is_cpu()) {
    if (dst.is_contiguous() && src.is_contiguous()) {
      std::memmove(dst.raw(), src.raw(), src.nbytes());
    } else {
      strided_host_copy(static_cast<char*>(dst.raw()), dst.strides_,
                        static_cast<const char*>(src.raw()), src.strides_, src.shape(),
                        dtype_size(src.type()));
    }
    return absl::OkStatus();
  }
  const copy_kind kind = src.where().is_cpu()   ? copy_kind::host_to_device
                         : dst.where().is_cpu() ? copy_kind::device_to_host
                                                : copy_kind::device_to_device;
  if (dst.is_contiguous() && src.is_contiguous()) {
    return cuda_copy(dst.raw(), src.raw(), src.nbytes(), kind);
  }
  // A strided view on a device: stage the bytes it spans through the host, rearrange them there,
  // and write the destination's span back whole (its gaps keep their values).
  const size_t elem = dtype_size(src.type());
  std::vector<char> src_host, dst_host;
  const char* from = static_cast<const char*>(src.raw());
  char* to = static_cast<char*>(dst.raw());
  if (src.where().is_cuda()) {
    src_host.resize(span_bytes(src.shape(), src.strides_, elem));
    TROUPE_RETURN_IF_ERROR(
        cuda_copy(src_host.data(), src.raw(), src_host.size(), copy_kind::device_to_host));
    from = src_host.data();
  }
  if (dst.where().is_cuda()) {
    dst_host.resize(span_bytes(dst.shape(), dst.strides_, elem));
    if (!dst.is_contiguous()) {
      TROUPE_RETURN_IF_ERROR(
          cuda_copy(dst_host.data(), dst.raw(), dst_host.size(), copy_kind::device_to_host));
    }
    to = dst_host.data();
  }
  strided_host_copy(to, dst.strides_, from, src.strides_, src.shape(), elem);
  if (dst.where().is_cuda()) {
    return cuda_copy(dst.raw(), dst_host.data(), dst_host.size(), copy_kind::host_to_device);
  }
  return absl::OkStatus();
}

absl::Status zero(const tensor& t) {
  if (!t.is_contiguous()) return copy(t, tensor::host(t.shape(), t.type()));
  if (t.where().is_cpu()) {
    std::memset(t.raw(), 0, t.nbytes());
    return absl::OkStatus();
  }
  return cuda_zero(t.raw(), t.nbytes());
}

}  // namespace troupe::tensor

#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "absl/container/inlined_vector.h"
#include "absl/status/statusor.h"
#include "runtime/base/status.hpp"
#include "runtime/tensor/device.hpp"
#include "runtime/tensor/dtype.hpp"

namespace troupe::tensor {

class allocator;

/// Sizes or strides of a tensor, in elements.
using shape_t = absl::InlinedVector<int64_t, 6>;

/// "[2, 3, 4]".
[[nodiscard]] std::string shape_string(const shape_t& shape);
/// The product of the sizes (1 for a scalar).
[[nodiscard]] int64_t shape_numel(const shape_t& shape);

/// Bytes owned by one allocation; tensors and views share it.
class storage {
 public:
  storage(void* data, size_t bytes, device where, class allocator* from)
      : data_(data), bytes_(bytes), device_(where), allocator_(from) {}
  ~storage();
  storage(const storage&) = delete;
  storage& operator=(const storage&) = delete;

  [[nodiscard]] void* data() const { return data_; }
  [[nodiscard]] size_t bytes() const { return bytes_; }
  [[nodiscard]] device where() const { return device_; }

 private:
  void* data_;
  size_t bytes_;
  device device_;
  class allocator* allocator_;
};

/// A strided view of typed elements in a storage, on the host or on a CUDA device. Copying a
/// tensor copies the view, not the bytes (as in PyTorch); clone() copies the bytes.
class tensor {
 public:
  tensor() = default;

  /// Uninitialised contiguous memory of `shape`. Fails only when the device cannot allocate.
  [[nodiscard]] static absl::StatusOr<tensor> empty(const shape_t& shape, dtype type,
                                                    device where = device::cpu());
  /// Uninitialised contiguous host memory of `shape` from `from` (reserved_host_allocator()).
  [[nodiscard]] static absl::StatusOr<tensor> empty(const shape_t& shape, dtype type,
                                                    allocator& from);
  /// Zero-filled contiguous memory.
  [[nodiscard]] static absl::StatusOr<tensor> zeros(const shape_t& shape, dtype type,
                                                    device where = device::cpu());
  /// Host memory, for code that holds host allocation failure to be fatal (tests, small buffers).
  [[nodiscard]] static tensor host(const shape_t& shape, dtype type = dtype::f32);

  [[nodiscard]] bool defined() const { return storage_ != nullptr; }
  [[nodiscard]] const shape_t& shape() const { return shape_; }
  [[nodiscard]] const shape_t& strides() const { return strides_; }
  [[nodiscard]] int64_t size(int dim) const { return shape_[dim]; }
  [[nodiscard]] int rank() const { return static_cast<int>(shape_.size()); }
  [[nodiscard]] dtype type() const { return dtype_; }
  [[nodiscard]] device where() const { return storage_ ? storage_->where() : device::cpu(); }
  [[nodiscard]] int64_t numel() const { return shape_numel(shape_); }
  [[nodiscard]] size_t nbytes() const { return numel() * dtype_size(dtype_); }
  [[nodiscard]] bool is_contiguous() const;

  /// The first element. Typed access checks the dtype (a programmer error when it differs).
  [[nodiscard]] void* raw() const {
    return static_cast<char*>(storage_->data()) + offset_ * dtype_size(dtype_);
  }
  template <class T>
  [[nodiscard]] T* data() const {
    TROUPE_CHECK(dtype_of<T>() == dtype_);
    return static_cast<T*>(raw());
  }

  /// The same elements under another shape; one size may be -1. Needs a contiguous tensor.
  [[nodiscard]] absl::StatusOr<tensor> view(const shape_t& shape) const;
  /// Elements [start, start + length) along `dim`, sharing storage.
  [[nodiscard]] absl::StatusOr<tensor> narrow(int dim, int64_t start, int64_t length) const;
  /// Dimensions `a` and `b` swapped, sharing storage (no longer contiguous).
  [[nodiscard]] absl::StatusOr<tensor> transpose(int a, int b) const;

  /// A contiguous copy on `where`.
  [[nodiscard]] absl::StatusOr<tensor> to(device where) const;
  [[nodiscard]] absl::StatusOr<tensor> clone() const { return to(where()); }

  /// "f32[2, 3] on cpu".
  [[nodiscard]] std::string description() const;

 private:
  friend absl::Status copy(const tensor& dst, const tensor& src);
  static absl::StatusOr<tensor> allocate(const shape_t& shape, dtype type, device where,
                                         allocator& from);

  std::shared_ptr<storage> storage_;
  shape_t shape_;
  shape_t strides_;
  int64_t offset_ = 0;  // in elements
  dtype dtype_ = dtype::f32;
};

/// Copies `src` into `dst` (same shape and dtype), on the host, to or from a CUDA device, with any
/// strides on either side (strided device views are staged through host memory).
[[nodiscard]] absl::Status copy(const tensor& dst, const tensor& src);

/// Fills a tensor (or a strided view) with zeros.
[[nodiscard]] absl::Status zero(const tensor& t);

}  // namespace troupe::tensor

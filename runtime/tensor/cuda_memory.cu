#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "runtime/tensor/allocator.hpp"
#include "runtime/tensor/cuda_memory.hpp"
#include "runtime/tensor/cuda_status.hpp"

namespace troupe::tensor {
namespace {

// Sizes are rounded so that blocks of close sizes are interchangeable: 512 B granularity below
// 1 MiB, 2 MiB above. A cached block serves a request when it is at most twice as large.
size_t round_size(size_t bytes) {
  constexpr size_t small = 512, large = size_t{2} << 20;
  const size_t g = bytes < (size_t{1} << 20) ? small : large;
  return (std::max<size_t>(bytes, 1) + g - 1) / g * g;
}

class caching_allocator final : public allocator {
 public:
  explicit caching_allocator(int index) : index_(index) {}

  absl::StatusOr<void*> allocate(size_t bytes) override {
    const size_t size = round_size(bytes);
    std::lock_guard lock(mutex_);
    ++stats_.allocations;
    auto it = free_.lower_bound(size);
    void* ptr = nullptr;
    if (it != free_.end() && it->first <= 2 * size) {
      ptr = it->second;
      sizes_[ptr] = it->first;
      free_.erase(it);
      ++stats_.cache_hits;
    } else {
      ++stats_.cache_misses;
      TROUPE_CUDA_RETURN_IF_ERROR(cudaSetDevice(index_));
      cudaError_t err = cudaMalloc(&ptr, size);
      if (err == cudaErrorMemoryAllocation) {  // give the cache back and try once more
        cudaGetLastError();
        release_cache_locked();
        err = cudaMalloc(&ptr, size);
      }
      if (err != cudaSuccess) {
        return absl::ResourceExhaustedError(absl::StrCat(
            "cuda:", index_, ": cannot allocate ", bytes, " bytes (", stats_.allocated_bytes,
            " in use, ", stats_.reserved_bytes, " reserved): ", cudaGetErrorString(err)));
      }
      sizes_[ptr] = size;
      stats_.reserved_bytes += size;
    }
    stats_.allocated_bytes += sizes_[ptr];
    stats_.peak_bytes = std::max(stats_.peak_bytes, stats_.allocated_bytes);
    return ptr;
  }

  void deallocate(void* ptr, size_t) override {
    std::lock_guard lock(mutex_);
    auto it = sizes_.find(ptr);
    if (it == sizes_.end()) return;
    stats_.allocated_bytes -= it->second;
    free_.emplace(it->second, ptr);
    sizes_.erase(it);
  }

  allocator_stats stats() const override {
    std::lock_guard lock(mutex_);
    return stats_;
  }

 private:
  void release_cache_locked() {
    for (auto& [size, ptr] : free_) {
      cudaFree(ptr);
      stats_.reserved_bytes -= size;
    }
    free_.clear();
  }

  const int index_;
  mutable std::mutex mutex_;
  std::multimap<size_t, void*> free_;  // cached blocks by size
  std::map<void*, size_t> sizes_;      // blocks in use
  allocator_stats stats_;
};

cudaMemcpyKind to_cuda(copy_kind kind) {
  switch (kind) {
    case copy_kind::host_to_device:
      return cudaMemcpyHostToDevice;
    case copy_kind::device_to_host:
      return cudaMemcpyDeviceToHost;
    case copy_kind::device_to_device:
      return cudaMemcpyDeviceToDevice;
  }
  return cudaMemcpyDefault;
}

}  // namespace

absl::StatusOr<allocator*> cuda_allocator(int index) {
  int count = 0;
  TROUPE_CUDA_RETURN_IF_ERROR(cudaGetDeviceCount(&count));
  if (index < 0 || index >= count) {
    return absl::InvalidArgumentError(
        absl::StrCat("cuda:", index, " does not exist; this process sees ", count, " device(s)"));
  }
  static std::mutex mutex;
  static std::vector<std::unique_ptr<caching_allocator>> allocators;
  std::lock_guard lock(mutex);
  if (allocators.size() < static_cast<size_t>(count)) allocators.resize(count);
  if (!allocators[index]) allocators[index] = std::make_unique<caching_allocator>(index);
  return allocators[index].get();
}

absl::Status cuda_copy(void* dst, const void* src, size_t bytes, copy_kind kind) {
  TROUPE_CUDA_RETURN_IF_ERROR(cudaMemcpy(dst, src, bytes, to_cuda(kind)));
  return absl::OkStatus();
}

absl::Status cuda_copy_rows(void* dst, size_t dst_pitch, const void* src, size_t src_pitch,
                            size_t width, size_t rows) {
  TROUPE_CUDA_RETURN_IF_ERROR(
      cudaMemcpy2D(dst, dst_pitch, src, src_pitch, width, rows, cudaMemcpyDeviceToDevice));
  return absl::OkStatus();
}

absl::Status cuda_zero(void* dst, size_t bytes) {
  TROUPE_CUDA_RETURN_IF_ERROR(cudaMemset(dst, 0, bytes));
  return absl::OkStatus();
}

}  // namespace troupe::tensor

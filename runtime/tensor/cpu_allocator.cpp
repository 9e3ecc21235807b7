#include <atomic>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "runtime/tensor/allocator.hpp"

namespace troupe::tensor {
namespace {

class host_allocator final : public allocator {
 public:
  absl::StatusOr<void*> allocate(size_t bytes) override {
    constexpr size_t alignment = 64;
    const size_t rounded = (std::max<size_t>(bytes, 1) + alignment - 1) / alignment * alignment;
    void* ptr = std::aligned_alloc(alignment, rounded);
    if (ptr == nullptr) {
      return absl::ResourceExhaustedError(
          absl::StrCat("cpu: out of host memory allocating ", bytes, " bytes"));
    }
    const size_t now = allocated_.fetch_add(bytes) + bytes;
    size_t peak = peak_.load();
    while (now > peak && !peak_.compare_exchange_weak(peak, now)) {
    }
    allocations_.fetch_add(1);
    return ptr;
  }

  void deallocate(void* ptr, size_t bytes) override {
    std::free(ptr);
    allocated_.fetch_sub(bytes);
  }

  allocator_stats stats() const override {
    allocator_stats s;
    s.allocated_bytes = allocated_.load();
    s.peak_bytes = peak_.load();
    s.reserved_bytes = s.allocated_bytes;
    s.allocations = allocations_.load();
    s.cache_misses = s.allocations;
    return s;
  }

 private:
  std::atomic<size_t> allocated_{0};
  std::atomic<size_t> peak_{0};
  std::atomic<uint64_t> allocations_{0};
};

}  // namespace

allocator& cpu_allocator() {
  static host_allocator instance;
  return instance;
}

}  // namespace troupe::tensor

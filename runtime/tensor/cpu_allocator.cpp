#include <atomic>
#include <cstdlib>
#include <vector>

#include <sys/mman.h>
#include <unistd.h>

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

class reserved_allocator final : public allocator {
 public:
  absl::StatusOr<void*> allocate(size_t bytes) override {
    void* ptr = mmap(nullptr, std::max<size_t>(bytes, 1), PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (ptr == MAP_FAILED) {
      return absl::ResourceExhaustedError(
          absl::StrCat("cpu: cannot reserve ", bytes, " bytes of address space"));
    }
    allocated_.fetch_add(bytes);
    allocations_.fetch_add(1);
    return ptr;
  }

  void deallocate(void* ptr, size_t bytes) override {
    munmap(ptr, std::max<size_t>(bytes, 1));
    allocated_.fetch_sub(bytes);
  }

  allocator_stats stats() const override {
    allocator_stats s;
    s.allocated_bytes = s.reserved_bytes = allocated_.load();
    s.allocations = s.cache_misses = allocations_.load();
    return s;
  }

 private:
  std::atomic<size_t> allocated_{0};
  std::atomic<uint64_t> allocations_{0};
};

size_t page_size() {
  static const size_t size = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return size;
}

}  // namespace

allocator& cpu_allocator() {
  static host_allocator instance;
  return instance;
}

allocator& reserved_host_allocator() {
  static reserved_allocator instance;
  return instance;
}

void release_pages(void* data, size_t bytes) {
  const uintptr_t page = page_size(), begin = reinterpret_cast<uintptr_t>(data);
  const uintptr_t first = (begin + page - 1) / page * page, last = (begin + bytes) / page * page;
  if (last > first) madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED);
}

size_t resident_bytes(const void* data, size_t bytes) {
  if (bytes == 0) return 0;
  const uintptr_t page = page_size(), begin = reinterpret_cast<uintptr_t>(data);
  const uintptr_t first = begin / page * page, last = (begin + bytes + page - 1) / page * page;
  std::vector<unsigned char> in_core((last - first) / page);
  if (mincore(reinterpret_cast<void*>(first), last - first, in_core.data()) != 0) return 0;
  size_t pages = 0;
  for (unsigned char c : in_core)
    pages += c & 1;
  return pages * page;
}

}  // namespace troupe::tensor

#pragma once

#include <cstddef>
#include <cstdint>

#include "absl/status/statusor.h"

namespace troupe::tensor {

/// What an allocator holds and how often its cache served a request.
struct allocator_stats {
  size_t allocated_bytes = 0;  ///< handed out and not yet returned
  size_t peak_bytes = 0;       ///< the highest allocated_bytes so far
  size_t reserved_bytes = 0;   ///< obtained from the system (allocated + cached)
  uint64_t allocations = 0;
  uint64_t cache_hits = 0;    ///< served from the cache without a system call
  uint64_t cache_misses = 0;  ///< needed a system allocation
};

/// Memory for tensor storage on one device. Thread-safe.
class allocator {
 public:
  virtual ~allocator() = default;
  /// `bytes` of memory aligned for any element type (64 bytes on the host), or an error that
  /// names the device and size.
  [[nodiscard]] virtual absl::StatusOr<void*> allocate(size_t bytes) = 0;
  /// Returns memory from allocate() with the same size.
  virtual void deallocate(void* ptr, size_t bytes) = 0;
  [[nodiscard]] virtual allocator_stats stats() const = 0;
};

/// The host allocator: 64-byte aligned, no cache (the C library already pools small blocks).
allocator& cpu_allocator();

/// Host memory reserved as address space (mmap): a page is backed only once written, and
/// release_pages() hands pages back (they read as zero again). ZeRO-3's flat buffers: every
/// parameter at its layout offset, memory only where a rank holds something now.
allocator& reserved_host_allocator();
/// Hands back the whole pages inside [data, data + bytes) of reserved_host_allocator() memory
/// (the partial pages at either end stay: they may hold a neighbour's bytes).
void release_pages(void* data, size_t bytes);
/// Bytes of the pages of [data, data + bytes) that are backed by memory now (mincore).
[[nodiscard]] size_t resident_bytes(const void* data, size_t bytes);

/// The caching allocator of CUDA device `index`: freed blocks are kept and reused for requests of
/// a close size, so steady-state training makes no cudaMalloc calls. An error without CUDA.
[[nodiscard]] absl::StatusOr<allocator*> cuda_allocator(int index);

}  // namespace troupe::tensor

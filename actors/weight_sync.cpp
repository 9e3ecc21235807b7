#include "actors/weight_sync.hpp"

#include <algorithm>
#include <future>
#include <optional>

// XXH3 inlined, so that it is compiled for this file's target (AVX2, as the kernels are): about
// twice the speed of Debian's generic build, and the same digests.
#define XXH_INLINE_ALL
#include <xxhash.h>

#include "absl/strings/str_cat.h"
#include "runtime/base/status.hpp"

namespace troupe::actors {
namespace {

std::string hex(const XXH128_hash_t& h) {
  return absl::StrCat(absl::Hex(h.high64, absl::kZeroPad16), absl::Hex(h.low64, absl::kZeroPad16));
}

// XXH3-128 of a host buffer fed in pieces, each hashed on a helper thread while the caller
// receives the next: the digest of the whole buffer, off the critical path but for the last
// piece.
class pipelined_checksum {
 public:
  pipelined_checksum() : state_(XXH3_createState()) { XXH3_128bits_reset(state_); }
  ~pipelined_checksum() {
    if (pending_.valid()) pending_.wait();
    XXH3_freeState(state_);
  }
  pipelined_checksum(const pipelined_checksum&) = delete;
  pipelined_checksum& operator=(const pipelined_checksum&) = delete;

  void add(const void* data, size_t bytes) {
    if (pending_.valid()) pending_.wait();
    pending_ = std::async(std::launch::async,
                          [this, data, bytes] { XXH3_128bits_update(state_, data, bytes); });
  }
  std::string digest() {
    if (pending_.valid()) pending_.wait();
    return hex(XXH3_128bits_digest(state_));
  }

 private:
  XXH3_state_t* state_;
  std::future<void> pending_;
};

}  // namespace

absl::StatusOr<std::string> weights_checksum(const tensor::tensor& weights) {
  if (!weights.where().is_cpu()) {
    TROUPE_ASSIGN_OR_RETURN(tensor::tensor host, weights.to(tensor::device::cpu()));
    return weights_checksum(host);
  }
  return hex(XXH3_128bits(weights.raw(), weights.nbytes()));
}

absl::StatusOr<std::string> broadcast_weights(comm::communicator& group,
                                              const tensor::tensor& weights, int64_t bucket_bytes,
                                              int root) {
  if (weights.type() != tensor::dtype::f32 || weights.rank() != 1) {
    return absl::InvalidArgumentError("weight sync: the weights must be one flat f32 buffer");
  }
  const int64_t n = weights.numel();
  const int64_t per_bucket =
      std::max<int64_t>(1, bucket_bytes / static_cast<int64_t>(sizeof(float)));
  const int64_t buckets = (n + per_bucket - 1) / per_bucket;
  // The checksum of host weights is computed during the transfer: the sender's bytes at once
  // (they do not change), a receiver's bucket by bucket as they arrive.
  const bool host = weights.where().is_cpu();
  std::future<absl::StatusOr<std::string>> sent;
  std::optional<pipelined_checksum> received;
  if (host && group.rank() == root) {
    sent = std::async(std::launch::async, [&weights] { return weights_checksum(weights); });
  } else if (host) {
    received.emplace();
  }
  for (int64_t b = 0; b < buckets; ++b) {
    const int64_t begin = b * per_bucket, count = std::min(per_bucket, n - begin);
    TROUPE_ASSIGN_OR_RETURN(tensor::tensor bucket, weights.narrow(0, begin, count));
    if (absl::Status s = group.broadcast(bucket, root); !s.ok()) {
      if (sent.valid()) sent.wait();
      return absl::Status(s.code(),
                          absl::StrCat("weight sync: bucket ", b + 1, " of ", buckets, " (rank ",
                                       group.rank(), " of ", group.size(), "): ", s.message()));
    }
    if (received) received->add(bucket.raw(), bucket.nbytes());
  }
  if (sent.valid()) return sent.get();
  if (received) return received->digest();
  return weights_checksum(weights);
}

}  // namespace troupe::actors

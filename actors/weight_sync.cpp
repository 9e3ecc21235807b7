#include "actors/weight_sync.hpp"

#include <algorithm>

#include <xxhash.h>

#include "absl/strings/str_cat.h"
#include "runtime/base/status.hpp"

namespace troupe::actors {

absl::StatusOr<std::string> weights_checksum(const tensor::tensor& weights) {
  if (!weights.where().is_cpu()) {
    TROUPE_ASSIGN_OR_RETURN(tensor::tensor host, weights.to(tensor::device::cpu()));
    return weights_checksum(host);
  }
  const XXH128_hash_t h = XXH3_128bits(weights.raw(), weights.nbytes());
  return absl::StrCat(absl::Hex(h.high64, absl::kZeroPad16), absl::Hex(h.low64, absl::kZeroPad16));
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
  for (int64_t b = 0; b < buckets; ++b) {
    const int64_t begin = b * per_bucket, count = std::min(per_bucket, n - begin);
    TROUPE_ASSIGN_OR_RETURN(tensor::tensor bucket, weights.narrow(0, begin, count));
    if (absl::Status s = group.broadcast(bucket, root); !s.ok()) {
      return absl::Status(s.code(),
                          absl::StrCat("weight sync: bucket ", b + 1, " of ", buckets, " (rank ",
                                       group.rank(), " of ", group.size(), "): ", s.message()));
    }
  }
  return weights_checksum(weights);
}

}  // namespace troupe::actors

#include "actors/digest_sink.hpp"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace troupe::actors {

absl::Status digest_sink::consume(uint64_t seq, absl::string_view payload) {
  if (seq != next_seq_) {
    return absl::FailedPreconditionError(absl::StrCat("digest sink received item ", seq,
                                                      " but expected item ", next_seq_,
                                                      "; items must arrive in sequence order"));
  }
  for (unsigned char c : payload)
    hash_ = (hash_ ^ c) * fnv_prime;
  hash_ = (hash_ ^ 0u) * fnv_prime;
  bytes_ += payload.size();
  ++next_seq_;
  return absl::OkStatus();
}

actor::sink_report digest_sink::report() const {
  return {next_seq_, bytes_, absl::StrFormat("fnv1a64:%016x", hash_)};
}

}  // namespace troupe::actors

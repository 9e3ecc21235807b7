#include "runtime/cluster/peer_link.hpp"

#include "runtime/cluster/zmq_util.hpp"

namespace troupe::cluster {

peer_link::peer_link(zmq::socket_t socket, limits limits, metrics::counter& lost)
    : limits_(limits), lost_(lost), socket_(std::move(socket)) {}

absl::Status peer_link::send(absl::string_view envelope) {
  const bool at_job_end = actor::flushes_at_job_end();
  std::lock_guard<std::mutex> lock(mu_);
  if (pending_.size() + envelope.size() > limits_.max_frame_bytes) {
    if (auto s = flush_locked(0); !s.ok()) return s;
  }
  pending_.append(envelope.data(), envelope.size());
  ++pending_envelopes_;
  if (at_job_end && pending_envelopes_ < limits_.batch_envelopes &&
      pending_.size() < limits_.batch_bytes) {
    actor::flush_at_job_end(*this);
    return absl::OkStatus();
  }
  return flush_locked(1);
}

void peer_link::flush() {
  std::lock_guard<std::mutex> lock(mu_);
  (void)flush_locked(0);
}

absl::Status peer_link::flush_locked(size_t callers) {
  if (pending_.empty()) return absl::OkStatus();
  absl::Status s = cluster::send(socket_, {pending_});
  if (!s.ok()) lost_.inc(pending_envelopes_ - callers);
  if (pending_.capacity() > 2 * limits_.batch_bytes) {
    std::string().swap(pending_);  // a link does not hold on to its largest message
  } else {
    pending_.clear();
  }
  pending_envelopes_ = 0;
  return s;
}

}  // namespace troupe::cluster

#pragma once

#include <memory>
#include <mutex>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "runtime/actor/job_end_flush.hpp"
#include "runtime/metrics/registry.hpp"
#include "zmq.hpp"

namespace troupe::cluster {

/// The sending side of the connection to one peer node: a DEALER connected to the peer's
/// ROUTER. Envelopes sent from a scheduler worker's job gather and leave together, back to back
/// in one frame (docs/protocol.md), when the job ends, or sooner once a batch is full; envelopes
/// sent from any other thread leave at once, after whatever gathered before them. Any thread may
/// send; the peer receives envelopes in the order of the `send` calls. Made with make_shared.
class peer_link final : public actor::batched_output {
 public:
  struct limits {
    /// The receiver's limit: a frame never grows past it (a larger envelope goes alone).
    size_t max_frame_bytes = 64 << 20;
    /// A job's batch leaves once it holds this many envelopes or bytes: the peer starts on the
    /// first ones while the job goes on (a batch as large as a burst would leave two processes
    /// taking turns instead of working at once).
    size_t batch_envelopes = 16;
    size_t batch_bytes = 64 << 10;
  };

  /// `lost` counts envelopes that gathered and then could not be sent (a full send queue).
  peer_link(zmq::socket_t socket, limits limits, metrics::counter& lost);

  /// Sends `envelope` (one encoded envelope), or queues it until the calling job ends. An error
  /// means it did not leave.
  absl::Status send(absl::string_view envelope);

  /// Sends whatever gathered. Any thread.
  void flush() override;

 private:
  // Under `mu_`: sends `pending_` as one frame. `callers` of its envelopes learn a failure from
  // the returned status; the others are counted as lost.
  absl::Status flush_locked(size_t callers);

  const limits limits_;
  metrics::counter& lost_;
  std::mutex mu_;
  zmq::socket_t socket_;
  std::string pending_;  // envelopes back to back
  size_t pending_envelopes_ = 0;
};

}  // namespace troupe::cluster

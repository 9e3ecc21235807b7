// A frame from a peer node, as node_agent::on_peer_frame reads it: envelopes back to back, each
// actor message's payload decoded into a CAF message.

#include "runtime/cluster/envelope.hpp"
#include "runtime/cluster/message_codec.hpp"
#include "tests/fuzz/fuzz_target.hpp"

namespace {

void read_peer_frame(absl::string_view input) {
  using namespace troupe::cluster;
  for (frame_reader reader(input.data(), input.size(), 1 << 20); !reader.done();) {
    auto envelope = reader.next();
    if (!envelope.ok()) return;  // the rest of the frame is refused with it
    (void)decode_message(envelope->payload);
  }
}

}  // namespace

TROUPE_FUZZ_TARGET(peer_frame, read_peer_frame)

#pragma once

// The control plane's wire format (docs/protocol.md): every envelope is one msgpack map,
//
//   {"v": 1, "type": "kv.get", "src": "w1", "dst": "", "corr": 7, "epoch": 3, "payload": ...}
//
// plus "from" (the sending actor's id within `src`) when a reply may be addressed to it. A
// ZeroMQ message to or from the head is one envelope; one between peers holds one or more back
// to back (decode_next).

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "msgpack.hpp"

namespace troupe::cluster {

/// The protocol version this build speaks; envelopes with another `v` are refused.
inline constexpr uint32_t protocol_version = 1;

using packer = msgpack::packer<msgpack::sbuffer>;

/// An envelope's header: everything but the payload.
struct envelope {
  uint32_t v = protocol_version;
  /// What the message is ("join", "kv.get", "actor.req", ...).
  std::string type;
  /// The sending node ("head", "w1", ...) or, for clients, anything they like.
  std::string src;
  /// The receiving actor for actor messages; empty for messages to a node or the head.
  std::string dst;
  /// Correlates a response with its request; 0 for messages that expect none.
  uint64_t corr = 0;
  /// The membership epoch the sender knew.
  uint64_t epoch = 0;
  /// The sending actor's id within `src`, so that replies can find it; 0 for none.
  uint64_t from = 0;
};

/// A decoded envelope. `payload` points into memory owned by `handle`.
struct received_envelope {
  envelope header;
  msgpack::object payload;
  msgpack::object_handle handle;
};

/// Encodes `header` with a payload written by `write_payload` (which must write exactly one
/// msgpack object).
[[nodiscard]] std::string encode(const envelope& header,
                                 const std::function<void(packer&)>& write_payload);

/// Encodes `header` with an empty map as payload.
[[nodiscard]] std::string encode(const envelope& header);

/// Encodes `header` with `payload`, which must be one msgpack object (see map_builder).
[[nodiscard]] std::string encode(const envelope& header, absl::string_view payload);

/// Builds a msgpack map payload key by key, counting the entries for the header.
class map_builder {
 public:
  template <class T>
  map_builder& add(absl::string_view key, const T& value) {
    packer pk(body_);
    pk.pack(std::string(key));
    pk.pack(value);
    ++count_;
    return *this;
  }
  /// Adds raw bytes as a msgpack bin.
  map_builder& add_bin(absl::string_view key, absl::string_view bytes);
  /// The encoded map.
  [[nodiscard]] std::string bytes() const;

 private:
  msgpack::sbuffer body_{256};
  uint32_t count_ = 0;
};

/// Decodes one envelope, refusing frames over `max_bytes` (RESOURCE_EXHAUSTED), anything that
/// is not a well-formed envelope (INVALID_ARGUMENT) and other protocol versions
/// (FAILED_PRECONDITION). Never throws.
[[nodiscard]] absl::StatusOr<received_envelope> decode(const char* data, size_t size,
                                                       size_t max_bytes);

/// Decodes the envelope at `offset` of a frame that holds one or more back to back (frames
/// between peers, docs/protocol.md) and moves `offset` past it. The same checks as `decode`, with
/// `max_bytes` bounding each envelope.
[[nodiscard]] absl::StatusOr<received_envelope> decode_next(const char* data, size_t size,
                                                            size_t& offset, size_t max_bytes);

/// The metric label for a decode error: "oversized", "malformed" or "bad_version".
[[nodiscard]] const char* rejection_reason(const absl::Status& decode_error);

}  // namespace troupe::cluster

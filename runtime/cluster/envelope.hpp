#pragma once

// The control plane's wire format (docs/protocol.md): every envelope is one msgpack map,
//
//   {"v": 2, "type": "kv.get", "src": "w1", "dst": "", "corr": 7, "epoch": 3, "payload": ...}
//
// plus "from" (the sending actor's id within `src`) when a reply may be addressed to it. A
// ZeroMQ message to or from the head is one envelope; one between peers holds one or more back
// to back (frame_reader).

#include <cstdint>
#include <string>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "msgpack.hpp"

namespace troupe::cluster {

/// The protocol version this build speaks; envelopes with another `v` are refused. Version 2:
/// token ids (prompts, outputs, batches' tokens and targets) travel as bin i32, not lists.
/// Version 3: a worker_report's events travel as columns, not as a map each. Version 4: a
/// generation_request carries stop_token_ids, which an older worker would ignore.
inline constexpr uint32_t protocol_version = 4;

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

/// A decoded envelope. `payload` points into memory owned by `handle`, or, from a frame_reader,
/// by the reader and its frame.
struct received_envelope {
  envelope header;
  msgpack::object payload;
  msgpack::object_handle handle;
};

/// Appends `header` with a payload written by `write_payload` (which must write exactly one
/// msgpack object) to `out`.
void encode_to(msgpack::sbuffer& out, const envelope& header,
               absl::FunctionRef<void(packer&)> write_payload);

/// `encode_to` into a fresh string.
[[nodiscard]] std::string encode(const envelope& header,
                                 absl::FunctionRef<void(packer&)> write_payload);

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

/// Reads a frame between peers, which holds one or more envelopes back to back
/// (docs/protocol.md), without copying it: the envelopes' payloads point into the frame and
/// into the reader, so both must outlive them. Each envelope gets the checks of `decode`, with
/// `max_bytes` bounding it; after garbage, where the next one would start is unknown, so the
/// rest of the frame is refused with it.
class frame_reader {
 public:
  frame_reader(const char* data, size_t size, size_t max_bytes);
  frame_reader(const frame_reader&) = delete;
  frame_reader& operator=(const frame_reader&) = delete;

  [[nodiscard]] bool done() const { return offset_ >= size_; }
  /// The next envelope; `handle` is empty (the reader owns what `payload` points to).
  [[nodiscard]] absl::StatusOr<received_envelope> next();

 private:
  const char* data_;
  size_t size_;
  size_t max_bytes_;
  size_t offset_ = 0;
  msgpack::zone zone_;  // one for the whole frame, grown in small chunks
};

/// The metric label for a decode error: "oversized", "malformed" or "bad_version".
[[nodiscard]] const char* rejection_reason(const absl::Status& decode_error);

}  // namespace troupe::cluster

#pragma once

// Actor messages on the wire. A CAF message crosses processes as a msgpack array of tagged
// elements, [[tag, value], ...], e.g. [["atom", "process"], ["work_item", {"seq": 3, ...}]].
// docs/protocol.md lists the tags. In process, messages never pass through here.

#include <string>

#include "absl/status/statusor.h"
#include "caf/all.hpp"
#include "runtime/cluster/envelope.hpp"

namespace troupe::cluster {

/// Appends `content` to `pk` as one msgpack array. Fails, naming the element, for a type with
/// no wire form (such as an actor handle): such a message cannot leave its process.
[[nodiscard]] absl::Status encode_message(const caf::type_erased_tuple& content, packer& pk);

/// `encode_message` into a fresh buffer.
[[nodiscard]] absl::StatusOr<std::string> encode_message(const caf::type_erased_tuple& content);

/// Rebuilds a CAF message from its wire form; INVALID_ARGUMENT for anything malformed.
[[nodiscard]] absl::StatusOr<caf::message> decode_message(const msgpack::object& elements);

}  // namespace troupe::cluster

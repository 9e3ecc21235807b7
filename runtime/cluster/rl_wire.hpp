#pragma once

// The wire form of the RL roles' messages (app: rlhf across processes), as elements of
// message_codec's wire form; docs/protocol.md lists their fields. Float arrays travel as msgpack
// bin of little-endian IEEE-754 f32 (f64 for doubles), so that log-probs and weights cross
// bit for bit, and token ids as bin of little-endian int32: one msgpack object each, where a
// list costs one per value to pack, unpack and check. An unpack_* function checks everything a
// peer could have sent and names the field it refuses (INVALID_ARGUMENT).

#include <cstring>
#include <type_traits>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "runtime/actor/message_types.hpp"
#include "runtime/cluster/envelope.hpp"

namespace troupe::cluster::wire {

/// Values of a fixed-size type (ints, floats) as one bin of their little-endian bytes.
template <class T>
void pack_bin_of(packer& pk, const std::vector<T>& x) {
  const auto bytes = static_cast<uint32_t>(x.size() * sizeof(T));
  pk.pack_bin(bytes);
  pk.pack_bin_body(reinterpret_cast<const char*>(x.data()), bytes);
}

/// The bytes of a bin of `T`s, in place; an error naming the field `what` when it is not one.
template <class T>
absl::StatusOr<absl::string_view> bin_bytes_of(const msgpack::object& o, absl::string_view what) {
  if (o.type != msgpack::type::BIN || o.via.bin.size % sizeof(T) != 0) {
    return absl::InvalidArgumentError(absl::StrCat(what, " must be bin of ", sizeof(T), "-byte ",
                                                   std::is_integral_v<T> ? "ints" : "floats"));
  }
  return absl::string_view(o.via.bin.ptr, o.via.bin.size);
}

/// A bin of `T`s, naming the field `what` when it is not one.
template <class T>
absl::StatusOr<std::vector<T>> unpack_bin_of(const msgpack::object& o, absl::string_view what) {
  absl::StatusOr<absl::string_view> bytes = bin_bytes_of<T>(o, what);
  if (!bytes.ok()) return bytes.status();
  std::vector<T> x(bytes->size() / sizeof(T));
  if (!x.empty()) std::memcpy(x.data(), bytes->data(), bytes->size());  // both null when empty
  return x;
}

void pack_floats(packer& pk, const std::vector<float>& x);
absl::StatusOr<std::vector<float>> unpack_floats_bin(const msgpack::object& o);
/// The same, naming the field `what` in the error.
absl::StatusOr<std::vector<float>> unpack_floats_bin(const msgpack::object& o,
                                                     absl::string_view what);

/// Token ids (and other int32 lists) as bin i32; `lowest` is the least value allowed (0 for ids,
/// -1 for targets, where -1 is not trained on).
void pack_ids(packer& pk, const std::vector<int32_t>& x);
absl::StatusOr<std::vector<int32_t>> unpack_ids_bin(const msgpack::object* o,
                                                    absl::string_view what, int32_t lowest = 0);

void pack_doubles(packer& pk, const std::vector<double>& x);
absl::StatusOr<std::vector<double>> unpack_doubles_bin(const msgpack::object& o);

void pack_rl_batch(packer& pk, const actor::rl_batch& x);
absl::StatusOr<actor::rl_batch> unpack_rl_batch(const msgpack::object& o);

void pack_rl_step(packer& pk, const actor::rl_step_report& x);
absl::StatusOr<actor::rl_step_report> unpack_rl_step(const msgpack::object& o);

void pack_sync_round(packer& pk, const actor::weight_sync_round& x);
absl::StatusOr<actor::weight_sync_round> unpack_sync_round(const msgpack::object& o);

void pack_weights_ack(packer& pk, const actor::weights_ack& x);
absl::StatusOr<actor::weights_ack> unpack_weights_ack(const msgpack::object& o);

void pack_reward_request(packer& pk, const actor::reward_request& x);
absl::StatusOr<actor::reward_request> unpack_reward_request(const msgpack::object& o);

void pack_generations(packer& pk, const std::vector<actor::generation_request>& x);
absl::StatusOr<std::vector<actor::generation_request>> unpack_generations(const msgpack::object& o);

}  // namespace troupe::cluster::wire

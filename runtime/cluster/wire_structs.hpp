#pragma once

// The msgpack maps in which troupe's actor message structs (runtime/actor/message_types.hpp)
// cross processes, as elements of message_codec's wire form; docs/protocol.md lists their
// fields. An unpack_* function checks everything a peer could have sent and names the field it
// refuses (INVALID_ARGUMENT).

#include <vector>

#include "absl/status/statusor.h"
#include "runtime/actor/message_types.hpp"
#include "runtime/cluster/envelope.hpp"

namespace troupe::cluster::wire {

void pack_item(packer& pk, const actor::work_item& x);
absl::StatusOr<actor::work_item> unpack_item(const msgpack::object& o);

void pack_items(packer& pk, const std::vector<actor::work_item>& xs);
absl::StatusOr<std::vector<actor::work_item>> unpack_items(const msgpack::object& o);

void pack_batch(packer& pk, const actor::source_batch& x);
absl::StatusOr<actor::source_batch> unpack_batch(const msgpack::object& o);

void pack_report(packer& pk, const actor::sink_report& x);
absl::StatusOr<actor::sink_report> unpack_report(const msgpack::object& o);

void pack_custom(packer& pk, const actor::custom_message& x);
absl::StatusOr<actor::custom_message> unpack_custom(const msgpack::object& o);

void pack_down(packer& pk, const actor::actor_down& x);
absl::StatusOr<actor::actor_down> unpack_down(const msgpack::object& o);

void pack_result(packer& pk, const actor::job_result& x);
absl::StatusOr<actor::job_result> unpack_result(const msgpack::object& o);

void pack_tokens(packer& pk, const actor::token_batch& x);
absl::StatusOr<actor::token_batch> unpack_tokens(const msgpack::object& o);

void pack_step(packer& pk, const actor::step_report& x);
absl::StatusOr<actor::step_report> unpack_step(const msgpack::object& o);
void pack_eval(packer& pk, const actor::eval_report& x);
absl::StatusOr<actor::eval_report> unpack_eval(const msgpack::object& o);
void pack_group_change(packer& pk, const actor::group_change& x);
absl::StatusOr<actor::group_change> unpack_group_change(const msgpack::object& o);

void pack_shard(packer& pk, const actor::checkpoint_shard& x);
absl::StatusOr<actor::checkpoint_shard> unpack_shard(const msgpack::object& o);

void pack_generation(packer& pk, const actor::generation_request& x);
absl::StatusOr<actor::generation_request> unpack_generation(const msgpack::object& o);

void pack_worker_report(packer& pk, const actor::worker_report& x);
absl::StatusOr<actor::worker_report> unpack_worker_report(const msgpack::object& o);

}  // namespace troupe::cluster::wire

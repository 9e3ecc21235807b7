#include "runtime/cluster/rl_wire.hpp"

#include <cstring>
#include <type_traits>

#include "absl/algorithm/container.h"
#include "absl/strings/str_cat.h"
#include "runtime/base/status.hpp"
#include "runtime/cluster/msgpack_view.hpp"
#include "runtime/cluster/wire_structs.hpp"

namespace troupe::cluster::wire {
namespace {

static_assert(sizeof(float) == 4 && sizeof(double) == 8, "IEEE-754 floats");

constexpr std::pair<const char*, double actor::rl_step_report::*> rl_step_figures[] = {
    {"pg_loss", &actor::rl_step_report::pg_loss},
    {"pg_clipfrac", &actor::rl_step_report::pg_clipfrac},
    {"pg_clipfrac_lower", &actor::rl_step_report::pg_clipfrac_lower},
    {"ppo_kl", &actor::rl_step_report::ppo_kl},
    {"entropy", &actor::rl_step_report::entropy},
    {"kl_loss", &actor::rl_step_report::kl_loss},
    {"vf_loss", &actor::rl_step_report::vf_loss},
    {"vf_clipfrac", &actor::rl_step_report::vf_clipfrac},
    {"vpred_mean", &actor::rl_step_report::vpred_mean},
    {"grad_norm", &actor::rl_step_report::grad_norm},
    {"lr", &actor::rl_step_report::lr},
    {"compute_s", &actor::rl_step_report::compute_s},
    {"comm_s", &actor::rl_step_report::comm_s}};

constexpr std::pair<const char*, std::vector<float> actor::rl_batch::*> rl_batch_floats[] = {
    {"old_log_probs", &actor::rl_batch::old_log_probs},
    {"ref_log_probs", &actor::rl_batch::ref_log_probs},
    {"advantages", &actor::rl_batch::advantages},
    {"values", &actor::rl_batch::values},
    {"returns", &actor::rl_batch::returns},
    {"weights", &actor::rl_batch::weights}};

}  // namespace

void pack_floats(packer& pk, const std::vector<float>& x) {
  pack_bin_of(pk, x);
}
absl::StatusOr<std::vector<float>> unpack_floats_bin(const msgpack::object& o) {
  return unpack_bin_of<float>(o, "f32 array");
}
absl::StatusOr<std::vector<float>> unpack_floats_bin(const msgpack::object& o,
                                                     absl::string_view what) {
  return unpack_bin_of<float>(o, what);
}

void pack_ids(packer& pk, const std::vector<int32_t>& x) {
  pack_bin_of(pk, x);
}
absl::StatusOr<std::vector<int32_t>> unpack_ids_bin(const msgpack::object* o,
                                                    absl::string_view what, int32_t lowest) {
  if (o == nullptr) return absl::InvalidArgumentError(absl::StrCat(what, " is missing"));
  TROUPE_ASSIGN_OR_RETURN(std::vector<int32_t> ids, unpack_bin_of<int32_t>(*o, what));
  if (auto low = absl::c_find_if(ids, [lowest](int32_t id) { return id < lowest; });
      low != ids.end()) {
    return absl::InvalidArgumentError(absl::StrCat(what, " holds ", *low, " at ", low - ids.begin(),
                                                   "; the least allowed is ", lowest));
  }
  return ids;
}

void pack_doubles(packer& pk, const std::vector<double>& x) {
  pack_bin_of(pk, x);
}
absl::StatusOr<std::vector<double>> unpack_doubles_bin(const msgpack::object& o) {
  return unpack_bin_of<double>(o, "f64 array");
}

void pack_rl_batch(packer& pk, const actor::rl_batch& x) {
  pk.pack_map(static_cast<uint32_t>(4 + std::size(rl_batch_floats)));
  pk.pack("batch");
  pk.pack(x.batch);
  pk.pack("ctx");
  pk.pack(x.ctx);
  pk.pack("tokens");
  pack_ids(pk, x.tokens);
  pk.pack("targets");
  pack_ids(pk, x.targets);
  for (const auto& [key, member] : rl_batch_floats) {
    pk.pack(key);
    pack_bin_of(pk, x.*member);
  }
}

absl::StatusOr<actor::rl_batch> unpack_rl_batch(const msgpack::object& o) {
  TROUPE_ASSIGN_OR_RETURN(auto m, map_view::of(o, "rl_batch"));
  actor::rl_batch x;
  TROUPE_ASSIGN_OR_RETURN(int64_t batch, m.get_int("batch", -1));
  TROUPE_ASSIGN_OR_RETURN(int64_t ctx, m.get_int("ctx", -1));
  if (batch < 0 || ctx < 0 || batch > INT32_MAX || ctx > INT32_MAX) {
    return absl::InvalidArgumentError("rl_batch: 'batch' and 'ctx' must be sizes");
  }
  x.batch = static_cast<int32_t>(batch);
  x.ctx = static_cast<int32_t>(ctx);
  TROUPE_ASSIGN_OR_RETURN(x.tokens, unpack_ids_bin(m.find("tokens"), "rl_batch: 'tokens'"));
  TROUPE_ASSIGN_OR_RETURN(x.targets, unpack_ids_bin(m.find("targets"), "rl_batch: 'targets'", -1));
  for (const auto& [key, member] : rl_batch_floats) {
    const msgpack::object* v = m.find(key);
    if (v == nullptr) return absl::InvalidArgumentError(absl::StrCat("rl_batch: no '", key, "'"));
    TROUPE_ASSIGN_OR_RETURN(x.*member,
                            unpack_bin_of<float>(*v, absl::StrCat("rl_batch: '", key, "'")));
  }
  // The sizes against batch x ctx are the trainer's to check (actors::validate names the field).
  return x;
}

void pack_rl_step(packer& pk, const actor::rl_step_report& x) {
  pk.pack_map(static_cast<uint32_t>(std::size(rl_step_figures) + 1));
  pk.pack("step");
  pk.pack(x.step);
  for (const auto& [key, member] : rl_step_figures) {
    pk.pack(key);
    pk.pack(x.*member);
  }
}

absl::StatusOr<actor::rl_step_report> unpack_rl_step(const msgpack::object& o) {
  TROUPE_ASSIGN_OR_RETURN(auto m, map_view::of(o, "rl_step_report"));
  actor::rl_step_report x;
  TROUPE_ASSIGN_OR_RETURN(x.step, m.get_int("step", 0));
  // A figure of either sign (pg_loss, ppo_kl may be negative); absent figures are zero.
  for (const auto& [key, member] : rl_step_figures) {
    TROUPE_ASSIGN_OR_RETURN(x.*member, m.get_double(key, 0.0));
  }
  return x;
}

void pack_sync_round(packer& pk, const actor::weight_sync_round& x) {
  pk.pack_map(6);
  pk.pack("version");
  pk.pack(x.version);
  pk.pack("epoch");
  pk.pack(x.epoch);
  pk.pack("rank");
  pk.pack(x.rank);
  pk.pack("ranks");
  pk.pack(x.ranks);
  pk.pack("sent_at_ns");
  pk.pack(x.sent_at_ns);
  pk.pack("clock");
  pk.pack(x.clock_domain);
}

absl::StatusOr<actor::weight_sync_round> unpack_sync_round(const msgpack::object& o) {
  TROUPE_ASSIGN_OR_RETURN(auto m, map_view::of(o, "weight_sync_round"));
  actor::weight_sync_round x;
  TROUPE_ASSIGN_OR_RETURN(x.version, m.get_uint("version"));
  TROUPE_ASSIGN_OR_RETURN(x.epoch, m.get_uint("epoch"));
  TROUPE_ASSIGN_OR_RETURN(uint64_t rank, m.get_uint("rank"));
  TROUPE_ASSIGN_OR_RETURN(uint64_t ranks, m.get_uint("ranks"));
  if (ranks < 1 || ranks > 65536 || rank >= ranks) {
    return absl::InvalidArgumentError(absl::StrCat(
        "weight_sync_round: rank ", rank, " must be a rank of a group of ", ranks, " (1..65536)"));
  }
  x.rank = static_cast<int32_t>(rank);
  x.ranks = static_cast<int32_t>(ranks);
  TROUPE_ASSIGN_OR_RETURN(x.sent_at_ns, m.get_int("sent_at_ns", 0));
  TROUPE_ASSIGN_OR_RETURN(x.clock_domain, m.get_string("clock", ""));
  return x;
}

void pack_weights_ack(packer& pk, const actor::weights_ack& x) {
  pk.pack_map(3);
  pk.pack("version");
  pk.pack(x.version);
  pk.pack("checksum");
  pk.pack(x.checksum);
  pk.pack("swap_s");
  pk.pack(x.swap_s);
}

absl::StatusOr<actor::weights_ack> unpack_weights_ack(const msgpack::object& o) {
  TROUPE_ASSIGN_OR_RETURN(auto m, map_view::of(o, "weights_ack"));
  actor::weights_ack x;
  TROUPE_ASSIGN_OR_RETURN(x.version, m.get_uint("version"));
  TROUPE_ASSIGN_OR_RETURN(x.checksum, m.get_string("checksum"));
  TROUPE_ASSIGN_OR_RETURN(x.swap_s, m.get_double("swap_s", 0.0));
  if (!(x.swap_s >= 0)) return absl::InvalidArgumentError("weights_ack: 'swap_s' must be >= 0");
  return x;
}

void pack_reward_request(packer& pk, const actor::reward_request& x) {
  pk.pack_map(3);
  pk.pack("prompts");
  pk.pack(x.prompts);
  pk.pack("responses");
  pk.pack(x.responses);
  pk.pack("ended");
  pk.pack(std::string(x.ended.begin(), x.ended.end()));
}

absl::StatusOr<actor::reward_request> unpack_reward_request(const msgpack::object& o) {
  TROUPE_ASSIGN_OR_RETURN(auto m, map_view::of(o, "reward_request"));
  actor::reward_request x;
  TROUPE_ASSIGN_OR_RETURN(x.prompts, m.get_strings("prompts"));
  TROUPE_ASSIGN_OR_RETURN(x.responses, m.get_strings("responses"));
  TROUPE_ASSIGN_OR_RETURN(std::string ended, m.get_string("ended"));
  x.ended.assign(ended.begin(), ended.end());
  if (x.responses.size() != x.prompts.size() || x.ended.size() != x.prompts.size()) {
    return absl::InvalidArgumentError(
        "reward_request: 'prompts', 'responses' and 'ended' must pair up");
  }
  return x;
}

void pack_generations(packer& pk, const std::vector<actor::generation_request>& x) {
  pk.pack_array(static_cast<uint32_t>(x.size()));
  for (const auto& r : x)
    pack_generation(pk, r);
}

absl::StatusOr<std::vector<actor::generation_request>> unpack_generations(
    const msgpack::object& o) {
  if (o.type != msgpack::type::ARRAY) {
    return absl::InvalidArgumentError("generation requests: expected a list");
  }
  std::vector<actor::generation_request> out;
  for (uint32_t i = 0; i < o.via.array.size; ++i) {
    TROUPE_ASSIGN_OR_RETURN(auto r, unpack_generation(o.via.array.ptr[i]));
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace troupe::cluster::wire

#include "runtime/cluster/wire_structs.hpp"

#include <algorithm>
#include <cstring>
#include <tuple>
#include <type_traits>

#include "absl/strings/str_cat.h"
#include "runtime/base/status.hpp"
#include "runtime/cluster/msgpack_view.hpp"
#include "runtime/cluster/rl_wire.hpp"

namespace troupe::cluster::wire {

using actor::work_item;

namespace {

void pack_bin(packer& pk, absl::string_view bytes) {
  pk.pack_bin(static_cast<uint32_t>(bytes.size()));
  pk.pack_bin_body(bytes.data(), static_cast<uint32_t>(bytes.size()));
}

// finish_reason on the wire: 0 length, 1 stop, 2 cancelled (its enumerators' values).
constexpr uint8_t reason_code(actor::finish_reason r) {
  return static_cast<uint8_t>(r);
}
constexpr uint8_t max_reason_code = reason_code(actor::finish_reason::cancelled);
static_assert(reason_code(actor::finish_reason::length) == 0 &&
              reason_code(actor::finish_reason::stop) == 1 && max_reason_code == 2);

// Packs one bin of the events' `field` vectors back to back.
template <class T>
void pack_joined(packer& pk, const std::vector<actor::generation_event>& events,
                 const std::vector<T> actor::generation_event::*field) {
  size_t total = 0;
  for (const auto& e : events)
    total += (e.*field).size();
  pk.pack_bin(static_cast<uint32_t>(total * sizeof(T)));
  for (const auto& e : events) {
    pk.pack_bin_body(reinterpret_cast<const char*>((e.*field).data()),
                     static_cast<uint32_t>((e.*field).size() * sizeof(T)));
  }
}

// A report's events travel as columns (docs/protocol.md): one bin per field with the events'
// values in order, the variable-length fields back to back with a count per event. A report
// carries hundreds of events (an RL step's responses): as maps they cost a dozen msgpack
// objects, key lookups and allocations each to pack, unpack and check.
void pack_events(packer& pk, const std::vector<actor::generation_event>& events) {
  const size_t n = events.size();
  std::vector<uint64_t> ids(n), versions(n);
  std::vector<int32_t> first(n), token_counts(n), logprob_counts(n), top_counts(n),
      embedding_counts(n);
  std::vector<uint8_t> finished(n), reasons(n);
  bool any_first = false, any_top = false, any_embedding = false;
  for (size_t i = 0; i < n; ++i) {
    const actor::generation_event& e = events[i];
    ids[i] = e.id;
    versions[i] = e.weights_version;
    first[i] = e.first_index;
    token_counts[i] = static_cast<int32_t>(e.tokens.size());
    logprob_counts[i] = static_cast<int32_t>(e.logprobs.size());
    top_counts[i] = static_cast<int32_t>(e.top_tokens.size());
    finished[i] = e.finished ? 1 : 0;
    reasons[i] = reason_code(e.reason);
    any_first |= e.first_index != 0;
    any_top |= !e.top_tokens.empty() || !e.top_values.empty();
    embedding_counts[i] = static_cast<int32_t>(e.embedding.size());
    any_embedding |= !e.embedding.empty();
  }
  // first_index, the top lists and the embeddings are left out when no event has them.
  pk.pack_map(8 + (any_first ? 1 : 0) + (any_top ? 3 : 0) + (any_embedding ? 2 : 0));
  pk.pack("id");
  pack_bin_of(pk, ids);
  pk.pack("weights_version");
  pack_bin_of(pk, versions);
  pk.pack("finished");
  pack_bin_of(pk, finished);
  pk.pack("reason");
  pack_bin_of(pk, reasons);
  pk.pack("token_counts");
  pack_bin_of(pk, token_counts);
  pk.pack("tokens");
  pack_joined(pk, events, &actor::generation_event::tokens);
  pk.pack("logprob_counts");
  pack_bin_of(pk, logprob_counts);
  pk.pack("logprobs");
  pack_joined(pk, events, &actor::generation_event::logprobs);
  if (any_first) {
    pk.pack("first_index");
    pack_bin_of(pk, first);
  }
  if (any_top) {
    pk.pack("top_counts");
    pack_bin_of(pk, top_counts);
    pk.pack("top_tokens");
    pack_joined(pk, events, &actor::generation_event::top_tokens);
    pk.pack("top_values");
    pack_joined(pk, events, &actor::generation_event::top_values);
  }
  if (any_embedding) {
    pk.pack("embedding_counts");
    pack_bin_of(pk, embedding_counts);
    pk.pack("embeddings");
    pack_joined(pk, events, &actor::generation_event::embedding);
  }
}

// Column `key` of `n` events: its values, or n zeros where it may be left out and is.
template <class T>
absl::StatusOr<std::vector<T>> unpack_column(const map_view& m, absl::string_view key, size_t n,
                                             bool optional) {
  const std::string what = absl::StrCat("worker_report: events' '", key, "'");
  const msgpack::object* o = m.find(key);
  if (o == nullptr) {
    if (optional) return std::vector<T>(n);
    return absl::InvalidArgumentError(absl::StrCat(what, " is missing"));
  }
  TROUPE_ASSIGN_OR_RETURN(std::vector<T> x, unpack_bin_of<T>(*o, what));
  if (x.size() != n) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " has ", x.size(), " values for ", n, " events"));
  }
  return x;
}

// The events' values of one field back to back: a bin of the frame, read in place.
template <class T>
struct joined_values {
  const char* bytes = nullptr;
  size_t size = 0;

  T at(size_t i) const {
    T x;
    std::memcpy(&x, bytes + i * sizeof(T), sizeof(T));  // a bin is not aligned
    return x;
  }
  // Values [from, from + n) into `out`.
  void copy(size_t from, size_t n, std::vector<T>& out) const {
    out.resize(n);
    if (n > 0) std::memcpy(out.data(), bytes + from * sizeof(T), n * sizeof(T));
  }
};

// The joined bin `key`, checked against `counts` (each at least 0, summing to its size).
template <class T>
absl::StatusOr<joined_values<T>> unpack_joined(const map_view& m, absl::string_view key,
                                               const std::vector<int32_t>& counts) {
  const std::string what = absl::StrCat("worker_report: events' '", key, "'");
  int64_t total = 0;
  for (int32_t c : counts) {
    if (c < 0) return absl::InvalidArgumentError(absl::StrCat(what, ": a count of ", c));
    total += c;
  }
  const msgpack::object* o = m.find(key);
  if (o == nullptr && total == 0) return joined_values<T>{};
  if (o == nullptr) return absl::InvalidArgumentError(absl::StrCat(what, " is missing"));
  TROUPE_ASSIGN_OR_RETURN(absl::string_view bytes, bin_bytes_of<T>(*o, what));
  const joined_values<T> x{bytes.data(), bytes.size() / sizeof(T)};
  if (static_cast<int64_t>(x.size) != total) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " holds ", x.size, " values where the counts add up to ", total));
  }
  if constexpr (std::is_integral_v<T>) {  // token ids
    for (size_t i = 0; i < x.size; ++i) {
      if (x.at(i) < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat(what, " holds ", x.at(i), " at ", i, "; the least allowed is 0"));
      }
    }
  }
  return x;
}

absl::StatusOr<std::vector<actor::generation_event>> unpack_events(const msgpack::object& o) {
  TROUPE_ASSIGN_OR_RETURN(auto m, map_view::of(o, "worker_report: 'events'"));
  // Every column holds one value per event: as many as `id` does.
  const msgpack::object* id = m.find("id");
  const size_t n =
      id != nullptr && id->type == msgpack::type::BIN ? id->via.bin.size / sizeof(uint64_t) : 0;
  TROUPE_ASSIGN_OR_RETURN(auto ids, unpack_column<uint64_t>(m, "id", n, false));
  TROUPE_ASSIGN_OR_RETURN(auto versions, unpack_column<uint64_t>(m, "weights_version", n, true));
  TROUPE_ASSIGN_OR_RETURN(auto finished, unpack_column<uint8_t>(m, "finished", n, true));
  TROUPE_ASSIGN_OR_RETURN(auto reasons, unpack_column<uint8_t>(m, "reason", n, true));
  TROUPE_ASSIGN_OR_RETURN(auto first, unpack_column<int32_t>(m, "first_index", n, true));
  TROUPE_ASSIGN_OR_RETURN(auto token_counts, unpack_column<int32_t>(m, "token_counts", n, false));
  TROUPE_ASSIGN_OR_RETURN(auto logprob_counts,
                          unpack_column<int32_t>(m, "logprob_counts", n, true));
  TROUPE_ASSIGN_OR_RETURN(auto top_counts, unpack_column<int32_t>(m, "top_counts", n, true));
  TROUPE_ASSIGN_OR_RETURN(auto embedding_counts,
                          unpack_column<int32_t>(m, "embedding_counts", n, true));
  TROUPE_ASSIGN_OR_RETURN(auto tokens, unpack_joined<int32_t>(m, "tokens", token_counts));
  TROUPE_ASSIGN_OR_RETURN(auto logprobs, unpack_joined<float>(m, "logprobs", logprob_counts));
  TROUPE_ASSIGN_OR_RETURN(auto top_tokens, unpack_joined<int32_t>(m, "top_tokens", top_counts));
  TROUPE_ASSIGN_OR_RETURN(auto top_values, unpack_joined<float>(m, "top_values", top_counts));
  TROUPE_ASSIGN_OR_RETURN(auto embeddings, unpack_joined<float>(m, "embeddings", embedding_counts));

  std::vector<actor::generation_event> events(n);
  size_t at_token = 0, at_logprob = 0, at_top = 0, at_embedding = 0;
  for (size_t i = 0; i < n; ++i) {
    actor::generation_event& e = events[i];
    const size_t tokens_here = token_counts[i], logprobs_here = logprob_counts[i],
                 top_here = top_counts[i];
    if (logprobs_here != 0 && logprobs_here != tokens_here) {
      return absl::InvalidArgumentError(absl::StrCat("generation_event ", ids[i], ": ",
                                                     logprobs_here, " logprobs for ", tokens_here,
                                                     " tokens"));
    }
    if (top_here % std::max<size_t>(1, tokens_here) != 0) {
      return absl::InvalidArgumentError(absl::StrCat("generation_event ", ids[i], ": ", top_here,
                                                     " top log-probs for ", tokens_here,
                                                     " tokens (a whole number per token)"));
    }
    if (finished[i] > 1) {
      return absl::InvalidArgumentError(absl::StrCat("generation_event ", ids[i],
                                                     ": 'finished' is ", int{finished[i]},
                                                     "; it must be 0 or 1"));
    }
    if (reasons[i] > max_reason_code) {
      return absl::InvalidArgumentError(
          absl::StrCat("generation_event ", ids[i], ": 'reason' is ", int{reasons[i]},
                       "; it must be 0 (length), 1 (stop) or 2 (cancelled)"));
    }
    e.id = ids[i];
    e.weights_version = versions[i];
    e.first_index = first[i];
    e.finished = finished[i] == 1;
    e.reason = static_cast<actor::finish_reason>(reasons[i]);
    tokens.copy(at_token, tokens_here, e.tokens);
    logprobs.copy(at_logprob, logprobs_here, e.logprobs);
    top_tokens.copy(at_top, top_here, e.top_tokens);
    top_values.copy(at_top, top_here, e.top_values);
    embeddings.copy(at_embedding, embedding_counts[i], e.embedding);
    at_embedding += embedding_counts[i];
    at_token += tokens_here;
    at_logprob += logprobs_here;
    at_top += top_here;
  }
  return events;
}

// worker_report's counts, by wire name.
constexpr std::pair<const char*, int32_t actor::worker_report::*> report_counts[] = {
    {"kv_blocks_used", &actor::worker_report::kv_blocks_used},
    {"kv_blocks_total", &actor::worker_report::kv_blocks_total},
    {"waiting", &actor::worker_report::waiting},
    {"running", &actor::worker_report::running},
    {"prefix_cache_queries", &actor::worker_report::prefix_cache_queries},
    {"prefix_cache_hits", &actor::worker_report::prefix_cache_hits},
    {"spec_decode_drafts", &actor::worker_report::spec_decode_drafts},
    {"spec_decode_draft_tokens", &actor::worker_report::spec_decode_draft_tokens},
    {"spec_decode_accepted_tokens", &actor::worker_report::spec_decode_accepted_tokens}};

}  // namespace

void pack_item(packer& pk, const work_item& x) {
  pk.pack_map(2);
  pk.pack("seq");
  pk.pack(x.seq);
  pk.pack("payload");
  pack_bin(pk, x.payload);
}

absl::StatusOr<work_item> unpack_item(const msgpack::object& o) {
  auto m = map_view::of(o, "work_item");
  if (!m.ok()) return m.status();
  auto seq = m->get_uint("seq");
  auto payload = m->get_bytes("payload");
  if (!seq.ok()) return seq.status();
  if (!payload.ok()) return payload.status();
  return work_item{*seq, std::move(*payload)};
}

void pack_items(packer& pk, const std::vector<work_item>& xs) {
  pk.pack_array(static_cast<uint32_t>(xs.size()));
  for (const auto& x : xs)
    pack_item(pk, x);
}

absl::StatusOr<std::vector<work_item>> unpack_items(const msgpack::object& o) {
  if (o.type != msgpack::type::ARRAY) return absl::InvalidArgumentError("items: expected a list");
  std::vector<work_item> out;
  for (uint32_t i = 0; i < o.via.array.size; ++i) {
    auto item = unpack_item(o.via.array.ptr[i]);
    if (!item.ok()) return item.status();
    out.push_back(std::move(*item));
  }
  return out;
}

void pack_batch(packer& pk, const actor::source_batch& x) {
  pk.pack_map(2);
  pk.pack("items");
  pack_items(pk, x.items);
  pk.pack("total");
  pk.pack(x.total);
}
absl::StatusOr<actor::source_batch> unpack_batch(const msgpack::object& o) {
  auto m = map_view::of(o, "source_batch");
  if (!m.ok()) return m.status();
  const msgpack::object* items = m->find("items");
  if (items == nullptr) return absl::InvalidArgumentError("source_batch: missing 'items'");
  auto xs = unpack_items(*items);
  auto total = m->get_int("total", -1);
  if (!xs.ok()) return xs.status();
  if (!total.ok()) return total.status();
  return actor::source_batch{std::move(*xs), *total};
}

void pack_report(packer& pk, const actor::sink_report& x) {
  pk.pack_map(3);
  pk.pack("items");
  pk.pack(x.items);
  pk.pack("bytes");
  pk.pack(x.bytes);
  pk.pack("digest");
  pk.pack(x.digest);
}
absl::StatusOr<actor::sink_report> unpack_report(const msgpack::object& o) {
  auto m = map_view::of(o, "sink_report");
  if (!m.ok()) return m.status();
  auto items = m->get_uint("items");
  auto bytes = m->get_uint("bytes");
  auto digest = m->get_string("digest");
  if (!items.ok()) return items.status();
  if (!bytes.ok()) return bytes.status();
  if (!digest.ok()) return digest.status();
  return actor::sink_report{*items, *bytes, std::move(*digest)};
}

void pack_custom(packer& pk, const actor::custom_message& x) {
  pk.pack_map(2);
  pk.pack("type");
  pk.pack(x.type);
  pk.pack("bytes");
  pack_bin(pk, absl::string_view(reinterpret_cast<const char*>(x.bytes.data()), x.bytes.size()));
}
absl::StatusOr<actor::custom_message> unpack_custom(const msgpack::object& o) {
  auto m = map_view::of(o, "custom_message");
  if (!m.ok()) return m.status();
  auto type = m->get_string("type");
  auto bytes = m->get_bytes("bytes");
  if (!type.ok()) return type.status();
  if (!bytes.ok()) return bytes.status();
  return actor::custom_message{std::move(*type),
                               std::vector<uint8_t>(bytes->begin(), bytes->end())};
}

void pack_down(packer& pk, const actor::actor_down& x) {
  pk.pack_map(3);
  pk.pack("name");
  pk.pack(x.name);
  pk.pack("code");
  pk.pack(x.code);
  pk.pack("message");
  pk.pack(x.message);
}
absl::StatusOr<actor::actor_down> unpack_down(const msgpack::object& o) {
  auto m = map_view::of(o, "actor_down");
  if (!m.ok()) return m.status();
  auto name = m->get_string("name");
  auto code = m->get_int("code", 0);
  auto message = m->get_string("message", "");
  if (!name.ok()) return name.status();
  if (!code.ok()) return code.status();
  if (!message.ok()) return message.status();
  return actor::actor_down{std::move(*name), static_cast<int32_t>(*code), std::move(*message)};
}

void pack_result(packer& pk, const actor::job_result& x) {
  pk.pack_map(3);
  pk.pack("ok");
  pk.pack(x.ok);
  pk.pack("summary");
  pk.pack(x.summary_json);
  pk.pack("error");
  pk.pack(x.error);
}
absl::StatusOr<actor::job_result> unpack_result(const msgpack::object& o) {
  auto m = map_view::of(o, "job_result");
  if (!m.ok()) return m.status();
  const msgpack::object* ok = m->find("ok");
  if (ok == nullptr || ok->type != msgpack::type::BOOLEAN) {
    return absl::InvalidArgumentError("job_result: 'ok' must be a boolean");
  }
  auto summary = m->get_string("summary", "");
  auto error = m->get_string("error", "");
  if (!summary.ok()) return summary.status();
  if (!error.ok()) return error.status();
  return actor::job_result{ok->via.boolean, std::move(*summary), std::move(*error)};
}

void pack_tokens(packer& pk, const actor::token_batch& x) {
  pk.pack_map(7 + (x.margins.empty() ? 0 : 1) + (x.reference_logps.empty() ? 0 : 1));
  for (const auto& [key, values] :
       {std::pair{"margins", &x.margins}, {"reference_logps", &x.reference_logps}}) {
    if (values->empty()) continue;
    pk.pack(key);
    pack_floats(pk, *values);
  }
  pk.pack("batch");
  pk.pack(x.batch);
  pk.pack("ctx");
  pk.pack(x.ctx);
  pk.pack("global_targets");
  pk.pack(x.global_targets);
  pk.pack("tokens");
  pack_ids(pk, x.tokens);
  pk.pack("targets");
  pack_ids(pk, x.targets);
  pk.pack("first_sample");
  pk.pack(x.first_sample);
  pk.pack("cursor");
  pk.pack(x.cursor);
}
absl::StatusOr<actor::token_batch> unpack_tokens(const msgpack::object& o) {
  auto m = map_view::of(o, "token_batch");
  if (!m.ok()) return m.status();
  actor::token_batch x;
  auto batch = m->get_int("batch", -1), ctx = m->get_int("ctx", -1);
  auto first = m->get_int("first_sample", 0), cursor = m->get_int("cursor", 0);
  auto global_targets = m->get_int("global_targets", 0);
  for (const auto* s : {&batch, &ctx, &first, &cursor, &global_targets}) {
    if (!s->ok()) return s->status();
  }
  if (*global_targets < 0) {
    return absl::InvalidArgumentError("token_batch: 'global_targets' must not be negative");
  }
  x.global_targets = *global_targets;
  x.batch = static_cast<int32_t>(*batch);
  x.ctx = static_cast<int32_t>(*ctx);
  x.first_sample = *first;
  x.cursor = *cursor;
  TROUPE_ASSIGN_OR_RETURN(x.tokens, unpack_ids_bin(m->find("tokens"), "token_batch: 'tokens'"));
  TROUPE_ASSIGN_OR_RETURN(x.targets,
                          unpack_ids_bin(m->find("targets"), "token_batch: 'targets'", -1));
  if (x.batch < 0 || x.ctx < 0 ||
      static_cast<int64_t>(x.tokens.size()) != int64_t{x.batch} * x.ctx ||
      x.targets.size() != x.tokens.size()) {
    return absl::InvalidArgumentError("token_batch: tokens and targets must hold batch x ctx ids");
  }
  if (const msgpack::object* margins = m->find("margins"); margins != nullptr) {
    TROUPE_ASSIGN_OR_RETURN(x.margins, unpack_floats_bin(*margins));
    if (2 * x.margins.size() != static_cast<size_t>(x.batch)) {
      return absl::InvalidArgumentError(
          "token_batch: 'margins' must hold one margin per pair (batch / 2)");
    }
  }
  if (const msgpack::object* logps = m->find("reference_logps"); logps != nullptr) {
    TROUPE_ASSIGN_OR_RETURN(x.reference_logps, unpack_floats_bin(*logps));
    if (x.reference_logps.size() != static_cast<size_t>(x.batch)) {
      return absl::InvalidArgumentError(
          "token_batch: 'reference_logps' must hold one log-probability per row (batch)");
    }
  }
  return x;
}

namespace {

constexpr std::pair<const char*, double actor::pair_metrics::*> pair_figures[] = {
    {"accuracy", &actor::pair_metrics::accuracy},
    {"margin", &actor::pair_metrics::margin},
    {"reward_chosen", &actor::pair_metrics::reward_chosen},
    {"reward_rejected", &actor::pair_metrics::reward_rejected},
    {"logp_chosen", &actor::pair_metrics::logp_chosen},
    {"logp_rejected", &actor::pair_metrics::logp_rejected}};

// A report's pair figures, as the map's entries "pairs" (the count) and "pair_<figure>".
constexpr uint32_t pair_entries = 1 + std::size(pair_figures);
void pack_pair_metrics(packer& pk, const actor::pair_metrics& x) {
  pk.pack("pairs");
  pk.pack(x.count);
  for (const auto& [key, field] : pair_figures) {
    pk.pack(absl::StrCat("pair_", key));
    pk.pack(x.*field);
  }
}
absl::StatusOr<actor::pair_metrics> unpack_pair_metrics(const map_view& m) {
  actor::pair_metrics x;
  TROUPE_ASSIGN_OR_RETURN(x.count, m.get_int("pairs", 0));
  for (const auto& [key, field] : pair_figures) {
    TROUPE_ASSIGN_OR_RETURN(x.*field, m.get_double(absl::StrCat("pair_", key), 0));
  }
  return x;
}

}  // namespace

void pack_step(packer& pk, const actor::step_report& x) {
  pk.pack_map(12 + pair_entries);
  for (auto [key, value] : {std::pair{"loss", x.loss},
                            {"grad_norm", x.grad_norm},
                            {"lr", x.lr},
                            {"data_s", x.data_s},
                            {"compute_s", x.compute_s},
                            {"comm_s", x.comm_s},
                            {"replica_s", x.replica_s},
                            {"stage_busy_s", x.stage_busy_s},
                            {"stage_idle_s", x.stage_idle_s}}) {
    pk.pack(key);
    pk.pack(value);
  }
  pk.pack("step");
  pk.pack(x.step);
  pk.pack("first_sample");
  pk.pack(x.first_sample);
  pk.pack("samples");
  pk.pack(x.samples);
  pack_pair_metrics(pk, x.pairs);
}
void pack_eval(packer& pk, const actor::eval_report& x) {
  pk.pack_map(1 + pair_entries);
  pk.pack("loss");
  pk.pack(x.loss);
  pack_pair_metrics(pk, x.pairs);
}
absl::StatusOr<actor::eval_report> unpack_eval(const msgpack::object& o) {
  TROUPE_ASSIGN_OR_RETURN(auto m, map_view::of(o, "eval_report"));
  actor::eval_report x;
  TROUPE_ASSIGN_OR_RETURN(x.loss, m.get_double("loss", 0));
  TROUPE_ASSIGN_OR_RETURN(x.pairs, unpack_pair_metrics(m));
  return x;
}

absl::StatusOr<actor::step_report> unpack_step(const msgpack::object& o) {
  auto m = map_view::of(o, "step_report");
  if (!m.ok()) return m.status();
  actor::step_report x;
  auto step = m->get_int("step", 0);
  if (!step.ok()) return step.status();
  x.step = *step;
  TROUPE_ASSIGN_OR_RETURN(x.first_sample, m->get_int("first_sample", 0));
  TROUPE_ASSIGN_OR_RETURN(x.samples, m->get_int("samples", 0));
  for (auto [key, out] : {std::pair{"loss", &x.loss},
                          {"grad_norm", &x.grad_norm},
                          {"lr", &x.lr},
                          {"data_s", &x.data_s},
                          {"compute_s", &x.compute_s},
                          {"comm_s", &x.comm_s},
                          {"replica_s", &x.replica_s},
                          {"stage_busy_s", &x.stage_busy_s},
                          {"stage_idle_s", &x.stage_idle_s}}) {
    TROUPE_ASSIGN_OR_RETURN(*out, m->get_double(key, 0));  // absent figures are zero
  }
  TROUPE_ASSIGN_OR_RETURN(x.pairs, unpack_pair_metrics(*m));
  return x;
}

void pack_group_change(packer& pk, const actor::group_change& x) {
  pk.pack_map(8);
  pk.pack("generation");
  pk.pack(x.generation);
  pk.pack("rank");
  pk.pack(x.rank);
  pk.pack("ranks");
  pk.pack(x.ranks);
  pk.pack("from");
  pk.pack(static_cast<int32_t>(x.from));
  pk.pack("basis");
  pk.pack(x.basis);
  pk.pack("steps");
  pk.pack(x.steps);
  pk.pack("cursor");
  pk.pack(x.cursor);
  pk.pack("checkpoint");
  pk.pack(x.checkpoint);
}

absl::StatusOr<actor::group_change> unpack_group_change(const msgpack::object& o) {
  TROUPE_ASSIGN_OR_RETURN(auto m, map_view::of(o, "group_change"));
  actor::group_change x;
  TROUPE_ASSIGN_OR_RETURN(x.generation, m.get_uint("generation"));
  TROUPE_ASSIGN_OR_RETURN(uint64_t rank, m.get_uint("rank"));
  TROUPE_ASSIGN_OR_RETURN(uint64_t ranks, m.get_uint("ranks"));
  TROUPE_ASSIGN_OR_RETURN(uint64_t from, m.get_uint("from"));
  TROUPE_ASSIGN_OR_RETURN(x.basis, m.get_uint("basis"));
  TROUPE_ASSIGN_OR_RETURN(uint64_t steps, m.get_uint("steps"));
  TROUPE_ASSIGN_OR_RETURN(uint64_t cursor, m.get_uint("cursor"));
  TROUPE_ASSIGN_OR_RETURN(x.checkpoint, m.get_string("checkpoint"));
  if (ranks < 1 || ranks > 65536 || rank >= ranks || cursor > uint64_t{1} << 62 ||
      steps > uint64_t{1} << 62 || from > 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "group_change: rank ", rank, " must be a rank of a group of ", ranks,
        " (1..65536), cursor ", cursor, " a sample index, steps ", steps,
        " a step count, and from ", from, " 0 (members), 1 (checkpoint) or 2 (initial)"));
  }
  x.rank = static_cast<int32_t>(rank);
  x.ranks = static_cast<int32_t>(ranks);
  x.from = static_cast<actor::group_change::source>(from);
  x.steps = static_cast<int64_t>(steps);
  x.cursor = static_cast<int64_t>(cursor);
  return x;
}

void pack_shard(packer& pk, const actor::checkpoint_shard& x) {
  pk.pack_map(6);
  pk.pack("step");
  pk.pack(x.step);
  pk.pack("rank");
  pk.pack(x.rank);
  pk.pack("cursor");
  pk.pack(x.cursor);
  pk.pack("stall_s");
  pk.pack(x.stall_s);
  pk.pack("write_s");
  pk.pack(x.write_s);
  pk.pack("files");
  pk.pack_array(static_cast<uint32_t>(x.files.size()));
  for (const auto& f : x.files) {
    pk.pack_map(3);
    pk.pack("name");
    pk.pack(f.name);
    pk.pack("bytes");
    pk.pack(f.bytes);
    pk.pack("sha256");
    pk.pack(f.sha256);
  }
}
absl::StatusOr<actor::checkpoint_shard> unpack_shard(const msgpack::object& o) {
  TROUPE_ASSIGN_OR_RETURN(auto m, map_view::of(o, "checkpoint_shard"));
  actor::checkpoint_shard x;
  TROUPE_ASSIGN_OR_RETURN(x.step, m.get_int("step", 0));
  TROUPE_ASSIGN_OR_RETURN(int64_t rank, m.get_int("rank", 0));
  x.rank = static_cast<int32_t>(rank);
  TROUPE_ASSIGN_OR_RETURN(x.cursor, m.get_int("cursor", 0));
  for (auto [key, out] : {std::pair{"stall_s", &x.stall_s}, {"write_s", &x.write_s}}) {
    TROUPE_ASSIGN_OR_RETURN(*out, m.get_double(key, 0));
  }
  const msgpack::object* files = m.find("files");
  if (files == nullptr || files->type != msgpack::type::ARRAY) {
    return absl::InvalidArgumentError("checkpoint_shard: 'files' must be an array");
  }
  for (uint32_t i = 0; i < files->via.array.size; ++i) {
    TROUPE_ASSIGN_OR_RETURN(auto f, map_view::of(files->via.array.ptr[i], "checkpoint_shard file"));
    checkpoint::file_record file;
    TROUPE_ASSIGN_OR_RETURN(file.name, f.get_string("name"));
    TROUPE_ASSIGN_OR_RETURN(file.bytes, f.get_uint("bytes"));
    TROUPE_ASSIGN_OR_RETURN(file.sha256, f.get_string("sha256"));
    x.files.push_back(std::move(file));
  }
  return x;
}

void pack_generation(packer& pk, const actor::generation_request& x) {
  const bool pools = x.pooling != actor::pooling_type::none;
  pk.pack_map(20 + (pools ? 1 : 0));
  pk.pack("id");
  pk.pack(x.id);
  if (pools) {  // left out for a generation, as an older router sends
    pk.pack("pooling");
    pk.pack(static_cast<int32_t>(x.pooling));
  }
  pk.pack("stop_token_ids");
  pack_ids(pk, x.stop_token_ids);
  pk.pack("min_weights_version");
  pk.pack(x.min_weights_version);
  pk.pack("stream");
  pk.pack(x.stream);
  pk.pack("include_stop_str_in_output");
  pk.pack(x.include_stop_str_in_output);
  pk.pack("top_logprobs");
  pk.pack(x.top_logprobs);
  pk.pack("prompt");
  pack_ids(pk, x.prompt);
  pk.pack("temperature");
  pk.pack(static_cast<double>(x.temperature));
  pk.pack("top_k");
  pk.pack(x.top_k);
  pk.pack("top_p");
  pk.pack(static_cast<double>(x.top_p));
  pk.pack("seed");
  pk.pack(x.seed);
  pk.pack("max_tokens");
  pk.pack(x.max_tokens);
  pk.pack("stop");
  pk.pack(x.stop);
  pk.pack("frequency_penalty");
  pk.pack(static_cast<double>(x.frequency_penalty));
  pk.pack("presence_penalty");
  pk.pack(static_cast<double>(x.presence_penalty));
  pk.pack("repetition_penalty");
  pk.pack(static_cast<double>(x.repetition_penalty));
  pk.pack("min_tokens");
  pk.pack(x.min_tokens);
  std::vector<int32_t> bias_tokens;
  std::vector<float> biases;
  for (const auto& b : x.logit_bias) {
    bias_tokens.push_back(b.token);
    biases.push_back(b.bias);
  }
  pk.pack("logit_bias_tokens");
  pack_ids(pk, bias_tokens);
  pk.pack("logit_bias_values");
  pack_floats(pk, biases);
  pk.pack("json_schema");
  pk.pack(x.json_schema);
}
absl::StatusOr<actor::generation_request> unpack_generation(const msgpack::object& o) {
  TROUPE_ASSIGN_OR_RETURN(auto m, map_view::of(o, "generation_request"));
  actor::generation_request x;
  TROUPE_ASSIGN_OR_RETURN(x.id, m.get_uint("id"));
  TROUPE_ASSIGN_OR_RETURN(x.prompt,
                          unpack_ids_bin(m.find("prompt"), "generation_request: 'prompt'"));
  TROUPE_ASSIGN_OR_RETURN(double temperature, m.get_double("temperature", 1.0));
  TROUPE_ASSIGN_OR_RETURN(double top_p, m.get_double("top_p", 1.0));
  TROUPE_ASSIGN_OR_RETURN(int64_t top_k, m.get_int("top_k", 0));
  TROUPE_ASSIGN_OR_RETURN(x.seed, m.get_uint("seed", 0));
  TROUPE_ASSIGN_OR_RETURN(x.min_weights_version, m.get_uint("min_weights_version", 0));
  TROUPE_ASSIGN_OR_RETURN(int64_t max_tokens, m.get_int("max_tokens", 16));
  TROUPE_ASSIGN_OR_RETURN(int64_t top_logprobs, m.get_int("top_logprobs", 0));
  if (top_logprobs < 0 || top_logprobs > 1 << 20) {
    return absl::InvalidArgumentError("generation_request: 'top_logprobs' is out of range");
  }
  x.top_logprobs = static_cast<int32_t>(top_logprobs);
  TROUPE_ASSIGN_OR_RETURN(x.stop, m.get_strings("stop"));
  if (const msgpack::object* ids = m.find("stop_token_ids"); ids != nullptr) {
    TROUPE_ASSIGN_OR_RETURN(x.stop_token_ids,
                            unpack_ids_bin(ids, "generation_request: 'stop_token_ids'"));
  }
  for (auto [key, out] : {std::pair{"include_stop_str_in_output", &x.include_stop_str_in_output},
                          {"stream", &x.stream}}) {
    if (const msgpack::object* flag = m.find(key); flag != nullptr) {
      if (flag->type != msgpack::type::BOOLEAN) {
        return absl::InvalidArgumentError(
            absl::StrCat("generation_request: '", key, "' must be a boolean"));
      }
      *out = flag->via.boolean;
    }
  }
  x.temperature = static_cast<float>(temperature);
  x.top_p = static_cast<float>(top_p);
  x.top_k = static_cast<int32_t>(top_k);
  x.max_tokens = static_cast<int32_t>(max_tokens);
  // The penalties, logit bias and min_tokens (absent from a peer that sends none).
  for (auto [key, out, fallback] : {std::tuple{"frequency_penalty", &x.frequency_penalty, 0.0},
                                    {"presence_penalty", &x.presence_penalty, 0.0},
                                    {"repetition_penalty", &x.repetition_penalty, 1.0}}) {
    TROUPE_ASSIGN_OR_RETURN(double v, m.get_double(key, fallback));
    *out = static_cast<float>(v);
  }
  TROUPE_ASSIGN_OR_RETURN(int64_t min_tokens, m.get_int("min_tokens", 0));
  if (min_tokens < 0 || min_tokens > INT32_MAX) {
    return absl::InvalidArgumentError("generation_request: 'min_tokens' is out of range");
  }
  x.min_tokens = static_cast<int32_t>(min_tokens);
  const msgpack::object* bias_tokens = m.find("logit_bias_tokens");
  const msgpack::object* biases = m.find("logit_bias_values");
  if ((bias_tokens == nullptr) != (biases == nullptr)) {
    return absl::InvalidArgumentError(
        "generation_request: 'logit_bias_tokens' and 'logit_bias_values' come together");
  }
  if (bias_tokens != nullptr) {
    TROUPE_ASSIGN_OR_RETURN(auto tokens,
                            unpack_ids_bin(bias_tokens, "generation_request: 'logit_bias_tokens'"));
    TROUPE_ASSIGN_OR_RETURN(auto values,
                            unpack_floats_bin(*biases, "generation_request: 'logit_bias_values'"));
    if (tokens.size() != values.size()) {
      return absl::InvalidArgumentError(absl::StrCat("generation_request: ", tokens.size(),
                                                     " logit_bias_tokens but ", values.size(),
                                                     " logit_bias_values"));
    }
    for (size_t i = 0; i < tokens.size(); ++i)
      x.logit_bias.push_back({tokens[i], values[i]});
  }
  TROUPE_ASSIGN_OR_RETURN(x.json_schema, m.get_string("json_schema", ""));
  TROUPE_ASSIGN_OR_RETURN(int64_t pooling, m.get_int("pooling", 0));
  if (pooling < 0 || pooling > 2) {
    return absl::InvalidArgumentError(absl::StrCat("generation_request: 'pooling' is ", pooling,
                                                   "; it must be 0 (none), 1 (last) or 2 (mean)"));
  }
  x.pooling = static_cast<actor::pooling_type>(pooling);
  return x;
}

void pack_worker_report(packer& pk, const actor::worker_report& x) {
  pk.pack_map(2 + std::size(report_counts));
  pk.pack("events");
  pack_events(pk, x.events);
  for (const auto& [name, member] : report_counts) {
    pk.pack(name);
    pk.pack(x.*member);
  }
  pk.pack("batch_sizes");
  pack_ids(pk, x.batch_sizes);
}
absl::StatusOr<actor::worker_report> unpack_worker_report(const msgpack::object& o) {
  TROUPE_ASSIGN_OR_RETURN(auto m, map_view::of(o, "worker_report"));
  actor::worker_report x;
  const msgpack::object* events = m.find("events");
  if (events == nullptr) return absl::InvalidArgumentError("worker_report: 'events' is missing");
  TROUPE_ASSIGN_OR_RETURN(x.events, unpack_events(*events));
  for (const auto& [name, member] : report_counts) {
    TROUPE_ASSIGN_OR_RETURN(int64_t v, m.get_int(name, 0));
    if (v < 0 || v > INT32_MAX) {
      return absl::InvalidArgumentError(absl::StrCat("worker_report: '", name, "' is ", v));
    }
    x.*member = static_cast<int32_t>(v);
  }
  TROUPE_ASSIGN_OR_RETURN(x.batch_sizes,
                          unpack_ids_bin(m.find("batch_sizes"), "worker_report: 'batch_sizes'"));
  return x;
}

}  // namespace troupe::cluster::wire

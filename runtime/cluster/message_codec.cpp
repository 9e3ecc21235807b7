#include "runtime/cluster/message_codec.hpp"

#include <algorithm>
#include <functional>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "runtime/actor/messages.hpp"
#include "runtime/actor/status_bridge.hpp"
#include "runtime/cluster/msgpack_view.hpp"
#include "runtime/cluster/rl_wire.hpp"
#include "runtime/cluster/wire_structs.hpp"

namespace troupe::cluster {
namespace {

// -- CAF's own types ---------------------------------------------------------------------------

// caf::error: troupe errors keep their Status code and message; CAF's own ("system", "exit")
// keep category and code.
void pack_error(packer& pk, const caf::error& e) {
  const absl::Status s = actor::to_status(e);
  pk.pack_map(4);
  pk.pack("category");
  pk.pack(caf::to_string(e.category()));
  pk.pack("code");
  pk.pack(static_cast<uint32_t>(e.code()));
  pk.pack("status");
  pk.pack(static_cast<uint32_t>(s.code()));
  pk.pack("message");
  pk.pack(std::string(s.message()));
}

absl::StatusOr<caf::error> unpack_error(const msgpack::object& o) {
  auto m = map_view::of(o, "error");
  if (!m.ok()) return m.status();
  auto category = m->get_string("category");
  auto code = m->get_uint("code");
  auto status = m->get_uint("status", 13);
  auto message = m->get_string("message", "");
  if (!category.ok()) return category.status();
  if (!message.ok()) return message.status();
  if (!code.ok() || *code > 255) return absl::InvalidArgumentError("error: bad 'code'");
  if (!status.ok() || *status > 16) return absl::InvalidArgumentError("error: bad 'status'");
  if (*category == "system") return caf::make_error(static_cast<caf::sec>(*code), *message);
  if (*category == "exit") return caf::make_error(static_cast<caf::exit_reason>(*code));
  return actor::to_error(absl::Status(static_cast<absl::StatusCode>(*status), *message));
}

// Atoms travel by name.
void pack_atom(packer& pk, const caf::atom_value& x) {
  pk.pack(caf::to_string(x));
}
absl::StatusOr<caf::atom_value> unpack_atom(const msgpack::object& v) {
  if (v.type != msgpack::type::STR || v.via.str.size > 10) {
    return absl::InvalidArgumentError("element 'atom': expected a short string");
  }
  return caf::atom_from_string(caf::string_view(v.via.str.ptr, v.via.str.size));
}

// -- the element table ------------------------------------------------------------------------

struct element_codec {
  const char* tag;
  // Whether element `i` of `t` has this codec's type.
  bool (*matches)(const caf::type_erased_tuple& t, size_t i);
  std::function<void(const caf::type_erased_tuple& t, size_t i, packer& pk)> pack;
  // Appends the element to a message of any shape.
  std::function<absl::Status(const msgpack::object& value, caf::message_builder& out)> append;
  // The message of this element alone, and of an atom and this element: the shapes of most actor
  // messages, made with one allocation where a message_builder takes five.
  std::function<absl::StatusOr<caf::message>(const msgpack::object& value)> alone;
  std::function<absl::StatusOr<caf::message>(caf::atom_value first, const msgpack::object& value)>
      after_atom;
};

template <class T>
bool holds(const caf::type_erased_tuple& t, size_t i) {
  return t.match_element<T>(i);
}

// The codec of a type packed by `pack` and read by `read`.
template <class T, class Pack, class Read>
element_codec codec(const char* tag, Pack pack, Read read) {
  return {
      tag,
      holds<T>,
      [pack](const caf::type_erased_tuple& t, size_t i, packer& pk) { pack(pk, t.get_as<T>(i)); },
      [read](const msgpack::object& v, caf::message_builder& out) -> absl::Status {
        absl::StatusOr<T> x = read(v);
        if (!x.ok()) return x.status();
        out.append(std::move(*x));
        return absl::OkStatus();
      },
      [read](const msgpack::object& v) -> absl::StatusOr<caf::message> {
        absl::StatusOr<T> x = read(v);
        if (!x.ok()) return x.status();
        return caf::make_message(std::move(*x));
      },
      [read](caf::atom_value first, const msgpack::object& v) -> absl::StatusOr<caf::message> {
        absl::StatusOr<T> x = read(v);
        if (!x.ok()) return x.status();
        return caf::make_message(first, std::move(*x));
      }};
}

// A scalar that msgpack-c converts itself.
template <class T>
element_codec scalar(const char* tag) {
  return codec<T>(
      tag, [](packer& pk, const T& x) { pk.pack(x); },
      [tag](const msgpack::object& v) -> absl::StatusOr<T> {
        try {
          return v.as<T>();
        } catch (const std::exception&) {
          return absl::InvalidArgumentError(absl::StrCat("element '", tag, "': wrong type"));
        }
      });
}

// A struct with pack/unpack functions.
template <class T>
element_codec structured(const char* tag, void (*pack)(packer&, const T&),
                         absl::StatusOr<T> (*unpack)(const msgpack::object&)) {
  return codec<T>(tag, pack, unpack);
}

const std::vector<element_codec>& codecs() {
  static const std::vector<element_codec> table = [] {
    std::vector<element_codec> t;
    t.push_back(structured<caf::atom_value>("atom", pack_atom, unpack_atom));
    t.push_back(scalar<bool>("bool"));
    t.push_back(scalar<int32_t>("i32"));
    t.push_back(scalar<uint32_t>("u32"));
    t.push_back(scalar<int64_t>("i64"));
    t.push_back(scalar<uint64_t>("u64"));
    t.push_back(scalar<double>("f64"));
    t.push_back(scalar<std::string>("str"));
    t.push_back(scalar<std::vector<std::string>>("strs"));
    t.push_back(structured<caf::error>("error", pack_error, unpack_error));
    t.push_back(structured<actor::work_item>("work_item", wire::pack_item, wire::unpack_item));
    t.push_back(structured<std::vector<actor::work_item>>("work_items", wire::pack_items,
                                                          wire::unpack_items));
    t.push_back(
        structured<actor::source_batch>("source_batch", wire::pack_batch, wire::unpack_batch));
    t.push_back(
        structured<actor::sink_report>("sink_report", wire::pack_report, wire::unpack_report));
    t.push_back(structured<actor::custom_message>("custom_message", wire::pack_custom,
                                                  wire::unpack_custom));
    t.push_back(structured<actor::actor_down>("actor_down", wire::pack_down, wire::unpack_down));
    t.push_back(
        structured<actor::job_result>("job_result", wire::pack_result, wire::unpack_result));
    t.push_back(
        structured<actor::token_batch>("token_batch", wire::pack_tokens, wire::unpack_tokens));
    t.push_back(structured<actor::step_report>("step_report", wire::pack_step, wire::unpack_step));
    t.push_back(structured<actor::eval_report>("eval_report", wire::pack_eval, wire::unpack_eval));
    t.push_back(structured<actor::group_change>("group_change", wire::pack_group_change,
                                                wire::unpack_group_change));
    t.push_back(structured<actor::checkpoint_shard>("checkpoint_shard", wire::pack_shard,
                                                    wire::unpack_shard));
    t.push_back(structured<actor::generation_request>("generation_request", wire::pack_generation,
                                                      wire::unpack_generation));
    t.push_back(structured<actor::worker_report>("worker_report", wire::pack_worker_report,
                                                 wire::unpack_worker_report));
    // app: rlhf.
    t.push_back(structured<std::vector<float>>("f32s", wire::pack_floats, wire::unpack_floats_bin));
    t.push_back(
        structured<std::vector<double>>("f64s", wire::pack_doubles, wire::unpack_doubles_bin));
    t.push_back(
        structured<actor::rl_batch>("rl_batch", wire::pack_rl_batch, wire::unpack_rl_batch));
    t.push_back(structured<actor::rl_step_report>("rl_step_report", wire::pack_rl_step,
                                                  wire::unpack_rl_step));
    t.push_back(structured<actor::weight_sync_round>("weight_sync_round", wire::pack_sync_round,
                                                     wire::unpack_sync_round));
    t.push_back(structured<actor::weights_ack>("weights_ack", wire::pack_weights_ack,
                                               wire::unpack_weights_ack));
    t.push_back(structured<actor::reward_request>("reward_request", wire::pack_reward_request,
                                                  wire::unpack_reward_request));
    t.push_back(structured<std::vector<actor::generation_request>>(
        "generation_requests", wire::pack_generations, wire::unpack_generations));
    return t;
  }();
  return table;
}

}  // namespace

absl::Status encode_message(const caf::type_erased_tuple& content, packer& pk) {
  const size_t n = content.size();
  pk.pack_array(static_cast<uint32_t>(n));
  for (size_t i = 0; i < n; ++i) {
    const auto& table = codecs();
    auto c = std::find_if(table.begin(), table.end(),
                          [&](const element_codec& x) { return x.matches(content, i); });
    if (c != table.end()) {
      pk.pack_array(2);
      pk.pack(c->tag);
      c->pack(content, i, pk);
    } else {
      return absl::InvalidArgumentError(absl::StrCat("element ", i, " of ", caf::to_string(content),
                                                     " has no wire form, so the message "
                                                     "cannot be sent to another process"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> encode_message(const caf::type_erased_tuple& content) {
  msgpack::sbuffer buf(256);
  packer pk(buf);
  if (auto s = encode_message(content, pk); !s.ok()) return s;
  return std::string(buf.data(), buf.size());
}

absl::StatusOr<caf::message> decode_message(const msgpack::object& elements) {
  if (elements.type != msgpack::type::ARRAY) {
    return absl::InvalidArgumentError("message: expected a list of [tag, value] elements");
  }
  static const auto by_tag = [] {
    absl::flat_hash_map<std::string, const element_codec*> m;
    for (const auto& c : codecs())
      m[c.tag] = &c;
    return m;
  }();
  const uint32_t n = elements.via.array.size;
  absl::InlinedVector<const element_codec*, 4> codec_of(n);
  for (uint32_t i = 0; i < n; ++i) {
    const msgpack::object& e = elements.via.array.ptr[i];
    if (e.type != msgpack::type::ARRAY || e.via.array.size != 2 ||
        e.via.array.ptr[0].type != msgpack::type::STR) {
      return absl::InvalidArgumentError(
          absl::StrCat("message element ", i, ": expected [tag, value]"));
    }
    const msgpack::object& tag = e.via.array.ptr[0];
    auto it = by_tag.find(absl::string_view(tag.via.str.ptr, tag.via.str.size));
    if (it == by_tag.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("message element ", i, ": unknown tag '",
                       absl::string_view(tag.via.str.ptr, tag.via.str.size), "'"));
    }
    codec_of[i] = it->second;
  }
  const auto value = [&](uint32_t i) -> const msgpack::object& {
    return elements.via.array.ptr[i].via.array.ptr[1];
  };
  if (n == 1) return codec_of[0]->alone(value(0));
  static const element_codec* const atom = by_tag.at("atom");
  if (n == 2 && codec_of[0] == atom) {
    auto first = unpack_atom(value(0));
    if (!first.ok()) return first.status();
    return codec_of[1]->after_atom(*first, value(1));
  }
  caf::message_builder out;
  for (uint32_t i = 0; i < n; ++i) {
    if (auto s = codec_of[i]->append(value(i), out); !s.ok()) return s;
  }
  return out.move_to_message();
}

}  // namespace troupe::cluster

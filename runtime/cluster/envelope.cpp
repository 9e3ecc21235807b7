#include "runtime/cluster/envelope.hpp"

#include "absl/strings/str_cat.h"
#include "runtime/cluster/msgpack_view.hpp"

namespace troupe::cluster {
namespace {

// What a buffer for one frame starts with: most frames are small (msgpack-c starts at 8 KiB,
// a malloc and free per frame too slow for the glibc fast paths).
constexpr size_t small_buffer_bytes = 256;
// The same for the zone a frame is decoded into.
constexpr size_t small_zone_bytes = 1024;

}  // namespace

std::string encode(const envelope& h, const std::function<void(packer&)>& write_payload) {
  msgpack::sbuffer buf(small_buffer_bytes);
  packer pk(buf);
  pk.pack_map(h.from != 0 ? 8 : 7);
  pk.pack("v");
  pk.pack(h.v);
  pk.pack("type");
  pk.pack(h.type);
  pk.pack("src");
  pk.pack(h.src);
  pk.pack("dst");
  pk.pack(h.dst);
  pk.pack("corr");
  pk.pack(h.corr);
  pk.pack("epoch");
  pk.pack(h.epoch);
  if (h.from != 0) {
    pk.pack("from");
    pk.pack(h.from);
  }
  pk.pack("payload");
  write_payload(pk);
  return std::string(buf.data(), buf.size());
}

std::string encode(const envelope& header) {
  return encode(header, [](packer& pk) { pk.pack_map(0); });
}

std::string encode(const envelope& header, absl::string_view payload) {
  std::string out = encode(header, [](packer& pk) { pk.pack_nil(); });
  out.pop_back();  // the nil placeholder is the last byte
  out.append(payload.data(), payload.size());
  return out;
}

map_builder& map_builder::add_bin(absl::string_view key, absl::string_view bytes) {
  packer pk(body_);
  pk.pack(std::string(key));
  pk.pack_bin(static_cast<uint32_t>(bytes.size()));
  pk.pack_bin_body(bytes.data(), static_cast<uint32_t>(bytes.size()));
  ++count_;
  return *this;
}

std::string map_builder::bytes() const {
  msgpack::sbuffer head(16);
  packer(head).pack_map(count_);
  std::string out(head.data(), head.size());
  out.append(body_.data(), body_.size());
  return out;
}

absl::StatusOr<received_envelope> decode(const char* data, size_t size, size_t max_bytes) {
  if (size > max_bytes) {
    return absl::ResourceExhaustedError(
        absl::StrCat("frame of ", size, " bytes exceeds the limit of ", max_bytes, " bytes"));
  }
  size_t offset = 0;
  auto out = decode_next(data, size, offset, max_bytes);
  if (out.ok() && offset != size) {
    return absl::InvalidArgumentError(
        absl::StrCat("frame holds ", size - offset, " bytes after the envelope"));
  }
  return out;
}

absl::StatusOr<received_envelope> decode_next(const char* data, size_t size, size_t& offset,
                                              size_t max_bytes) {
  received_envelope out;
  const size_t start = offset;
  const size_t left = size - offset;
  // No container in a frame can hold more elements than the frame has bytes; the limits stop a
  // few garbage bytes from claiming billions of elements.
  const msgpack::unpack_limit limit(left, left, left, left, left, 64);
  try {
    bool referenced = false;
    auto zone = std::make_unique<msgpack::zone>(small_zone_bytes);
    msgpack::object root =
        msgpack::unpack(*zone, data, size, offset, referenced, nullptr, nullptr, limit);
    out.handle = msgpack::object_handle(root, std::move(zone));
  } catch (const std::exception& e) {
    offset = size;  // where the next envelope would start is unknown
    return absl::InvalidArgumentError(absl::StrCat("not a msgpack envelope: ", e.what()));
  }
  if (offset - start > max_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "envelope of ", offset - start, " bytes exceeds the limit of ", max_bytes, " bytes"));
  }
  auto map = map_view::of(out.handle.get(), "envelope");
  if (!map.ok()) return map.status();
  envelope& h = out.header;
  auto version = map->get_uint("v");
  if (!version.ok()) return version.status();
  h.v = static_cast<uint32_t>(*version);
  if (h.v != protocol_version) {
    return absl::FailedPreconditionError(
        absl::StrCat("protocol version ", h.v, " is not supported; this node speaks version ",
                     protocol_version));
  }
  auto type = map->get_string("type");
  if (!type.ok()) return type.status();
  h.type = std::move(*type);
  auto src = map->get_string("src", "");
  auto dst = map->get_string("dst", "");
  auto corr = map->get_uint("corr", 0);
  auto epoch = map->get_uint("epoch", 0);
  auto from = map->get_uint("from", 0);
  for (const absl::Status* s :
       {&src.status(), &dst.status(), &corr.status(), &epoch.status(), &from.status()}) {
    if (!s->ok()) return *s;
  }
  h.src = std::move(*src);
  h.dst = std::move(*dst);
  h.corr = *corr;
  h.epoch = *epoch;
  h.from = *from;
  const msgpack::object* payload = map->find("payload");
  if (payload == nullptr) return absl::InvalidArgumentError("envelope: missing key 'payload'");
  out.payload = *payload;
  return out;
}

const char* rejection_reason(const absl::Status& decode_error) {
  switch (decode_error.code()) {
    case absl::StatusCode::kResourceExhausted:
      return "oversized";
    case absl::StatusCode::kFailedPrecondition:
      return "bad_version";
    default:
      return "malformed";
  }
}

}  // namespace troupe::cluster

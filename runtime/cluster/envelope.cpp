#include "runtime/cluster/envelope.hpp"

#include "absl/strings/str_cat.h"

namespace troupe::cluster {
namespace {

// What a buffer for one frame starts with: most frames are small (msgpack-c starts at 8 KiB,
// a malloc and free per frame too slow for the glibc fast paths).
constexpr size_t small_buffer_bytes = 256;
// The same for the chunks of the zone a frame is decoded into: up to 1 KiB, glibc serves them
// from its per-thread cache; from 8 KiB, each one first consolidates the free lists.
constexpr size_t small_zone_bytes = 1024;

}  // namespace

void encode_to(msgpack::sbuffer& out, const envelope& h,
               absl::FunctionRef<void(packer&)> write_payload) {
  packer pk(out);
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
}

std::string encode(const envelope& h, absl::FunctionRef<void(packer&)> write_payload) {
  msgpack::sbuffer buf(small_buffer_bytes);
  encode_to(buf, h, write_payload);
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

namespace {

// Unpacks the msgpack object at `offset` into `zone`; strings and bins point into `data` when
// `referenced` (the caller keeps `data`), or are copied into `zone`.
absl::StatusOr<msgpack::object> unpack_at(const char* data, size_t size, size_t& offset,
                                          msgpack::zone& zone, bool referenced) {
  // No container in a frame can hold more elements than the frame has bytes; the limits stop a
  // few garbage bytes from claiming billions of elements.
  const size_t left = size - offset;
  const msgpack::unpack_limit limit(left, left, left, left, left, 64);
  const auto reference = [](msgpack::type::object_type, size_t, void* refer) {
    return *static_cast<bool*>(refer);
  };
  try {
    bool any_referenced = false;
    return msgpack::unpack(zone, data, size, offset, any_referenced, reference, &referenced, limit);
  } catch (const std::exception& e) {
    offset = size;  // where the next envelope would start is unknown
    return absl::InvalidArgumentError(absl::StrCat("not a msgpack envelope: ", e.what()));
  }
}

absl::Status wrong_type(absl::string_view key, absl::string_view expected) {
  return absl::InvalidArgumentError(absl::StrCat("envelope: '", key, "' must be ", expected));
}

// Reads the header fields and the payload of envelope `root` in one pass over its map.
absl::Status read_envelope(const msgpack::object& root, received_envelope& out) {
  if (root.type != msgpack::type::MAP) {
    return absl::InvalidArgumentError("envelope: expected a map");
  }
  envelope& h = out.header;
  bool has_v = false, has_type = false, has_payload = false;
  const msgpack::object_map& map = root.via.map;
  for (uint32_t i = 0; i < map.size; ++i) {
    const msgpack::object& k = map.ptr[i].key;
    const msgpack::object& v = map.ptr[i].val;
    if (k.type != msgpack::type::STR) continue;
    const absl::string_view key(k.via.str.ptr, k.via.str.size);
    if (key == "payload") {
      out.payload = v;
      has_payload = true;
    } else if (key == "type" || key == "src" || key == "dst") {
      if (v.type != msgpack::type::STR) return wrong_type(key, "a string");
      std::string& field = key == "type" ? h.type : key == "src" ? h.src : h.dst;
      field.assign(v.via.str.ptr, v.via.str.size);
      has_type |= key == "type";
    } else if (key == "v" || key == "corr" || key == "epoch" || key == "from") {
      if (v.type != msgpack::type::POSITIVE_INTEGER) {
        return wrong_type(key, "a non-negative integer");
      }
      if (key == "v") {
        h.v = v.via.u64 > UINT32_MAX ? 0 : static_cast<uint32_t>(v.via.u64);
        has_v = true;
      } else {
        (key == "corr" ? h.corr : key == "epoch" ? h.epoch : h.from) = v.via.u64;
      }
    }
  }
  if (!has_v) return absl::InvalidArgumentError("envelope: missing key 'v'");
  if (h.v != protocol_version) {
    return absl::FailedPreconditionError(
        absl::StrCat("protocol version ", h.v, " is not supported; this node speaks version ",
                     protocol_version));
  }
  if (!has_type) return absl::InvalidArgumentError("envelope: missing key 'type'");
  if (!has_payload) return absl::InvalidArgumentError("envelope: missing key 'payload'");
  return absl::OkStatus();
}

absl::Status oversized(const char* what, size_t size, size_t max_bytes) {
  return absl::ResourceExhaustedError(
      absl::StrCat(what, " of ", size, " bytes exceeds the limit of ", max_bytes, " bytes"));
}

}  // namespace

absl::StatusOr<received_envelope> decode(const char* data, size_t size, size_t max_bytes) {
  if (size > max_bytes) return oversized("frame", size, max_bytes);
  auto zone = std::make_unique<msgpack::zone>(small_zone_bytes);
  size_t offset = 0;
  auto root = unpack_at(data, size, offset, *zone, /*referenced=*/false);
  if (!root.ok()) return root.status();
  if (offset != size) {
    return absl::InvalidArgumentError(
        absl::StrCat("frame holds ", size - offset, " bytes after the envelope"));
  }
  received_envelope out;
  if (auto s = read_envelope(*root, out); !s.ok()) return s;
  out.handle = msgpack::object_handle(*root, std::move(zone));
  return out;
}

frame_reader::frame_reader(const char* data, size_t size, size_t max_bytes)
    : data_(data), size_(size), max_bytes_(max_bytes), zone_(small_zone_bytes) {}

absl::StatusOr<received_envelope> frame_reader::next() {
  const size_t start = offset_;
  auto root = unpack_at(data_, size_, offset_, zone_, /*referenced=*/true);
  if (!root.ok()) return root.status();
  if (offset_ - start > max_bytes_) return oversized("envelope", offset_ - start, max_bytes_);
  received_envelope out;
  if (auto s = read_envelope(*root, out); !s.ok()) return s;
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

// The GGUF container byte by byte, read back by a reader written here from the format's
// description (ggml's gguf.h): header, typed metadata, tensor infos with aligned offsets, and
// each element type's encoding (F16, BF16, and Q8_0 blocks as ggml's reference quantizer
// makes them).

#include "models/gguf/gguf_writer.hpp"

#include <cstring>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "tests/support/temp_dir.hpp"

namespace troupe::models::gguf {
namespace {

// A cursor over a file's bytes.
struct reader {
  std::string bytes;
  size_t at = 0;

  template <typename T>
  T get() {
    T v;
    std::memcpy(&v, bytes.data() + at, sizeof(T));
    at += sizeof(T);
    return v;
  }
  std::string string() {
    const auto n = get<uint64_t>();
    std::string s = bytes.substr(at, n);
    at += n;
    return s;
  }
};

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(GgufWriter, WritesTheHeaderMetadataTensorInfosAndAlignedData) {
  testing::temp_dir dir;
  gguf_writer w;
  w.set_string("general.architecture", "llama");
  w.set_u32("llama.block_count", 2);
  w.set_f32("llama.rope.freq_base", 500000.0f);
  w.set_bool("tokenizer.ggml.add_bos_token", true);
  w.set_strings("tokenizer.ggml.merges", {"a b", "ab c"});
  w.set_i32s("tokenizer.ggml.token_type", {1, 3});
  const std::vector<float> norm = {1.0f, 2.0f, 3.0f};
  const std::vector<float> matrix(2 * 32, 0.5f);
  ASSERT_TRUE(w.add_tensor("output_norm.weight", {3}, tensor_type::f32, norm).ok());
  ASSERT_TRUE(w.add_tensor("blk.0.attn_q.weight", {32, 2}, tensor_type::q8_0, matrix).ok());
  ASSERT_TRUE(w.write(dir.file("m.gguf")).ok());

  reader r{read_file(dir.file("m.gguf"))};
  EXPECT_EQ(r.bytes.substr(0, 4), "GGUF");
  r.at = 4;
  EXPECT_EQ(r.get<uint32_t>(), 3u);
  EXPECT_EQ(r.get<uint64_t>(), 2u);  // tensors
  EXPECT_EQ(r.get<uint64_t>(), 6u);  // keys
  EXPECT_EQ(r.string(), "general.architecture");
  EXPECT_EQ(r.get<uint32_t>(), 8u);  // string
  EXPECT_EQ(r.string(), "llama");
  EXPECT_EQ(r.string(), "llama.block_count");
  EXPECT_EQ(r.get<uint32_t>(), 4u);  // u32
  EXPECT_EQ(r.get<uint32_t>(), 2u);
  EXPECT_EQ(r.string(), "llama.rope.freq_base");
  EXPECT_EQ(r.get<uint32_t>(), 6u);  // f32
  EXPECT_EQ(r.get<float>(), 500000.0f);
  EXPECT_EQ(r.string(), "tokenizer.ggml.add_bos_token");
  EXPECT_EQ(r.get<uint32_t>(), 7u);  // bool, one byte
  EXPECT_EQ(r.get<int8_t>(), 1);
  EXPECT_EQ(r.string(), "tokenizer.ggml.merges");
  EXPECT_EQ(r.get<uint32_t>(), 9u);  // array
  EXPECT_EQ(r.get<uint32_t>(), 8u);  // of strings
  EXPECT_EQ(r.get<uint64_t>(), 2u);
  EXPECT_EQ(r.string(), "a b");
  EXPECT_EQ(r.string(), "ab c");
  EXPECT_EQ(r.string(), "tokenizer.ggml.token_type");
  EXPECT_EQ(r.get<uint32_t>(), 9u);
  EXPECT_EQ(r.get<uint32_t>(), 5u);  // of i32
  EXPECT_EQ(r.get<uint64_t>(), 2u);
  EXPECT_EQ(r.get<int32_t>(), 1);
  EXPECT_EQ(r.get<int32_t>(), 3);

  EXPECT_EQ(r.string(), "output_norm.weight");
  EXPECT_EQ(r.get<uint32_t>(), 1u);
  EXPECT_EQ(r.get<int64_t>(), 3);
  EXPECT_EQ(r.get<uint32_t>(), 0u);  // F32
  EXPECT_EQ(r.get<uint64_t>(), 0u);
  EXPECT_EQ(r.string(), "blk.0.attn_q.weight");
  EXPECT_EQ(r.get<uint32_t>(), 2u);
  EXPECT_EQ(r.get<int64_t>(), 32);
  EXPECT_EQ(r.get<int64_t>(), 2);
  EXPECT_EQ(r.get<uint32_t>(), 8u);   // Q8_0
  EXPECT_EQ(r.get<uint64_t>(), 32u);  // 12 bytes of F32, padded to 32
  const size_t data = (r.at + 31) / 32 * 32;
  EXPECT_EQ(r.bytes.size(), data + 32 + 2 * 34 + (96 - 68));  // each tensor padded to 32
  r.at = data;
  EXPECT_EQ(r.get<float>(), 1.0f);
  EXPECT_EQ(r.get<float>(), 2.0f);
  EXPECT_EQ(r.get<float>(), 3.0f);
  r.at = data + 32;
  // A block of 0.5s: scale 0.5 / 127 in f16, every value 127.
  const std::string block = encode_tensor(std::span(matrix).first(32), tensor_type::q8_0);
  EXPECT_EQ(r.bytes.substr(r.at, 34), block);
}

TEST(GgufWriter, EncodesHalvesAndQ8BlocksAsGgml) {
  const std::vector<float> values = {1.0f, -2.0f, 0.1f};
  const std::string f16 = encode_tensor(values, tensor_type::f16);
  ASSERT_EQ(f16.size(), 6u);
  uint16_t h[3];
  std::memcpy(h, f16.data(), 6);
  EXPECT_EQ(h[0], 0x3C00);
  EXPECT_EQ(h[1], 0xC000);
  EXPECT_EQ(h[2], 0x2E66);  // 0.1 rounded to nearest
  const std::string bf16 = encode_tensor(values, tensor_type::bf16);
  std::memcpy(h, bf16.data(), 6);
  EXPECT_EQ(h[0], 0x3F80);
  EXPECT_EQ(h[1], 0xC000);
  EXPECT_EQ(h[2], 0x3DCD);

  std::vector<float> block(32);
  for (int i = 0; i < 32; ++i)
    block[i] = static_cast<float>(i - 16) * 0.25f;  // amax 4: scale 4/127
  const std::string q = encode_tensor(block, tensor_type::q8_0);
  ASSERT_EQ(q.size(), 34u);
  uint16_t scale;
  std::memcpy(&scale, q.data(), 2);
  EXPECT_EQ(scale, std::bit_cast<uint16_t>(static_cast<_Float16>(4.0f / 127.0f)));
  for (int i = 0; i < 32; ++i) {
    const auto want = static_cast<int8_t>(std::round(block[i] * 127.0f / 4.0f));
    EXPECT_EQ(static_cast<int8_t>(q[2 + i]), want) << i;
  }
  EXPECT_EQ(static_cast<int8_t>(q[2]), -127);  // the largest magnitude is +-127
  // All zeros: scale 0, zeros.
  EXPECT_EQ(encode_tensor(std::vector<float>(32, 0.0f), tensor_type::q8_0), std::string(34, '\0'));
}

TEST(GgufWriter, RefusesTensorsThatDoNotFitTheirType) {
  gguf_writer w;
  const std::vector<float> v(33);
  EXPECT_EQ(w.add_tensor("x", {33}, tensor_type::q8_0, v).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(w.add_tensor("y", {4, 8}, tensor_type::f32, v).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(w.tensor_count(), 0u);
  EXPECT_FALSE(w.write("/nonexistent-dir/m.gguf").ok());
}

}  // namespace
}  // namespace troupe::models::gguf

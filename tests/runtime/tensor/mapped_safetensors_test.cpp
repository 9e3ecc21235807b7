#include "runtime/tensor/mapped_safetensors.hpp"

#include <cstring>

#include <gtest/gtest.h>

#include "runtime/tensor/safetensors.hpp"
#include "tests/support/temp_dir.hpp"

namespace troupe::tensor {
namespace {

// A safetensors file of one tensor whose bytes are given, as other tools write them.
std::string file_of(const std::string& dtype, const std::string& shape, const std::string& data) {
  const std::string header = R"({"x":{"dtype":")" + dtype + R"(","shape":)" + shape +
                             R"(,"data_offsets":[0,)" + std::to_string(data.size()) + "]}}";
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i)
    out[i] = static_cast<char>(static_cast<uint64_t>(header.size()) >> (8 * i));
  return out + header + data;
}

std::vector<float> as_f32(const mapped_safetensors& m) {
  const auto& e = m.entries().at(0);
  std::vector<float> out(e.bytes / (e.dtype == "F32" ? 4 : 2));
  EXPECT_TRUE(copy_as_f32(e, out.data()).ok());
  return out;
}

TEST(MappedSafetensors, ConvertsHalfAndBfloat16ToFloat) {
  testing::temp_dir dir;
  // f16: 1.0, -2.0, 0.5, 65504 (largest), 2^-24 (smallest subnormal), +inf.
  const uint16_t halves[] = {0x3C00, 0xC000, 0x3800, 0x7BFF, 0x0001, 0x7C00};
  std::string data(reinterpret_cast<const char*>(halves), sizeof halves);
  auto m = mapped_safetensors::open(dir.write("h.safetensors", file_of("F16", "[6]", data)));
  ASSERT_TRUE(m.ok()) << m.status();
  const std::vector<float> h = as_f32(*m);
  EXPECT_EQ(h[0], 1.0f);
  EXPECT_EQ(h[1], -2.0f);
  EXPECT_EQ(h[2], 0.5f);
  EXPECT_EQ(h[3], 65504.0f);
  EXPECT_EQ(h[4], 5.9604644775390625e-08f);
  EXPECT_TRUE(std::isinf(h[5]));
  // bf16: the upper half of the f32.
  const uint16_t bfloats[] = {0x3F80, 0xC040};  // 1.0, -3.0
  data.assign(reinterpret_cast<const char*>(bfloats), sizeof bfloats);
  m = mapped_safetensors::open(dir.write("b.safetensors", file_of("BF16", "[2]", data)));
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(as_f32(*m), (std::vector<float>{1.0f, -3.0f}));
}

TEST(MappedSafetensors, ReadsTroupesOwnFilesInPlace) {
  testing::temp_dir dir;
  named_tensors file;
  tensor t = tensor::host({2, 3});
  for (int i = 0; i < 6; ++i)
    t.data<float>()[i] = 0.5f * i;
  file.tensors.emplace_back("w", t);
  file.metadata["step"] = "7";
  const std::string path = dir.file("f.safetensors");
  ASSERT_TRUE(write_safetensors(path, file).ok());
  auto m = mapped_safetensors::open(path);
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_NE(m->find("w"), nullptr);
  EXPECT_EQ(m->find("w")->shape, (shape_t{2, 3}));
  EXPECT_EQ(m->metadata().at("step"), "7");
  EXPECT_EQ(std::memcmp(m->find("w")->data, t.data<float>(), 24), 0);
  EXPECT_EQ(m->find("missing"), nullptr);
}

TEST(MappedSafetensors, RefusesWhatItCannotRead) {
  testing::temp_dir dir;
  auto m = mapped_safetensors::open(
      dir.write("d.safetensors", file_of("F64", "[1]", std::string(8, '\0'))));
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find(
                "dtype 'F64' is not supported; troupe reads F32, BF16, F16 and I32"),
            std::string::npos);
  // read_safetensors (troupe's checkpoints) does not take F16.
  const auto r =
      read_safetensors(dir.write("h.safetensors", file_of("F16", "[1]", std::string(2, '\0'))));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("'F16' is not supported"), std::string::npos);
  EXPECT_EQ(mapped_safetensors::open(dir.path().string()).status().code(),
            absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace troupe::tensor

// Every input in tests/fuzz/corpus/<harness>/ (the seeds, and each input a fuzzer crashed on,
// kept once fixed) through its harness, in the normal build: what a fuzzer found stays fixed.

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "tests/fuzz/fuzz_target.hpp"

namespace troupe::fuzz {
namespace {

namespace fs = std::filesystem;

class FuzzReplay : public ::testing::TestWithParam<std::string> {};

TEST_P(FuzzReplay, EveryCorpusInputIsHandled) {
  const auto harness = harnesses().find(GetParam());
  ASSERT_NE(harness, harnesses().end()) << GetParam() << " is not linked into this test";
  const fs::path dir = fs::path(TROUPE_SOURCE_DIR) / "tests/fuzz/corpus" / GetParam();
  int inputs = 0;
  for (const auto& entry : fs::directory_iterator(dir)) {
    std::ifstream in(entry.path(), std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    SCOPED_TRACE(entry.path().string());
    harness->second(bytes);
    ++inputs;
  }
  EXPECT_GT(inputs, 0) << "no seeds in " << dir;
}

INSTANTIATE_TEST_SUITE_P(Harnesses, FuzzReplay,
                         ::testing::Values("peer_frame", "head_request", "config", "safetensors",
                                           "manifest", "openai_request"));

}  // namespace
}  // namespace troupe::fuzz

// A safetensors file as a checkpoint or `serve.checkpoint` reads it.

#include <fstream>

#include <unistd.h>

#include "runtime/tensor/safetensors.hpp"
#include "tests/fuzz/fuzz_target.hpp"

namespace {

void read_file(absl::string_view input) {
  static const std::string path = "/tmp/troupe-fuzz-" + std::to_string(getpid()) + ".safetensors";
  std::ofstream(path, std::ios::binary | std::ios::trunc).write(input.data(), input.size());
  (void)troupe::tensor::read_safetensors(path);
}

}  // namespace

TROUPE_FUZZ_TARGET(safetensors, read_file)

// A safetensors file as a checkpoint or `serve.checkpoint` reads it.

#include <cstdio>
#include <fstream>

#include <unistd.h>

#include "runtime/tensor/safetensors.hpp"
#include "tests/fuzz/fuzz_target.hpp"

namespace {

// The file the inputs are written to, removed when the process ends.
struct scratch_file {
  const std::string path = "/tmp/troupe-fuzz-" + std::to_string(getpid()) + ".safetensors";
  ~scratch_file() { std::remove(path.c_str()); }
};

void read_file(absl::string_view input) {
  static const scratch_file file;
  std::ofstream(file.path, std::ios::binary | std::ios::trunc).write(input.data(), input.size());
  (void)troupe::tensor::read_safetensors(file.path);
}

}  // namespace

TROUPE_FUZZ_TARGET(safetensors, read_file)

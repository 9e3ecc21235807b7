// A checkpoint's manifest.json as `--resume` reads it, beside one small file it may list.

#include <filesystem>
#include <fstream>

#include <unistd.h>

#include "runtime/checkpoint/checkpoint_store.hpp"
#include "tests/fuzz/fuzz_target.hpp"

namespace {

void read_checkpoint(absl::string_view input) {
  static const std::string dir = [] {
    const std::string d = "/tmp/troupe-fuzz-" + std::to_string(getpid()) + "-checkpoint";
    std::filesystem::create_directories(d);
    std::ofstream(d + "/model.safetensors") << "0123456789";
    return d;
  }();
  std::ofstream(dir + "/manifest.json", std::ios::trunc).write(input.data(), input.size());
  (void)troupe::checkpoint::checkpoint_store::read(dir);
}

}  // namespace

TROUPE_FUZZ_TARGET(manifest, read_checkpoint)

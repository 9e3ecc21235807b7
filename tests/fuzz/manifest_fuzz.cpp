// A checkpoint's manifest.json as `--resume` reads it, beside one small file it may list.

#include <filesystem>
#include <fstream>

#include <unistd.h>

#include "runtime/checkpoint/checkpoint_store.hpp"
#include "tests/fuzz/fuzz_target.hpp"

namespace {

// The step directory the inputs are written to, removed when the process ends.
struct scratch_dir {
  const std::string path = "/tmp/troupe-fuzz-" + std::to_string(getpid()) + "-checkpoint";
  scratch_dir() {
    std::filesystem::create_directories(path);
    std::ofstream(path + "/model.safetensors") << "0123456789";
  }
  ~scratch_dir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
};

void read_checkpoint(absl::string_view input) {
  static const scratch_dir dir;
  std::ofstream(dir.path + "/manifest.json", std::ios::trunc).write(input.data(), input.size());
  (void)troupe::checkpoint::checkpoint_store::read(dir.path);
}

}  // namespace

TROUPE_FUZZ_TARGET(manifest, read_checkpoint)

#pragma once

// One fuzz harness, two builds. With TROUPE_LIBFUZZER (scripts/fuzz.sh: clang, libFuzzer, ASan
// and UBSan) `TROUPE_FUZZ_TARGET(name, fn)` is the harness's LLVMFuzzerTestOneInput. In the
// normal build it registers `fn` under `name`, and fuzz_replay_test feeds it every input under
// tests/fuzz/corpus/<name>/ (the seeds and each crash found, kept as regressions).

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>

#include "absl/strings/string_view.h"

namespace troupe::fuzz {

using harness = void (*)(absl::string_view input);

/// The harnesses linked into this binary, by name.
inline std::map<std::string, harness>& harnesses() {
  static std::map<std::string, harness> all;
  return all;
}

struct registration {
  registration(const char* name, harness fn) { harnesses()[name] = fn; }
};

}  // namespace troupe::fuzz

#ifdef TROUPE_LIBFUZZER
#define TROUPE_FUZZ_TARGET(name, fn)                                        \
  extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) { \
    fn(absl::string_view(reinterpret_cast<const char*>(data), size));       \
    return 0;                                                               \
  }
#else
#define TROUPE_FUZZ_TARGET(name, fn) \
  static const ::troupe::fuzz::registration registered_##name(#name, fn);
#endif

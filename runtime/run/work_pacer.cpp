#include "runtime/run/work_pacer.hpp"

#include <fstream>
#include <iterator>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"

namespace troupe::run {

bool work_pacer::may_start() {
  if (!hooks_.hold_file.empty()) {
    std::ifstream in(hooks_.hold_file);
    if (in) {  // held: the file's count of units may still start
      const std::string text((std::istreambuf_iterator<char>(in)), {});
      int64_t allowed = 0;
      if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(text), &allowed)) allowed = 0;
      if (started_ >= allowed) return false;
    }
  }
  ++started_;
  return true;
}

std::chrono::nanoseconds work_pacer::pause_after(std::chrono::nanoseconds took) const {
  if (hooks_.slowdown <= 1) return std::chrono::nanoseconds(0);
  return std::chrono::duration_cast<std::chrono::nanoseconds>(took * (hooks_.slowdown - 1));
}

}  // namespace troupe::run

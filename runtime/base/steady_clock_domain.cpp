#include "runtime/base/steady_clock_domain.hpp"

#include <fstream>
#include <sstream>

namespace troupe {
namespace {

std::string file_text(const char* path) {
  std::ifstream in(path);
  if (!in) return {};
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

const std::string& steady_clock_domain() {
  static const std::string domain = [] {
    std::string boot = file_text("/proc/sys/kernel/random/boot_id");
    while (!boot.empty() && boot.back() == '\n')
      boot.pop_back();
    if (boot.empty()) return std::string();
    // A time namespace shifts CLOCK_MONOTONIC by its offset ("monotonic <s> <ns>"); without
    // the file, the kernel has no time namespaces.
    std::istringstream offsets(file_text("/proc/self/timens_offsets"));
    std::string clock, seconds = "0", nanoseconds = "0";
    while (offsets >> clock && clock != "monotonic") {
      offsets.ignore(256, '\n');
    }
    if (clock == "monotonic") offsets >> seconds >> nanoseconds;
    return boot + "+" + seconds + "." + nanoseconds;
  }();
  return domain;
}

std::chrono::steady_clock::time_point steady_time_from(
    const std::string& domain, int64_t ns, std::chrono::steady_clock::time_point fallback) {
  if (domain.empty() || domain != steady_clock_domain()) return fallback;
  return std::chrono::steady_clock::time_point(std::chrono::nanoseconds(ns));
}

}  // namespace troupe

#include "runtime/metrics/cycle_clock.hpp"

namespace troupe::metrics {
namespace {

double calibrate() {
#if defined(__x86_64__)
  using clock = std::chrono::steady_clock;
  const auto t0 = clock::now();
  const uint64_t c0 = cycle_clock::now();
  while (clock::now() - t0 < std::chrono::milliseconds(5)) {
  }
  const uint64_t c1 = cycle_clock::now();
  const auto ns = std::chrono::duration<double, std::nano>(clock::now() - t0).count();
  return c1 > c0 ? ns / static_cast<double>(c1 - c0) : 1.0;
#else
  return 1.0;  // steady_clock ticks are nanoseconds on Linux
#endif
}

}  // namespace

double cycle_clock::nanos_per_tick() {
  static const double value = calibrate();
  return value;
}

}  // namespace troupe::metrics

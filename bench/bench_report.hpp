#pragma once

// Benchmark output shared by every program in bench/ (DESIGN.md "Benchmarks"): one JSON object
// per line, the project and its baseline measured in the same run, medians of repeats.

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"

namespace troupe::bench {

/// The median of `xs` (which it sorts).
inline double median(std::vector<double> xs) {
  std::sort(xs.begin(), xs.end());
  const size_t n = xs.size();
  return n == 0 ? 0 : n % 2 ? xs[n / 2] : (xs[n / 2 - 1] + xs[n / 2]) / 2;
}

/// Says that `arg` is not an option of `bench`; returns the usage exit code, 2.
inline int unknown_argument(const char* bench, const std::string& arg) {
  std::fprintf(stderr, "%s: unknown argument '%s'; see the comment at the top of bench/%s.cpp\n",
               bench, arg.c_str(), bench);
  return 2;
}

/// Whether a larger value is better (throughput) or a smaller one (latency).
enum class better { higher, lower };

/// Prints one result line from paired repeats: `ours[i]` and `theirs[i]` were measured back to
/// back. Values are medians; the ratio is the median of the per-pair ratios, which cancels the
/// slow drifts of a shared machine. `ratio` > 1 means troupe is better than the baseline.
inline void report(const std::string& bench, const std::string& metric,
                   const std::vector<double>& ours, const std::string& unit,
                   const std::string& baseline, const std::vector<double>& theirs, better direction,
                   nlohmann::json extra = nlohmann::json::object()) {
  std::vector<double> ratios;
  for (size_t i = 0; i < ours.size() && i < theirs.size(); ++i) {
    ratios.push_back(direction == better::higher ? ours[i] / theirs[i] : theirs[i] / ours[i]);
  }
  nlohmann::json line = {{"bench", bench},          {"metric", metric},
                         {"value", median(ours)},   {"unit", unit},
                         {"baseline", baseline},    {"baseline_value", median(theirs)},
                         {"ratio", median(ratios)}, {"repeats", ours.size()}};
  line.update(extra);
  std::printf("%s\n", line.dump().c_str());
  std::fflush(stdout);
}

}  // namespace troupe::bench

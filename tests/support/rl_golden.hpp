#pragma once

// The golden values of the RL math (tests/kernels/fixtures/rl_golden.json, written by
// tests/kernels/make_rl_golden.py from veRL's formulas in PyTorch) and of the preference losses
// (preference_golden.json, tests/kernels/make_preference_golden.py, TRL's formulas).

#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "nlohmann/json.hpp"

namespace troupe::testing {

/// tests/kernels/fixtures/NAME.json, read once.
inline const nlohmann::json& golden_fixture(const std::string& name) {
  static std::map<std::string, nlohmann::json> read;
  auto it = read.find(name);
  if (it == read.end()) {
    std::ifstream in(std::string(TROUPE_SOURCE_DIR) + "/tests/kernels/fixtures/" + name + ".json");
    it = read.emplace(name, nlohmann::json::parse(in)).first;
  }
  return it->second;
}

inline const nlohmann::json& rl_golden() {
  return golden_fixture("rl_golden");
}

/// A JSON array of numbers as floats.
inline std::vector<float> floats(const nlohmann::json& array) {
  return array.get<std::vector<float>>();
}

/// Every element within atol + rtol |want|.
inline void expect_close(const std::vector<float>& got, const std::vector<float>& want,
                         const std::string& what, double atol = 1e-5, double rtol = 1e-5) {
  ASSERT_EQ(got.size(), want.size()) << what;
  int failures = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::abs(double{got[i]} - want[i]) > atol + rtol * std::abs(double{want[i]}) &&
        ++failures <= 5) {
      ADD_FAILURE() << what << "[" << i << "]: " << got[i] << ", want " << want[i];
    }
  }
}

}  // namespace troupe::testing

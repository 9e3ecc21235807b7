#pragma once

#include <string>

namespace troupe::tensor {

/// Where a tensor's bytes live: host memory or one CUDA device.
struct device {
  enum class kind : uint8_t { cpu, cuda };

  kind type = kind::cpu;
  int index = 0;

  static device cpu() { return {}; }
  static device cuda(int index = 0) { return {kind::cuda, index}; }

  [[nodiscard]] bool is_cpu() const { return type == kind::cpu; }
  [[nodiscard]] bool is_cuda() const { return type == kind::cuda; }
  /// "cpu" or "cuda:N".
  [[nodiscard]] std::string name() const {
    return is_cpu() ? "cpu" : "cuda:" + std::to_string(index);
  }
  friend bool operator==(const device&, const device&) = default;
};

}  // namespace troupe::tensor

#include "apps/rlhf/kl_controller.hpp"

#include <algorithm>

namespace troupe::apps::rlhf {

void kl_controller::update(double current_kl, int64_t n_steps) {
  if (horizon_ <= 0) return;
  const double error = std::clamp(current_kl / target_ - 1, -0.2, 0.2);
  value_ *= 1 + error * static_cast<double>(n_steps) / horizon_;
}

}  // namespace troupe::apps::rlhf

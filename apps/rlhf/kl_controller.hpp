#pragma once

// The coefficient of the KL penalty in the reward (veRL's `algorithm.kl_ctrl`): fixed, or
// adaptive as in Ziegler et al. 2019, which moves it towards a target KL:
//   e = clip(current_kl / target_kl - 1, -0.2, 0.2);  beta <- beta * (1 + e * n_steps / horizon)
// Its value is part of an RLHF checkpoint (a resume that reset it would change the run).

#include <cstdint>

namespace troupe::apps::rlhf {

class kl_controller {
 public:
  /// A fixed coefficient.
  static kl_controller fixed(double kl_coef) { return kl_controller(kl_coef, 0, 0); }
  /// An adaptive one; `horizon` must be positive (the config refuses others).
  static kl_controller adaptive(double kl_coef, double target_kl, int64_t horizon) {
    return kl_controller(kl_coef, target_kl, horizon);
  }

  /// beta, the coefficient now.
  [[nodiscard]] double value() const { return value_; }
  /// After a step that measured `current_kl` on `n_steps` responses (veRL passes the batch size).
  void update(double current_kl, int64_t n_steps);
  /// Restores the value a checkpoint saved.
  void restore(double value) { value_ = value; }

 private:
  kl_controller(double value, double target, int64_t horizon)
      : value_(value), target_(target), horizon_(horizon) {}

  double value_;
  double target_;
  int64_t horizon_;  // 0: fixed
};

}  // namespace troupe::apps::rlhf

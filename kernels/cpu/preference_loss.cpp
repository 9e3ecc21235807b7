#include "kernels/preference_loss.hpp"

#include <algorithm>
#include <cmath>

namespace troupe::kernels {
namespace {

// log s(x), without overflow for large |x|.
double log_sigmoid(double x) {
  return -(std::max(-x, 0.0) + std::log1p(std::exp(-std::abs(x))));
}

double sigmoid(double x) {
  return x >= 0 ? 1.0 / (1.0 + std::exp(-x)) : std::exp(x) / (1.0 + std::exp(x));
}

}  // namespace

std::optional<preference_loss> parse_preference_loss(std::string_view name) {
  if (name == "sigmoid") return preference_loss::sigmoid;
  if (name == "hinge") return preference_loss::hinge;
  if (name == "ipo") return preference_loss::ipo;
  return std::nullopt;
}

preference_result preference_loss_of(const preference_pair& p, const preference_options& o) {
  // IPO compares the mean log-prob per token; d(mean) / d(sum) is 1 / tokens.
  const bool mean = o.type == preference_loss::ipo;
  const double nc = mean ? static_cast<double>(p.chosen_tokens) : 1.0;
  const double nr = mean ? static_cast<double>(p.rejected_tokens) : 1.0;
  const double pc = p.policy_chosen / nc, pr = p.policy_rejected / nr;
  const double rc = p.reference_chosen / nc, rr = p.reference_rejected / nr;
  const double logits = (pc - pr) - (rc - rr);
  const double b = o.beta;
  preference_result out;
  double dlogits = 0;
  switch (o.type) {
    case preference_loss::sigmoid: {
      const double eps = o.label_smoothing;
      out.loss = -(1 - eps) * log_sigmoid(b * logits) - eps * log_sigmoid(-b * logits);
      dlogits = b * (-(1 - eps) * sigmoid(-b * logits) + eps * sigmoid(b * logits));
      break;
    }
    case preference_loss::hinge:
      out.loss = std::max(0.0, 1 - b * logits);
      dlogits = 1 - b * logits > 0 ? -b : 0.0;
      break;
    case preference_loss::ipo: {
      const double d = logits - 1 / (2 * b);
      out.loss = d * d;
      dlogits = 2 * d;
      break;
    }
  }
  out.reward_chosen = b * (pc - rc);
  out.reward_rejected = b * (pr - rr);
  out.dchosen = dlogits / nc;
  out.drejected = -dlogits / nr;
  if (o.rpo_alpha != 0) {
    const double tokens = static_cast<double>(p.chosen_tokens);
    out.loss += o.rpo_alpha * (-p.policy_chosen / tokens);
    out.dchosen += -o.rpo_alpha / tokens;
  }
  return out;
}

bradley_terry_result bradley_terry_loss(double chosen, double rejected, double margin) {
  const double d = chosen - rejected - margin;
  const double pull = sigmoid(-d);  // d/dd of -log s(d) is -s(-d)
  return {-log_sigmoid(d), -pull, pull};
}

}  // namespace troupe::kernels

#pragma once

// The preference losses of the alignment pipeline, per pair, as TRL computes them, with their
// derivatives (what seeds the backward pass of the sequences' log-probs or rewards):
//
// DPOTrainer's loss_type, on the pair's log-ratio margin
//   logits = (pi_c - pi_r) - (ref_c - ref_r)
// where pi and ref are the policy's and the reference's log-probs of the chosen and the
// rejected response, summed over the response's tokens (ipo: their mean per token, TRL's
// length normalisation):
//   sigmoid (DPO; cDPO with label_smoothing eps): -(1 - eps) log s(beta logits)
//                                                 - eps log s(-beta logits)
//   hinge (SLiC):                                 max(0, 1 - beta logits)
//   ipo:                                          (logits - 1 / (2 beta))^2
// and TRL's implicit rewards beta (pi - ref) of each response (rewards/chosen, rewards/rejected).
//
// RewardTrainer's Bradley-Terry loss on the reward model's scalar rewards:
//   -log s(r_c - r_r - margin)

#include <cstdint>
#include <optional>
#include <string_view>

namespace troupe::kernels {

enum class preference_loss { sigmoid, hinge, ipo };
/// "sigmoid", "hinge" or "ipo" (TRL's loss_type names); nullopt otherwise.
[[nodiscard]] std::optional<preference_loss> parse_preference_loss(std::string_view name);

struct preference_options {
  preference_loss type = preference_loss::sigmoid;
  double beta = 0.1;
  double label_smoothing = 0.0;  ///< cDPO's eps (sigmoid only)
  /// RPO (TRL's rpo_alpha): adds alpha times the chosen response's negative log-likelihood per
  /// token, -pi_c / chosen_tokens, to each pair's loss (TRL averages it over the batch's chosen
  /// tokens instead of per pair). 0: none.
  double rpo_alpha = 0.0;
};

/// One pair: the summed log-probs of its responses and their lengths in tokens.
struct preference_pair {
  double policy_chosen = 0, policy_rejected = 0, reference_chosen = 0, reference_rejected = 0;
  int64_t chosen_tokens = 1, rejected_tokens = 1;
};

/// A pair's loss, its implicit rewards, and d loss / d policy_chosen and d policy_rejected.
struct preference_result {
  double loss = 0, reward_chosen = 0, reward_rejected = 0, dchosen = 0, drejected = 0;
};

[[nodiscard]] preference_result preference_loss_of(const preference_pair& p,
                                                   const preference_options& o);

/// The Bradley-Terry loss of one pair's rewards, and d loss / d chosen and d rejected.
struct bradley_terry_result {
  double loss = 0, dchosen = 0, drejected = 0;
};
[[nodiscard]] bradley_terry_result bradley_terry_loss(double chosen, double rejected,
                                                      double margin = 0);

}  // namespace troupe::kernels

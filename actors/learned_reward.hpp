#pragma once

// A learned reward (app: rlhf's `reward` role, impl reward_model): a reward model's checkpoint
// (app: reward_model: a GPT trunk with a scalar head) scoring (prompt, response) sequences as it
// was trained to, in batches, forward only. CAF-free; rlhf_app spawns the role around it.

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "models/gpt/gpt_cpu_batch.hpp"
#include "runtime/actor/message_types.hpp"

namespace troupe::actors {

class learned_reward {
 public:
  /// The reward model of `model`'s shape with a value head at `checkpoint` (a run, checkpoints
  /// or checkpoint directory; `setting` names it in errors), scoring on `threads` cores. A
  /// response that ended is scored with `end_string` after it, as the reward model's pairs hold
  /// it.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<learned_reward>> load(
      const models::gpt_config& model, const std::string& checkpoint, const std::string& setting,
      std::string end_string, int threads);

  /// Each sequence's reward: the head's value at the last byte of prompt + response (+ the end
  /// string when it ended). INVALID_ARGUMENT when the request's lists differ in length, or a
  /// sequence is empty or longer than the model's ctx (naming it).
  [[nodiscard]] absl::StatusOr<std::vector<double>> score(const actor::reward_request& request);

 private:
  learned_reward(const models::gpt_config& model, std::string end_string, int threads);

  models::gpt_config model_;
  std::string end_string_;
  std::unique_ptr<models::gpt_layout> layout_;
  std::vector<float> params_;
  std::unique_ptr<models::gpt_cpu_batch> forward_;
};

}  // namespace troupe::actors

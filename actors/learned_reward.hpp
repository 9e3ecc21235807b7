#pragma once

// A learned reward (app: rlhf's `reward` role, impl reward_model): a reward model's checkpoint
// (app: reward_model: a decoder trunk with a scalar head) scoring (prompt, response) sequences
// as it was trained to, in batches, forward only. CAF-free; rlhf_app spawns the role around it.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "models/decoder/decoder_cpu_batch.hpp"
#include "runtime/actor/message_types.hpp"

namespace troupe::actors {

/// The tokens the reward model reads of a prompt and a response that `ended` (or ran out of
/// tokens), as its preference pairs were encoded (tasks::task_codec::reward_tokens).
using reward_sequence = std::function<absl::StatusOr<std::vector<int32_t>>(
    std::string_view prompt, std::string_view response, bool ended)>;

class learned_reward {
 public:
  /// The reward model of `model`'s shape with a value head at `checkpoint` (a run, checkpoints
  /// or checkpoint directory; `setting` names it in errors), reading each sequence as
  /// `sequence` encodes it, scoring on `threads` cores.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<learned_reward>> load(
      const models::decoder_config& model, const std::string& checkpoint,
      const std::string& setting, reward_sequence sequence, int threads);

  /// Each sequence's reward: the head's value at its last token. INVALID_ARGUMENT when the
  /// request's lists differ in length, or a sequence cannot be encoded, is empty or is longer
  /// than the model's ctx (naming it).
  [[nodiscard]] absl::StatusOr<std::vector<double>> score(const actor::reward_request& request);

 private:
  learned_reward(const models::decoder_config& model, reward_sequence sequence, int threads);

  models::decoder_config model_;
  reward_sequence sequence_;
  std::unique_ptr<models::decoder_layout> layout_;
  std::vector<float> params_;
  std::unique_ptr<models::decoder_cpu_batch> forward_;
};

}  // namespace troupe::actors
